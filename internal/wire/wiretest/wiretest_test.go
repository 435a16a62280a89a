package wiretest

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1"
)

// TestSetSetsEveryField: of the messages the guards walk, Fill sets every
// field, Set gives every field a value, one that differs from seed to seed
// (but for a bool or an enum: ServiceEntry's location has one non-zero
// value), and replaces the value it had.
func TestSetSetsEveryField(t *testing.T) {
	for _, msg := range []proto.Message{&networking.WorkloadEntry{}, &networking.ServiceEntry{}} {
		full := msg.ProtoReflect().New()
		Fill(full, 1)
		fields := full.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !full.Has(fd) && fd.ContainingOneof() == nil {
				t.Errorf("Fill leaves %s unset", fd.FullName())
			}
			a, b := msg.ProtoReflect().New(), msg.ProtoReflect().New()
			Set(a, fd, 1)
			Set(b, fd, 2)
			if few := fd.Kind() == protoreflect.BoolKind || fd.Kind() == protoreflect.EnumKind; !a.Has(fd) || !few && proto.Equal(a.Interface(), b.Interface()) {
				t.Errorf("Set gives %s no value, or the same for seeds 1 and 2", fd.FullName())
			}
			Set(a, fd, 2)
			if !proto.Equal(a.Interface(), b.Interface()) {
				t.Errorf("Set does not replace the value of %s", fd.FullName())
			}
		}
	}
}

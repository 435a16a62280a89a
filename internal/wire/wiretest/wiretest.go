// Package wiretest sets the fields of protobuf messages by walking their
// descriptors, for the tests that hold a hand-written list of a message's
// fields against the descriptor of the linked istio.io/api: the rule of
// internal/wire's fields.go, that a field a newer istio.io/api adds fails
// a test until someone classifies it, and is never silently dropped
// (wire's TestEncodersKnowEveryField, model's
// TestWorkloadEntryCarriesEveryField, serviceentry's
// TestWorkloadEndpointsKnowEveryField). It knows no field by name, so a new
// field of any kind is set too.
package wiretest

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxDepth bounds the nesting Fill and Set descend to (a message type may
// contain itself).
const maxDepth = 3

// Fill sets every field of m as Set does with seed. Of the members of a
// oneof, the last set stays.
func Fill(m protoreflect.Message, seed int) {
	fill(m, seed, 0)
}

// Set sets the field fd of m to a value that is not its zero value and
// depends on seed (seed >= 1): two seeds give two different values as far
// as the kind allows (a bool is true whatever the seed; an enum takes its
// non-zero values in turn, and is 0 when it has none). A string is "<field name>-<seed>", a
// number seed; a map has the one entry of that key and value, a list the
// one element; a message has every field set, to a depth of 3. A value fd
// had is replaced.
func Set(m protoreflect.Message, fd protoreflect.FieldDescriptor, seed int) {
	set(m, fd, seed, 0)
}

func fill(m protoreflect.Message, seed, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		set(m, fields.Get(i), seed, depth)
	}
}

func set(m protoreflect.Message, fd protoreflect.FieldDescriptor, seed, depth int) {
	m.Clear(fd)
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		v := mp.NewValue()
		if fd.MapValue().Message() != nil {
			fill(v.Message(), seed, depth+1)
		} else {
			v = scalar(fd.MapValue(), fd.Name(), seed)
		}
		mp.Set(scalar(fd.MapKey(), fd.Name(), seed).MapKey(), v)
	case fd.IsList():
		l := m.Mutable(fd).List()
		if fd.Message() != nil {
			e := l.NewElement()
			if depth < maxDepth {
				fill(e.Message(), seed, depth+1)
			}
			l.Append(e)
			return
		}
		l.Append(scalar(fd, fd.Name(), seed))
	case fd.Message() != nil:
		v := m.NewField(fd)
		if depth < maxDepth {
			fill(v.Message(), seed, depth+1)
		}
		m.Set(fd, v)
	default:
		m.Set(fd, scalar(fd, fd.Name(), seed))
	}
}

// scalar is the value of seed for a field of fd's kind, not a message; a
// string names the field name.
func scalar(fd protoreflect.FieldDescriptor, name protoreflect.Name, seed int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", name, seed))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(fmt.Appendf(nil, "%s-%d", name, seed))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		// The seed-th value that is not the zero value, cyclically.
		values := fd.Enum().Values()
		var nonZero []protoreflect.EnumNumber
		for i := range values.Len() {
			if n := values.Get(i).Number(); n != 0 {
				nonZero = append(nonZero, n)
			}
		}
		if len(nonZero) == 0 {
			return protoreflect.ValueOfEnum(0)
		}
		return protoreflect.ValueOfEnum(nonZero[(seed-1)%len(nonZero)])
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(seed))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(seed))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(seed))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(seed))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(seed))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(seed))
	}
	panic(fmt.Sprintf("wiretest: field %s has kind %v", fd.FullName(), fd.Kind()))
}

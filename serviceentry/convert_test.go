package serviceentry

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire/wiretest"
	"github.com/meshbridge/meshbridge/model"
)

// endpointsIgnore names the fields of istio.io/api's WorkloadEntry that the
// endpoints of a workload deliberately do not carry, each with the reason.
var endpointsIgnore = map[protoreflect.Name]string{
	"network": "model.Endpoint has no network: meshbridge's EDS sends every endpoint as it is, without Istio's split " +
		"horizon across networks (network gateways); the network reaches istiod over MCP and Kubernetes through model.WorkloadEntry",
}

// TestWorkloadEndpointsKnowEveryField holds the endpoints of a workload
// (workloadEndpoints of inlineWorkload, for an inline endpoint, and of
// workloadOf, for a WorkloadEntry) against the descriptor of the linked
// istio.io/api's WorkloadEntry (networking/v1alpha3 workload_entry.proto),
// as internal/wire's TestEncodersKnowEveryField holds its encoders: every
// field makes a difference to the endpoints, or is named in endpointsIgnore
// with the reason, and then makes none. So a field a newer istio.io/api adds
// fails here until someone decides whether clients are sent it (Istio's
// convertWorkloadEntryToServiceInstances is the reference). Both ways give
// the same endpoints for the same spec; the WorkloadEntry's is what
// model.NewWorkloadEntry keeps of it (model's
// TestWorkloadEntryCarriesEveryField). The values are set by walking the
// descriptor (wiretest), so the test knows no field by name.
func TestWorkloadEndpointsKnowEveryField(t *testing.T) {
	fields := (&networking.WorkloadEntry{}).ProtoReflect().Descriptor().Fields()
	for name := range endpointsIgnore {
		if fields.ByName(name) == nil {
			t.Errorf("endpointsIgnore names %q, which istio.io/api's WorkloadEntry no longer has", name)
		}
	}
	full, full2 := &networking.WorkloadEntry{}, &networking.WorkloadEntry{}
	wiretest.Fill(full.ProtoReflect(), 1)
	wiretest.Fill(full2.ProtoReflect(), 2)
	// The service has a port of each name the two specs' ports have, so
	// that their target ports count.
	svc := &model.Service{Hostname: "a.local", Namespace: "mesh"}
	for _, name := range slices.Sorted(maps.Keys(full.Ports)) {
		svc.Ports = append(svc.Ports, model.Port{Name: name, Number: 8000 + uint32(len(svc.Ports)), Protocol: model.ProtocolGRPC})
	}
	for _, name := range slices.Sorted(maps.Keys(full2.Ports)) {
		svc.Ports = append(svc.Ports, model.Port{Name: name, Number: 8000 + uint32(len(svc.Ports)), Protocol: model.ProtocolGRPC})
	}
	// endpoints returns the endpoints of spec, the same both ways.
	endpoints := func(spec *networking.WorkloadEntry) []*model.Endpoint {
		w := model.NewWorkloadEntry(&model.WorkloadGroup{Namespace: "mesh", Host: "a.local"}, [5]byte{1}, spec, spec.Labels, model.Hash{})
		inline := workloadEndpoints(svc, nil, inlineWorkload(spec, w.Name()))
		if diff := cmp.Diff(inline, workloadEndpoints(svc, nil, workloadOf(w))); diff != "" {
			t.Fatalf("the endpoints of %v, inline (-) and of its WorkloadEntry (+):\n%s", spec, diff)
		}
		return inline
	}
	base := endpoints(full)
	for i := range fields.Len() {
		fd := fields.Get(i)
		other, cleared := proto.CloneOf(full), proto.CloneOf(full)
		wiretest.Set(other.ProtoReflect(), fd, 2)
		cleared.ProtoReflect().Clear(fd)
		changed, clearedChanged := !reflect.DeepEqual(endpoints(other), base), !reflect.DeepEqual(endpoints(cleared), base)
		if reason, ok := endpointsIgnore[fd.Name()]; ok {
			if changed || clearedChanged {
				t.Errorf("the endpoints now depend on %s, which endpointsIgnore says they do not carry (%s): take it off the list", fd.Name(), reason)
			}
			continue
		}
		if !clearedChanged || !changed && !proto.Equal(other, full) {
			t.Errorf("the endpoints of a workload do not carry %s: carry it (workload, inlineWorkload and workloadOf in convert.go) "+
				"or name it in endpointsIgnore with the reason", fd.Name())
		}
	}
}

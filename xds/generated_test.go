package xds

import (
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/model"
)

func TestGenerateReusesUnchangedServices(t *testing.T) {
	ports := func(protocol model.Protocol) []model.Port {
		return []model.Port{{Name: "grpc-80", Number: 80, Protocol: protocol}, {Name: "tcp-81", Number: 81, Protocol: model.ProtocolTCP}}
	}
	base := &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC)}
	first, _, _, last := generatedResources(nil).generate([]*model.Service{base})
	tests := map[string]struct {
		svc    *model.Service
		reused bool
	}{
		"the same service keeps its resources": {svc: base, reused: true},
		"an equal service keeps them": {
			svc: &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC)}, reused: true},
		"what the generators do not read changes nothing": {
			svc: &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC),
				Resolution: model.ResolutionDNS, Labels: map[string]string{"k": "v"}}, reused: true},
		"a port's protocol regenerates": {
			svc: &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolTCP)}},
		"another port regenerates": {
			svc: &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC)[:1]}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clusters, listeners, routes, next := last.generate([]*model.Service{tc.svc})
			if got := next[model.ServiceKey("mesh", "a.local")] == last[model.ServiceKey("mesh", "a.local")]; got != tc.reused {
				t.Fatalf("reused = %v, want %v", got, tc.reused)
			}
			if tc.reused {
				for name, res := range clusters {
					if res != first[name] {
						t.Errorf("cluster %s was encoded again", name)
					}
				}
			}
			services := []*model.Service{tc.svc}
			assertEncodesAll(t, clusters, asMessages(buildClusters(services)))
			assertEncodesAll(t, listeners, asMessages(buildListeners(services)))
			assertEncodesAll(t, routes, asMessages(buildRoutes(services)))
		})
	}
	t.Run("a service gone is dropped", func(t *testing.T) {
		clusters, _, _, next := last.generate(nil)
		if len(clusters) != 0 || len(next) != 0 {
			t.Fatalf("clusters %d, services %d; want none", len(clusters), len(next))
		}
	})
}

func asMessages[M proto.Message](in map[string]M) map[string]proto.Message {
	out := make(map[string]proto.Message, len(in))
	for name, m := range in {
		out[name] = m
	}
	return out
}

// assertEncodesAll checks that got holds exactly want's names, each the
// encoded form of want's message (assertEncodes).
func assertEncodesAll(t *testing.T, got map[string]types.Resource, want map[string]proto.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d resources, want %d", len(got), len(want))
	}
	for name, w := range want {
		assertEncodes(t, w, got[name])
		if !proto.Equal(w, got[name]) {
			t.Errorf("%s: proto.Equal with the encoded resource is false", name)
		}
	}
}

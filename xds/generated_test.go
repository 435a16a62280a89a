package xds

import (
	"bytes"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
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
			wantClusters, wantListeners, wantRoutes := gen.Resources(tc.svc)
			assertSameEncodings(t, wantClusters, clusters)
			assertSameEncodings(t, wantListeners, listeners)
			assertSameEncodings(t, wantRoutes, routes)
		})
	}
	t.Run("a service gone is dropped", func(t *testing.T) {
		clusters, _, _, next := last.generate(nil)
		if len(clusters) != 0 || len(next) != 0 {
			t.Fatalf("clusters %d, services %d; want none", len(clusters), len(next))
		}
	})
}

// assertSameEncodings checks that got holds exactly want's resources, by
// name, each with want's encoding.
func assertSameEncodings(t *testing.T, want []types.Resource, got map[string]types.Resource) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d resources, want %d", len(got), len(want))
	}
	for _, w := range want {
		name := w.(*gen.Encoded).GetName()
		g, ok := got[name].(*gen.Encoded)
		if !ok || !bytes.Equal(g.Encoding(), w.(*gen.Encoded).Encoding()) {
			t.Errorf("%s: got %v, want the encoding gen.Resources gives", name, got[name])
		}
	}
}

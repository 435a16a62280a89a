package xds

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// TestGenerationDiffsAgainstTheLastPush: a full push generates only the
// services whose generator inputs (hostname, ports) changed, and removes
// exactly the resources of vanished services and ports, never a name a
// service still generates.
func TestGenerationDiffsAgainstTheLastPush(t *testing.T) {
	ports := func(protocol model.Protocol) []model.Port {
		return []model.Port{{Name: "grpc-80", Number: 80, Protocol: protocol}, {Name: "tcp-81", Number: 81, Protocol: model.ProtocolTCP}}
	}
	base := &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC)}
	names := func(port uint32) []string {
		c, l := gen.ClusterName(port, "a.local"), gen.ListenerName(port, "a.local")
		return []string{c, l, l, c}
	}
	tests := map[string]struct {
		services    []*model.Service
		regenerated bool
		removed     []string // clusters, listeners, routes, assignments, in that order
	}{
		"the same service generates nothing": {services: []*model.Service{base}},
		"an equal service generates nothing": {
			services: []*model.Service{{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC)}}},
		"what the generators do not read changes nothing": {
			services: []*model.Service{{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC),
				Resolution: model.ResolutionDNS, Labels: map[string]string{"k": "v"}}}},
		"a port's protocol regenerates": {
			services: []*model.Service{{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolTCP)}}, regenerated: true},
		"a port gone regenerates and removes its resources": {
			services:    []*model.Service{{Hostname: "a.local", Namespace: "mesh", Ports: ports(model.ProtocolGRPC)[:1]}},
			regenerated: true, removed: names(81)},
		"a service gone removes its resources": {removed: slices.Concat(names(80), names(81))},
		"a host moving to another namespace keeps its names": {
			services: []*model.Service{{Hostname: "a.local", Namespace: "other", Ports: ports(model.ProtocolGRPC)}}, regenerated: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			shards := newEndpointShards()
			shards.swapPushed([]*model.Service{base})
			prev, vanished := shards.swapPushed(tc.services)
			g := diff(tc.services, prev, vanished)
			if got := len(g.regenerated) > 0; got != tc.regenerated {
				t.Fatalf("regenerated %v, want %v", g.regenerated, tc.regenerated)
			}
			var removed []string
			for _, kind := range [][]string{g.removed[0], g.removed[1], g.removed[2], g.removed[3]} {
				removed = append(removed, slices.Sorted(slices.Values(kind))...)
			}
			want := tc.removed
			if len(want) == 4*2 {
				// Two ports: each kind's names sorted, as above.
				want = []string{want[0], want[4], want[1], want[5], want[2], want[6], want[3], want[7]}
			}
			assertEqual(t, want, removed)
			for _, svc := range g.regenerated {
				clusters, listeners, routes := gen.Resources(svc)
				assertSameEncodings(t, clusters, g.clusters)
				assertSameEncodings(t, listeners, g.listeners)
				assertSameEncodings(t, routes, g.routes)
			}
			if len(g.regenerated) == 0 && len(g.clusters)+len(g.listeners)+len(g.routes) > 0 {
				t.Errorf("resources handed over for unchanged services: %v", slices.Collect(maps.Keys(g.clusters)))
			}
		})
	}
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

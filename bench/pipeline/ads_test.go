package pipeline

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
)

// TestSotWFollowsAddedCluster: a SotW client that re-requests EDS when CDS
// adds a cluster (Subscribe from the receive loop, as the soak's clients
// do) gets the new cluster's ClusterLoadAssignment with no other push to
// come.
func TestSotWFollowsAddedCluster(t *testing.T) {
	gen := NewGenerator(2, 1)
	p, err := Start(gen, Options{Registry: gen.Name(), Type: "consul", HostTemplate: consul.HostTemplate,
		Endpoints: translate.EndpointsWorkloadEntry, DebounceAfter: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.WaitServing(time.Minute); err != nil {
		t.Fatal(err)
	}
	conn, err := ads.Dial(p.XDS.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s, err := ads.OpenSotW(t.Context(), conn, ads.Options{Node: &core.Node{Id: "sotw-test"}, DiscardResources: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	held := make(map[string]bool)
	s.Receive(func(r ads.Receipt) error {
		var names []string
		for _, res := range r.Resp.Resources {
			names = append(names, ads.ResourceName(res.GetValue()))
		}
		switch r.Resp.TypeUrl {
		case resourcev3.ClusterType:
			slices.Sort(names)
			_ = s.Subscribe(resourcev3.EndpointType, names)
		case resourcev3.EndpointType:
			mu.Lock()
			for _, n := range names {
				held[n] = true
			}
			mu.Unlock()
		}
		return nil
	})
	if err := s.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	holds := func(n int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(held) != n {
				return fmt.Errorf("holds %d ClusterLoadAssignments, want %d", len(held), n)
			}
			return nil
		}
	}
	harness.Eventually(t, 30*time.Second, "the first clusters' assignments", holds(2))
	gen.Emit(registries.Snapshot{Registry: gen.Name(), Service: registries.Service{
		Name: ServiceName(2), Instances: []registries.Instance{Instance(2, 0, 2)},
	}})
	harness.Eventually(t, 30*time.Second, "the added cluster's assignment", holds(3))
}

package consul

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestManyServicesBeyondMaxWatches: 300 services with MaxWatches 100 all
// sync, and changes to services followed through /v1/health/state/any are
// seen: a check status change, a new instance, a node-level check, a
// check-less service, and a service handed over to its own watch (package
// doc rule 4). The agent's per-client connection limit is set well below 200
// to show the watcher stays within MaxWatches plus a few.
func TestManyServicesBeyondMaxWatches(t *testing.T) {
	c := harness.StartConsul(t, harness.WithConsulHCL(`limits { http_max_conns_per_client = 130 }`))
	node := c.Node()
	const n = 300
	registerMany(t, c, n)
	reg, rec := runRegistry(t, Config{Address: c.Address(), MaxWatches: 100})

	name := func(i int) string { return fmt.Sprintf("svc-%03d", i) }
	id := func(i, k int) string { return fmt.Sprintf("%s-%d", name(i), k) }
	rec.Eventually(t, "Synced with 300 services of one instance", func(st registrytest.State) bool {
		if st.Synced != 1 || len(st.Good) != n {
			return false
		}
		for i := range n {
			if len(st.Good[name(i)]) != 1 {
				return false
			}
		}
		return true
	})

	c.SetCheck(t, harness.CheckID(id(250, 1)), api.HealthCritical)
	rec.Eventually(t, "svc-250 (polled) loses its critical instance", func(st registrytest.State) bool {
		list, ok := st.Good[name(250)]
		return ok && len(list) == 0
	})

	c.RegisterInstance(t, name(200), id(200, 2), "10.1.0.2", 80, nil, nil, api.HealthPassing)
	rec.Eventually(t, "svc-200 (polled) gains its new instance", func(st registrytest.State) bool {
		return slices.Equal(st.IDs(name(200)), []string{node + "/" + id(200, 1), node + "/" + id(200, 2)})
	})

	// A check-less service beyond MaxWatches: state/any cannot see its
	// instances come and go; the catalog index does.
	c.Register(t, api.AgentServiceRegistration{Name: "zz-nocheck", ID: "zz-1", Address: "10.2.0.1", Port: 80})
	rec.Eventually(t, "zz-nocheck is seen", func(st registrytest.State) bool { return len(st.IDs("zz-nocheck")) == 1 })
	c.Register(t, api.AgentServiceRegistration{Name: "zz-nocheck", ID: "zz-2", Address: "10.2.0.2", Port: 80})
	rec.Eventually(t, "zz-nocheck gains its check-less instance", func(st registrytest.State) bool {
		return len(st.IDs("zz-nocheck")) == 2
	})

	// A node-level check affects every instance on the node: all services.
	if err := c.Client().Agent().EnableNodeMaintenance("test"); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "node maintenance empties every service", func(st registrytest.State) bool {
		for _, list := range st.Good {
			if len(list) != 0 {
				return false
			}
		}
		return true
	})
	if err := c.Client().Agent().DisableNodeMaintenance(); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "every service is back after node maintenance", func(st registrytest.State) bool {
		return len(st.IDs(name(299))) == 1 && len(st.IDs(name(0))) == 1 && len(st.IDs("zz-nocheck")) == 2
	})

	// Removing svc-000 hands svc-100 from state/any to its own watch.
	c.Deregister(t, id(0, 1))
	rec.Eventually(t, "svc-000 is removed", func(st registrytest.State) bool {
		_, ok := st.Good[name(0)]
		return !ok
	})
	c.SetCheck(t, harness.CheckID(id(100, 1)), api.HealthCritical)
	rec.Eventually(t, "svc-100 (now watched) loses its critical instance", func(st registrytest.State) bool {
		list, ok := st.Good[name(100)]
		return ok && len(list) == 0
	})

	if st := reg.Status(); st.Errors != 0 {
		t.Errorf("Status.Errors = %d (last %q), want 0: the watcher must stay under the agent's connection limit", st.Errors, st.LastError)
	}
}

// registerMany registers n services svc-000.. with one passing instance each,
// 16 registrations at a time.
func registerMany(t *testing.T, c *harness.Consul, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			name := fmt.Sprintf("svc-%03d", i)
			err := c.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
				Name: name, ID: name + "-1", Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Port: 80,
				Check: &api.AgentServiceCheck{CheckID: harness.CheckID(name + "-1"), TTL: "1h", Status: api.HealthPassing},
			})
			if err != nil {
				errs <- fmt.Errorf("register %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

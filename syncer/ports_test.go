package syncer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// TestHostPortsStayRandomized plays random snapshots of case-variant
// services ("orders-service", "Orders-Service", "orders_service": one host)
// whose instances listen on their own ports, in two registries, and checks
// rule 3 after each: a host that the Syncer keeps from one step to the next
// keeps its ports unless a service's declared ports say otherwise, and the
// ServiceEntry in the store has the host's port. Every instance a
// non-rejected service lists is served (in the WorkloadEntries), whatever
// its port.
func TestHostPortsStayRandomized(t *testing.T) {
	names := []string{"orders-service", "Orders-Service", "orders_service"}
	ports := []uint32{8080, 34855, 35499, 36807}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		sy, store, _ := newTestSyncer(t, "a", "b")
		for _, reg := range []string{"a", "b"} {
			list(sy, reg, registries.Scope{}, nil)
			sy.Synced(reg)
		}
		type key struct{ reg, name string }
		listed := map[key][]registries.Instance{}
		var prev *hostState
		var prevPorts []uint32
		for step := range 40 {
			k := key{[]string{"a", "b"}[r.IntN(2)], names[r.IntN(len(names))]}
			switch p := r.IntN(10); {
			case p < 1:
				delete(listed, k)
				sy.Snapshot(registries.Snapshot{Registry: k.reg, Service: registries.Service{Name: k.name}, Removed: true})
			case p < 3:
				listed[k] = nil
				sy.Snapshot(snap(k.reg, k.name))
			default:
				var ins []registries.Instance
				for i := range 1 + r.IntN(3) {
					port := ports[r.IntN(len(ports))]
					ins = append(ins, registries.Instance{ID: fmt.Sprintf("%s-%d", k.name, i), Address: fmt.Sprintf("10.0.%d.%d", step, i+1), Port: port, Protocol: "http"})
				}
				listed[k] = ins
				sy.Snapshot(snap(k.reg, k.name, ins...))
			}
			sy.mu.Lock()
			h := sy.hosts["orders-service.service.consul"]
			var now []uint32
			if h != nil {
				now = []uint32{h.ports.Port}
			}
			if h != nil && h == prev && prevPorts != nil && h.ports.Port != 0 && !slices.Equal(now, prevPorts) {
				sy.mu.Unlock()
				t.Fatalf("seed %d step %d: the host's port moved from %v to %v while it was claimed", seed, step, prevPorts, now)
			}
			if h != nil && h.ports.Port != 0 {
				prev, prevPorts = h, now
			} else {
				prev, prevPorts = h, nil
			}
			sy.mu.Unlock()
			flush(t, store)
			se := store.Get(model.KindServiceEntry, "orders-service.service.consul", "mesh")
			if h != nil && h.ports.Port != 0 {
				if se == nil || se.ServiceEntry().GetPorts()[0].GetNumber() != h.ports.Port {
					t.Fatalf("seed %d step %d: ServiceEntry %v, want port %d", seed, step, se, h.ports.Port)
				}
				// Every listed instance of the host is served (the
				// registries all merge: one protocol, conflictPolicy merge).
				served := map[string]bool{}
				for _, we := range store.List(model.KindWorkloadEntry, "") {
					served[we.WorkloadEntry().GetAddress()] = true
				}
				for _, ins := range listed {
					for _, in := range ins {
						if !served[in.Address] {
							t.Fatalf("seed %d step %d: instance %s:%d is not served", seed, step, in.Address, in.Port)
						}
					}
				}
			}
		}
	}
}

// TestHostResolutionFollowsItsServices: a host is DNS while one of the
// services that claim it serves an instance registered by name, another
// registry's included (translate's HostResolution), and every claimant's
// instances are translated for it: the IP ones stay, the name is served.
func TestHostResolutionFollowsItsServices(t *testing.T) {
	sy, store, _ := newTestSyncer(t, "a", "b")
	resolution := func() string {
		flush(t, store)
		se := store.Get(model.KindServiceEntry, "web.service.consul", "mesh")
		if se == nil {
			return "none"
		}
		return se.ServiceEntry().GetResolution().String()
	}
	addresses := func() []string {
		var out []string
		for _, we := range store.List(model.KindWorkloadEntry, "") {
			out = append(out, we.WorkloadEntry().GetAddress())
		}
		slices.Sort(out)
		return out
	}
	sy.Snapshot(snap("a", "web", instance("n1/web", "10.0.0.1", 8080)))
	if got := resolution(); got != "STATIC" {
		t.Fatalf("IP instances only: resolution %s, want STATIC", got)
	}
	sy.Snapshot(snap("b", "web", instance("n2/web", "web-2.example.com", 8081)))
	if got, addrs := resolution(), addresses(); got != "DNS" || !slices.Equal(addrs, []string{"10.0.0.1", "web-2.example.com"}) {
		t.Fatalf("another registry's instance registered by name: resolution %s, addresses %v; want DNS, both", got, addrs)
	}
	sy.Snapshot(registries.Snapshot{Registry: "b", Service: registries.Service{Name: "web"}, Removed: true})
	if got, addrs := resolution(), addresses(); got != "STATIC" || !slices.Equal(addrs, []string{"10.0.0.1"}) {
		t.Fatalf("the name gone: resolution %s, addresses %v; want STATIC, the IP", got, addrs)
	}
}

package consul

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestRemoteDatacenter: a registry naming another, WAN-federated datacenter
// reads that datacenter's services through the local agent and marks them
// with it (Service.Datacenter), so that translate names them
// <svc>.service.<dc>.consul; their locality's region is that datacenter
// (README "Configuration", consul.datacenter; package doc rule 5). Two dev
// agents federated over WAN on 127.0.0.1.
func TestRemoteDatacenter(t *testing.T) {
	dc1 := harness.StartConsul(t)
	dc2 := harness.StartConsul(t, harness.WithConsulHCL(`datacenter = "dc2"`),
		harness.WithConsulHCL(fmt.Sprintf(`retry_join_wan = ["127.0.0.1:%d"]`, dc1.Ports().SerfWAN)))
	registerPassing(t, dc2, "remote-svc", "remote-1", "10.9.0.1", 8080)
	waitFor(t, "dc1 to see dc2 over WAN", func() bool {
		dcs, err := dc1.Client().Catalog().Datacenters()
		return err == nil && slices.Contains(dcs, "dc2")
	})

	_, rec := runRegistry(t, Config{Address: dc1.Address(), Datacenter: "dc2"})
	remote := registries.Service{Name: "remote-svc", Datacenter: "dc2"}.Key().String()
	rec.Eventually(t, "remote-svc read from dc2 through dc1's agent", func(st registrytest.State) bool {
		return len(st.IDs(remote)) == 1
	})
	for _, s := range rec.Snapshots() {
		if s.Service.Name != "remote-svc" || s.Err != nil || s.Removed {
			continue
		}
		if s.Service.Datacenter != "dc2" {
			t.Errorf("Service.Datacenter = %q, want dc2 (a remote datacenter)", s.Service.Datacenter)
		}
		if loc := s.Service.Instances[0].Locality; strings.TrimRight(loc, "/") != "dc2" {
			t.Errorf("Locality = %q, want region dc2 and no zone", loc)
		}
	}

	// Naming the agent's own datacenter is not "remote".
	_, local := runRegistry(t, Config{Address: dc2.Address(), Datacenter: "dc2"})
	local.Eventually(t, "remote-svc read from its own datacenter", func(st registrytest.State) bool {
		return len(st.IDs("remote-svc")) == 1
	})
	for _, s := range local.Snapshots() {
		if s.Service.Name == "remote-svc" && s.Service.Datacenter != "" {
			t.Errorf("Service.Datacenter = %q for the agent's own datacenter, want empty", s.Service.Datacenter)
		}
	}
}

// TestDatacenterWithNoPathServesNothing: a registry naming a datacenter the
// agent has no path to never lists it; whatever its other reads get through
// (the agent answers), the registry says nothing of it is served, not that
// it serves a last-known-good state it never had, and gives Consul's error.
func TestDatacenterWithNoPathServesNothing(t *testing.T) {
	agent := harness.StartConsul(t)
	var logs harness.LockedBuffer
	reg, rec := runRegistry(t, Config{Name: "consul-no-path", Address: agent.Address(), Datacenter: "dc9",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec.Eventually(t, "an error", func(st registrytest.State) bool {
		for _, s := range st.All {
			if s.Err != nil {
				return true
			}
		}
		return false
	})
	waitFor(t, "the outage logged", func() bool { return strings.Contains(logs.String(), "level=WARN") })
	out := logs.String()
	if !strings.Contains(out, "Cannot read the registry; none of its services is served") || strings.Contains(out, "last-known-good") {
		t.Errorf("the registry's log does not say nothing of it is served:\n%s", out)
	}
	if h := reg.Health(); h.Up || !strings.Contains(h.LastError, "No path to datacenter") {
		t.Errorf("Health = %+v, want down with Consul's error", h)
	}
}

package consul

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestFollowsInstances: register → snapshot; add instance; deregister;
// service gone → Removed (package doc rules 1 and 7).
func TestFollowsInstances(t *testing.T) {
	c := harness.StartConsul(t)
	node := c.Node()
	c.RegisterInstance(t, "web", "web-1", "10.0.0.1", 8080, []string{"version=v1", "primary"},
		map[string]string{"protocol": "grpc", "zone": "z1"}, api.HealthPassing)
	reg, rec := runRegistry(t, Config{Address: c.Address()})

	rec.Eventually(t, "Synced and web has web-1", func(st registrytest.State) bool {
		return st.Synced == 1 && slices.Equal(st.IDs("web"), []string{node + "/web-1"})
	})
	st := rec.State()
	got := st.Good["web"]
	_, consulSeen := st.Last["consul"]
	want := []registries.Instance{{
		ID: node + "/web-1", Address: "10.0.0.1", Port: 8080, Protocol: "grpc", Weight: 100, Locality: "dc1/z1/",
		Labels: map[string]string{"version": "v1", "primary": "", "protocol": "grpc", "zone": "z1"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("web instances (-want +got):\n%s", diff)
	}
	if consulSeen {
		t.Errorf("Consul's own service was emitted; want it skipped without an allow-list")
	}

	c.Register(t, api.AgentServiceRegistration{Name: "web", ID: "web-2", Port: 8081}) // no address, no check
	rec.Eventually(t, "web has web-1 and web-2", func(st registrytest.State) bool {
		return slices.Equal(st.IDs("web"), []string{node + "/web-1", node + "/web-2"})
	})
	for _, in := range rec.State().Good["web"] {
		if in.ID == node+"/web-2" && in.Address != "127.0.0.1" {
			t.Errorf("web-2 address = %q, want the node's address 127.0.0.1", in.Address)
		}
	}

	c.Deregister(t, "web-1")
	rec.Eventually(t, "web has only web-2", func(st registrytest.State) bool {
		return slices.Equal(st.IDs("web"), []string{node + "/web-2"})
	})
	c.Deregister(t, "web-2")
	rec.Eventually(t, "web is removed", func(st registrytest.State) bool {
		n := len(st.All)
		return n > 0 && st.All[n-1].Removed && st.All[n-1].Service.Name == "web"
	})
	for _, s := range rec.Snapshots() {
		if s.Err != nil {
			t.Errorf("unexpected error snapshot: %v", s.Err)
		}
	}
	if st := reg.Status(); !st.Synced || st.Services != 0 || st.Instances != 0 || st.LastSuccess.IsZero() {
		t.Errorf("Status = %+v, want synced, no services, no instances, a last success", st)
	}
}

// TestSkipsUnchangedListings: a change that does not change the usable
// instances (here: output of a passing check) emits nothing
// (api/watch/plan.go: skip deep-equal results).
func TestSkipsUnchangedListings(t *testing.T) {
	c := harness.StartConsul(t)
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	_, rec := runRegistry(t, Config{Address: c.Address()})
	rec.Eventually(t, "Synced", func(st registrytest.State) bool { return st.Synced == 1 })
	before := len(rec.Snapshots())

	if err := c.Client().Agent().UpdateTTL(harness.CheckID("web-1"), "new output", api.HealthPassing); err != nil {
		t.Fatal(err)
	}
	// A second service's change proves the watcher has seen Consul's state
	// after the first change before we count.
	registerPassing(t, c, "marker", "marker-1", "10.0.0.9", 80)
	rec.Eventually(t, "marker is seen", func(st registrytest.State) bool { return len(st.IDs("marker")) == 1 })
	for _, s := range rec.Snapshots()[before:] {
		if s.Service.Name == "web" {
			t.Errorf("web re-emitted with an unchanged instance list: %+v", s)
		}
	}
}

// TestHealthFiltering: warning leaves with HealthyOnly and stays without;
// critical and maintenance always leave (package doc rule 6; README
// "Configuration", consul.healthyOnly).
func TestHealthFiltering(t *testing.T) {
	c := harness.StartConsul(t)
	node := c.Node()
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	registerPassing(t, c, "web", "web-2", "10.0.0.2", 80)
	_, strict := runRegistry(t, Config{Name: "strict", Address: c.Address(), HealthyOnly: true})
	_, lenient := runRegistry(t, Config{Name: "lenient", Address: c.Address(), HealthyOnly: false})
	both := []string{node + "/web-1", node + "/web-2"}
	only2 := []string{node + "/web-2"}
	expect := func(what string, wantStrict, wantLenient []string) {
		t.Helper()
		strict.Eventually(t, "strict: "+what, func(st registrytest.State) bool {
			return slices.Equal(st.IDs("web"), wantStrict)
		})
		lenient.Eventually(t, "lenient: "+what, func(st registrytest.State) bool {
			return slices.Equal(st.IDs("web"), wantLenient)
		})
	}
	expect("both passing", both, both)

	c.SetCheck(t, harness.CheckID("web-1"), api.HealthWarning)
	expect("web-1 warning", only2, both)

	c.SetCheck(t, harness.CheckID("web-1"), api.HealthCritical)
	expect("web-1 critical", only2, only2)

	c.SetCheck(t, harness.CheckID("web-1"), api.HealthPassing)
	expect("web-1 passing again", both, both)

	c.Maintenance(t, "web-1", true)
	expect("web-1 in maintenance", only2, only2)

	c.Maintenance(t, "web-1", false)
	expect("web-1 out of maintenance", both, both)
}

// TestAllowList: only services matching the globs are followed; a service
// leaving the allow-list (by going away) is removed.
func TestAllowList(t *testing.T) {
	c := harness.StartConsul(t)
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	registerPassing(t, c, "db", "db-1", "10.0.0.2", 5432)
	_, rec := runRegistry(t, Config{Address: c.Address(), Services: []string{"web*"}})
	rec.Eventually(t, "Synced with web", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 1
	})
	registerPassing(t, c, "web-admin", "web-admin-1", "10.0.0.3", 80)
	rec.Eventually(t, "web-admin is seen", func(st registrytest.State) bool { return len(st.IDs("web-admin")) == 1 })
	for _, s := range rec.Snapshots() {
		if s.Service.Name == "db" {
			t.Errorf("db emitted outside the allow-list: %+v", s)
		}
	}
}

// TestLocalDatacenterIsNotRemote: naming the agent's own datacenter does not
// mark services as remote (hosts stay <svc>.service.consul).
func TestLocalDatacenterIsNotRemote(t *testing.T) {
	c := harness.StartConsul(t)
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	_, rec := runRegistry(t, Config{Address: "http://" + c.Address(), Datacenter: "dc1"})
	rec.Eventually(t, "Synced with web", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 1
	})
	if dc := rec.State().Last["web"].Service.Datacenter; dc != "" {
		t.Errorf("Service.Datacenter = %q, want \"\" for the agent's own datacenter", dc)
	}
}

// TestSpringCloudRegistrationIsHTTP: an instance registered as Spring Cloud
// Consul does (no protocol metadata, an HTTP check of /actuator/health) is
// http, a service with a TTL check is not; a protocol metadata added later
// wins (doc.go rule 5).
func TestSpringCloudRegistrationIsHTTP(t *testing.T) {
	c := harness.StartConsul(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"status":"UP"}`))
	}))
	t.Cleanup(app.Close)
	u, _ := url.Parse(app.URL)
	port, _ := strconv.Atoi(u.Port())
	reg := func(meta map[string]string) {
		c.Register(t, api.AgentServiceRegistration{Name: "orders-service", ID: "orders-service-" + u.Port(), Address: "127.0.0.1",
			Port: port, Meta: meta, Check: &api.AgentServiceCheck{HTTP: app.URL + "/actuator/health", Interval: "1s"}})
	}
	reg(map[string]string{"secure": "false"})
	c.Register(t, api.AgentServiceRegistration{Name: "cache", ID: "cache-1", Address: "127.0.0.1",
		Port: port + 1, Check: &api.AgentServiceCheck{TTL: "1h", Status: api.HealthPassing}})
	_, rec := runRegistry(t, Config{Address: c.Address()})
	rec.Eventually(t, "orders-service is http, cache is not", func(st registrytest.State) bool {
		o, m := st.Good["orders-service"], st.Good["cache"]
		return len(o) == 1 && o[0].Protocol == "http" && len(m) == 1 && m[0].Protocol == ""
	})
	reg(map[string]string{"secure": "false", "protocol": "grpc"})
	rec.Eventually(t, "the protocol metadata wins", func(st registrytest.State) bool {
		o := st.Good["orders-service"]
		return len(o) == 1 && o[0].Protocol == "grpc"
	})
}

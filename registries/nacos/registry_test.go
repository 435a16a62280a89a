package nacos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestRegisterDeregister: ephemeral instances applications register (over
// the HTTP API with heartbeats: appClient) reach the Sink as authoritative
// snapshots (doc.go rules 4, 6, 7), and a deregistration removes the
// instance; Synced comes once.
func TestRegisterDeregister(t *testing.T) {
	p := harness.StartNacos(t)
	app := newNacosApp(t, p, "")
	web1 := instance{service: "web", ip: "10.0.0.1", port: 8080, metadata: map[string]string{"protocol": "grpc", "version": "v1"}}
	app.register(web1)
	harness.EventuallyTrue(t, waitTimeout, "the server lists web", func() bool {
		return slices.Contains(p.ListServices(t, "", ""), "web")
	})
	reg, rec := runRegistry(t, Config{Addresses: []string{p.Address()}}, nil)
	k := key("public", "DEFAULT_GROUP", "web")
	rec.Eventually(t, "Synced with web's instance", func(st registrytest.State) bool {
		return st.Synced == 1 && slices.Equal(st.Addrs(k), []string{"10.0.0.1:8080"})
	})
	got := rec.State().Good[k][0]
	want := registries.Instance{
		ID: "public/DEFAULT_GROUP/web/DEFAULT/10.0.0.1:8080", Address: "10.0.0.1", Port: 8080, Protocol: "grpc",
		Labels: map[string]string{"protocol": "grpc", "version": "v1", ClusterLabel: "DEFAULT"}, Weight: 100,
	}
	if !registries.SameInstances([]registries.Instance{got}, []registries.Instance{want}) {
		t.Errorf("instance = %+v, want %+v", got, want)
	}

	web2 := instance{service: "web", ip: "10.0.0.2", port: 8080}
	start := time.Now()
	newNacosApp(t, p, "").register(web2)
	rec.Eventually(t, "web has both instances", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(k), []string{"10.0.0.1:8080", "10.0.0.2:8080"})
	})
	t.Logf("register → snapshot: %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	app.deregister(web1)
	rec.Eventually(t, "web lost 10.0.0.1", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(k), []string{"10.0.0.2:8080"})
	})
	t.Logf("deregister → snapshot: %s", time.Since(start).Round(time.Millisecond))

	for _, s := range rec.Snapshots() {
		if s.Err != nil || s.Removed {
			t.Errorf("unexpected snapshot %+v", s)
		}
		if s.Service.Namespace != "public" || s.Service.Group != "DEFAULT_GROUP" {
			t.Errorf("snapshot scope %q/%q, want public/DEFAULT_GROUP", s.Service.Namespace, s.Service.Group)
		}
	}
	if st := reg.Status(); !st.Synced || st.Services != 1 || st.Instances != 1 || st.Subscribed != 1 || !st.Up {
		t.Errorf("Status = %+v, want synced, 1 service, 1 instance, 1 subscribed, up", st)
	}
}

// TestInstanceChanges: health, enabled flag, weight and metadata changes of
// persistent instances (registered over the Nacos HTTP API) each reach the
// Sink; an unhealthy or disabled instance is not emitted (doc.go rule 6). The
// server health-checks persistent instances itself (a TCP connect to
// ip:port), so an instance is healthy while a listener holds its port.
func TestInstanceChanges(t *testing.T) {
	p := harness.StartNacos(t)
	up := []*tcpPort{listenTCP(t), listenTCP(t), listenTCP(t)}
	up[1].close() // unhealthy
	reg := func(i int, weight float64, meta map[string]string, enabled bool) {
		p.RegisterInstance(t, "", "", "api", "127.0.0.1", up[i].port, weight, meta, false, true, enabled)
	}
	reg(0, 1, nil, true)
	reg(1, 1, nil, true)
	reg(2, 1, nil, false) // disabled
	_, rec := runRegistry(t, Config{Addresses: []string{p.Address()}}, nil)
	k := key("public", "DEFAULT_GROUP", "api")
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(up[i].port) }
	rec.Eventually(t, "only the healthy, enabled instance", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(k), []string{addr(0)})
	})
	if in := rec.State().ByAddr(k)[addr(0)]; in.Labels[ClusterLabel] != "DEFAULT" || in.ID != "public/DEFAULT_GROUP/api/DEFAULT/"+addr(0) {
		t.Errorf("instance = %+v, want cluster DEFAULT in its label and ID", in)
	}

	up[1].listen(t)
	rec.Eventually(t, "the instance the server's check finds healthy is added", func(st registrytest.State) bool {
		return slices.Contains(st.Addrs(k), addr(1)) && len(st.Addrs(k)) == 2
	})
	reg(2, 1, nil, true)
	rec.Eventually(t, "the instance turned enabled is added", func(st registrytest.State) bool {
		return len(st.Addrs(k)) == 3
	})
	reg(2, 1, nil, false)
	rec.Eventually(t, "the instance turned disabled is dropped", func(st registrytest.State) bool {
		return len(st.Addrs(k)) == 2
	})

	reg(0, 2.5, nil, true)
	rec.Eventually(t, "the weight change", func(st registrytest.State) bool {
		return st.ByAddr(k)[addr(0)].Weight == 250
	})
	reg(0, 2.5, map[string]string{"version": "v2", "protocol": "http", "region": "eu", "zone": "eu-1"}, true)
	rec.Eventually(t, "the metadata change", func(st registrytest.State) bool {
		in := st.ByAddr(k)[addr(0)]
		return in.Labels["version"] == "v2" && in.Protocol == "http" && in.Locality == "eu/eu-1/"
	})
	for lk := range rec.State().ByAddr(k)[addr(0)].Labels {
		if strings.HasPrefix(lk, "internal-nacos-") {
			t.Errorf("label %q: the server's internal metadata is not a label", lk)
		}
	}

	up[0].close()
	rec.Eventually(t, "the instance the server's check finds unhealthy is dropped", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(k), []string{addr(1)})
	})
	for _, s := range rec.Snapshots() {
		if s.Err != nil || s.Removed {
			t.Errorf("unexpected snapshot %+v", s)
		}
	}
}

// TestProtectThreshold: the registry serves what the server pushes. While
// the share of a service's healthy instances is at or below its protect
// threshold, the real server pushes every enabled instance marked healthy
// (reachProtectionThreshold), and the registry serves them all, counts the
// service in Status.Protected and meshbridge_registry_protected_services, and
// logs the change both ways (doc.go rule 6).
func TestProtectThreshold(t *testing.T) {
	p := harness.StartNacos(t)
	up := []*tcpPort{listenTCP(t), listenTCP(t), listenTCP(t)}
	for i := range up {
		p.RegisterInstance(t, "", "", "api", "127.0.0.1", up[i].port, 1, nil, false, true, true)
	}
	p.SetProtectThreshold(t, "", "", "api", 0.5)
	var logs harness.LockedBuffer
	r, rec := runRegistry(t, Config{Addresses: []string{p.Address()}}, &logs)
	k := key("public", "DEFAULT_GROUP", "api")
	rec.Eventually(t, "three healthy instances", func(st registrytest.State) bool { return len(st.Addrs(k)) == 3 })

	// waitProtected waits until n services count as protected, in Status
	// and the metric, and the log has line.
	waitProtected := func(n int, line string) {
		t.Helper()
		harness.Eventually(t, waitTimeout, fmt.Sprintf("%d protected services", n), func() error {
			if got, m := r.Status().Protected, protectedServices(t, r.Name()); got != n || m != float64(n) {
				return fmt.Errorf("Status.Protected = %d, meshbridge_registry_protected_services = %v", got, m)
			}
			return nil
		})
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no log %q:\n%s", line, logs.String())
		}
	}

	up[0].close() // 2 of 3 healthy: above the threshold
	rec.Eventually(t, "the unhealthy instance dropped", func(st registrytest.State) bool { return len(st.Addrs(k)) == 2 })
	if n := r.Status().Protected; n != 0 {
		t.Errorf("Status.Protected = %d above the threshold, want 0", n)
	}

	up[1].close() // 1 of 3 healthy: at or below 0.5, the server sends all three
	rec.Eventually(t, "every instance while the threshold is reached", func(st registrytest.State) bool {
		return len(st.Addrs(k)) == 3
	})
	waitProtected(1, "protect threshold reached")

	up[0].listen(t)
	up[1].listen(t)
	waitProtected(0, "protect threshold left")
	// The server's checks find the two healthy one at a time: the service
	// leaves protection at 2 of 3 and has all three again at 3 of 3.
	rec.Eventually(t, "all three healthy", func(st registrytest.State) bool { return len(st.Addrs(k)) == 3 })
}

// TestScopes: the same service name in two namespaces and two groups is
// four services, each with its own Namespace and Group; Polaris's
// "<group>__<service>" aliases in DEFAULT_GROUP's listing are not services
// (doc.go rule 3).
func TestScopes(t *testing.T) {
	p := harness.StartNacos(t)
	for _, ns := range []string{"", "ns2"} {
		app := newNacosApp(t, p, ns)
		for i, g := range []string{"", "G2"} {
			app.register(instance{group: g, service: "svc", ip: "10.0.2." + strconv.Itoa(i+1), port: 80})
		}
	}
	_, rec := runRegistry(t, Config{
		Addresses: []string{p.Address()}, Namespaces: []string{"public", "ns2"},
		Groups: []string{"DEFAULT_GROUP", "G2"}, RelistInterval: time.Second, ReconcileInterval: 2 * time.Second,
	}, nil)
	want := map[string][]string{
		key("public", "DEFAULT_GROUP", "svc"): {"10.0.2.1:80"},
		key("public", "G2", "svc"):            {"10.0.2.2:80"},
		key("ns2", "DEFAULT_GROUP", "svc"):    {"10.0.2.1:80"},
		key("ns2", "G2", "svc"):               {"10.0.2.2:80"},
	}
	rec.Eventually(t, "four services, one per scope", func(st registrytest.State) bool {
		for k, addrs := range want {
			if !slices.Equal(st.Addrs(k), addrs) {
				return false
			}
		}
		return st.Synced == 1
	})
	for _, s := range rec.Snapshots() {
		if s.Service.Name != "" && want[s.Service.Key().String()] == nil {
			t.Errorf("snapshot of an unexpected service %s: %+v", s.Service.Key(), s)
		}
	}
}

// TestFilters: the services allow-list decides what is subscribed, and the
// cluster filter what is emitted.
func TestFilters(t *testing.T) {
	p := harness.StartNacos(t)
	app := newNacosApp(t, p, "")
	app.register(instance{service: "web-a", ip: "10.0.3.1", port: 80, cluster: "c1"})
	newNacosApp(t, p, "").register(instance{service: "web-a", ip: "10.0.3.2", port: 80, cluster: "c2"})
	app.register(instance{service: "api", ip: "10.0.3.3", port: 80, cluster: "c1"})
	harness.EventuallyTrue(t, waitTimeout, "the server lists web-a and api", func() bool {
		names := p.ListServices(t, "", "")
		return slices.Contains(names, "web-a") && slices.Contains(names, "api")
	})
	reg, rec := runRegistry(t, Config{
		Addresses: []string{p.Address()}, Services: []string{"web*"}, Clusters: []string{"c1"},
	}, nil)
	k := key("public", "DEFAULT_GROUP", "web-a")
	rec.Eventually(t, "web-a with its c1 instance only", func(st registrytest.State) bool {
		return st.Synced == 1 && slices.Equal(st.Addrs(k), []string{"10.0.3.1:80"})
	})
	// A push can reach the Sink before the subscribe answer is counted.
	harness.Eventually(t, waitTimeout, "web-a subscribed", func() error {
		if st := reg.Status(); st.Subscribed != 1 {
			return fmt.Errorf("Status.Subscribed = %d, want 1 (api is not allowed)", st.Subscribed)
		}
		return nil
	})
	for _, s := range rec.Snapshots() {
		if s.Service.Name == "api" {
			t.Errorf("api was emitted: %+v", s)
		}
	}
}

// TestNewServiceAppears: a service registered after the first listing is
// found by the next one (Nacos 2.x has no service-list watch: doc.go rule
// 3), without a restart.
func TestNewServiceAppears(t *testing.T) {
	p := harness.StartNacos(t)
	app := newNacosApp(t, p, "")
	app.register(instance{service: "first", ip: "10.0.4.1", port: 80})
	_, rec := runRegistry(t, Config{Addresses: []string{p.Address()}, RelistInterval: time.Second}, nil)
	rec.Eventually(t, "first", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(key("public", "DEFAULT_GROUP", "first"))) == 1
	})
	start := time.Now()
	app.register(instance{service: "second", ip: "10.0.4.2", port: 80})
	rec.Eventually(t, "second appears", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(key("public", "DEFAULT_GROUP", "second")), []string{"10.0.4.2:80"})
	})
	t.Logf("new service → snapshot: %s (relistInterval 1s)", time.Since(start).Round(time.Millisecond))
}

// TestReconcileCatchesNonDefaultGroup: Polaris pushes nothing to subscribers
// of a group other than DEFAULT_GROUP, so a change there reaches the Sink
// only through the reconcile's queries (doc.go rule 5).
func TestReconcileCatchesNonDefaultGroup(t *testing.T) {
	p := harness.StartPolaris(t)
	app := newApp(t, p.NacosAddress(), "")
	in := instance{group: "G2", service: "orders", ip: "10.0.5.1", port: 80}
	app.register(in)
	harness.EventuallyTrue(t, waitTimeout, "Polaris lists orders in G2", func() bool {
		return slices.Contains(p.ListServices(t, "", "G2"), "orders")
	})
	reg, rec := runRegistry(t, Config{
		Addresses: []string{p.NacosAddress()}, Groups: []string{"G2"},
		RelistInterval: time.Hour, ReconcileInterval: 2 * time.Second,
	}, nil)
	k := key("public", "G2", "orders")
	rec.Eventually(t, "orders", func(st registrytest.State) bool { return len(st.Addrs(k)) == 1 })
	rec.Eventually(t, "orders at weight 100", func(st registrytest.State) bool {
		return st.ByAddr(k)["10.0.5.1:80"].Weight == 100
	})
	in.weight = 4
	start := time.Now()
	app.register(in)
	rec.Eventually(t, "the weight change, through the reconcile", func(st registrytest.State) bool {
		return st.ByAddr(k)["10.0.5.1:80"].Weight == 400
	})
	t.Logf("change in a non-default group → snapshot: %s (reconcileInterval 2s)", time.Since(start).Round(time.Millisecond))
	if st := reg.Status(); st.ReconcileCorrections == 0 {
		t.Errorf("Status.ReconcileCorrections = 0, want the reconcile to have made the change")
	}
}

// TestDubboSkipped: Dubbo services (interface-level names, Dubbo 3
// application-level instances) are not emitted while dubbo.enabled is false,
// and are counted (doc.go rule 8).
func TestDubboSkipped(t *testing.T) {
	p := harness.StartNacos(t)
	app := newNacosApp(t, p, "")
	app.register(instance{service: "providers:com.example.Greeter:1.0.0:", ip: "10.0.6.1", port: 20880})
	app.register(instance{service: "greeter-app", ip: "10.0.6.2", port: 20880,
		metadata: map[string]string{"dubbo.metadata.revision": "abc123", "dubbo.endpoints": `[{"port":20880,"protocol":"dubbo"}]`}})
	app.register(instance{service: "plain", ip: "10.0.6.3", port: 80})
	harness.EventuallyTrue(t, waitTimeout, "the server lists all three", func() bool { return len(p.ListServices(t, "", "")) >= 3 })
	const name = "nacos-dubbo"
	before := skipped(name)
	reg, rec := runRegistry(t, Config{Name: name, Addresses: []string{p.Address()}}, nil)
	rec.Eventually(t, "synced with plain", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(key("public", "DEFAULT_GROUP", "plain"))) == 1
	})
	harness.EventuallyTrue(t, waitTimeout, "both Dubbo services counted", func() bool { return skipped(name)-before == 2 })
	for _, s := range rec.Snapshots() {
		if s.Service.Name != "plain" {
			t.Errorf("snapshot of %q, want plain only: %+v", s.Service.Name, s)
		}
	}
	if st := reg.Status(); st.Skipped != 2 {
		t.Errorf("Status.Skipped = %d, want 2", st.Skipped)
	}
}

// TestServiceTurnsDubbo: a service whose instances turn out to be Dubbo 3
// application-level instances is removed and skipped from then on (doc.go
// rule 8): Polaris never drops a service from its listing, so this is also
// the end-to-end test of a Removed snapshot.
func TestServiceTurnsDubbo(t *testing.T) {
	p := harness.StartNacos(t)
	p.RegisterInstance(t, "", "", "shop", "10.0.6.9", 20880, 1, nil, true, true, true)
	waitListed(t, p, "", "", "shop")
	const name = "nacos-turns-dubbo"
	before := skipped(name)
	reg, rec := runRegistry(t, Config{Name: name, Addresses: []string{p.Address()}}, nil)
	k := key("public", "DEFAULT_GROUP", "shop")
	rec.Eventually(t, "shop", func(st registrytest.State) bool { return len(st.Addrs(k)) == 1 })
	p.RegisterInstance(t, "", "", "shop", "10.0.6.9", 20880, 1, map[string]string{"dubbo.metadata.revision": "r1"}, true, true, true)
	rec.Eventually(t, "shop removed", func(st registrytest.State) bool { _, ok := st.Last[k]; return !ok })
	if got := skipped(name) - before; got != 1 {
		t.Errorf("skipped counter moved by %v, want 1", got)
	}
	harness.Eventually(t, waitTimeout, "shop unsubscribed", func() error {
		if st := reg.Status(); st.Services != 0 || st.Skipped != 1 || st.Subscribed != 0 {
			return fmt.Errorf("Status = %+v, want no service, 1 skipped, none subscribed", st)
		}
		return nil
	})
}

package eureka

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// These tests run against the real Eureka server (tools/eureka: Spring
// Cloud Netflix's eureka-server, test/harness.StartEureka) with its response
// cache shortened, and Spring Boot applications registering through
// spring-cloud-starter-netflix-eureka-client.

// realRegistry is a registry of the servers' URLs reading every second.
func realRegistry(t *testing.T, name string, relist time.Duration, logs *harness.LockedBuffer, servers ...string) *Registry {
	t.Helper()
	if relist == 0 {
		relist = time.Hour
	}
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	r, err := New(Config{Name: name, Servers: servers, Interval: time.Second, RelistInterval: relist,
		RequestTimeout: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRealServerInstances: what users register is served as they register
// it — several instances of one machine on their own ports, an instance
// registered with its hostname (its IP is served), a secure port, metadata and zone — and the
// server's status override takes an instance out and brings it back.
func TestRealServerInstances(t *testing.T) {
	e := harness.StartEureka(t, harness.EurekaOptions{})
	a := harness.EurekaInstance{App: "orders-service", IPAddr: "10.0.0.5", Port: 18080, Metadata: map[string]string{"version": "v1", "zone": "z1"}}
	b := harness.EurekaInstance{App: "orders-service", IPAddr: "10.0.0.5", Port: 18081, SecurePort: 18443}
	// Spring's default (prefer-ip-address=false): the machine's hostname
	// and its IP; the IP is served.
	c := harness.EurekaInstance{App: "orders-service", IPAddr: "10.0.0.6", HostName: "orders-3.example.com", InstanceID: "orders-3:orders-service:8080", Port: 8080}
	for _, in := range []harness.EurekaInstance{a, b, c} {
		e.Register(t, in)
	}
	rec := registrytest.Run(t, realRegistry(t, "eureka-real", 0, nil, e.URL()), 10*time.Second)
	const app = "ORDERS-SERVICE"
	rec.Eventually(t, "three instances", func(st registrytest.State) bool { return len(st.Good[app]) == 3 })
	byID := map[string]bool{}
	for _, in := range rec.State().Good[app] {
		byID[in.ID] = true
		switch in.ID {
		case app + "/" + a.ID():
			if in.Address != "10.0.0.5" || in.Port != 18080 || in.Protocol != "http" || in.Locality != "/z1/" || in.Labels["version"] != "v1" {
				t.Errorf("instance a: %+v", in)
			}
		case app + "/" + b.ID():
			if in.Port != 18081 || in.Protocol != "http" || in.Ports() != nil {
				t.Errorf("instance b (port and securePort): %+v, want its port", in)
			}
		case app + "/" + c.ID():
			if in.Address != "10.0.0.6" || in.Port != 8080 {
				t.Errorf("instance c: %+v", in)
			}
		default:
			t.Errorf("unexpected instance %+v", in)
		}
	}
	e.SetStatus(t, a.App, a.ID(), "OUT_OF_SERVICE")
	rec.Eventually(t, "OUT_OF_SERVICE leaves", func(st registrytest.State) bool {
		return len(st.Good[app]) == 2 && !slices.Contains(st.IDs(app), app+"/"+a.ID())
	})
	e.ClearStatus(t, a.App, a.ID())
	rec.Eventually(t, "UP again comes back", func(st registrytest.State) bool { return len(st.Good[app]) == 3 })
	e.Deregister(t, b.App, b.ID())
	rec.Eventually(t, "a deregistered instance leaves", func(st registrytest.State) bool { return len(st.Good[app]) == 2 })
}

// TestRealSpringApplications: Spring Boot applications register through
// Eureka's client; SIGTERM deregisters (DOWN, then DELETED), and kill -9
// leaves the instance until the server evicts it when its lease ends.
func TestRealSpringApplications(t *testing.T) {
	e := harness.StartEureka(t, harness.EurekaOptions{})
	reg := realRegistry(t, "eureka-spring", 0, nil, e.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	start := time.Now()
	term := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "eureka", Address: e.URL(), Name: "inventory-service",
		Metadata: map[string]string{"version": "v2"}})
	killed := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "eureka", Address: e.URL(), Name: "inventory-service"})
	const app = "INVENTORY-SERVICE"
	addr := func(a *harness.SpringApp) string { return "127.0.0.1:" + strconv.Itoa(a.Port()) }
	rec.Eventually(t, "both applications", func(st registrytest.State) bool {
		got := st.Addrs(app)
		return slices.Contains(got, addr(term)) && slices.Contains(got, addr(killed))
	})
	t.Logf("both applications served %s after the first one started", time.Since(start).Round(10*time.Millisecond))
	if in := rec.State().ByAddr(app)[addr(term)]; in.Protocol != "http" || in.Labels["version"] != "v2" {
		t.Errorf("Spring instance %+v", in)
	}
	term.Stop()
	rec.Eventually(t, "SIGTERM deregisters", func(st registrytest.State) bool { return !slices.Contains(st.Addrs(app), addr(term)) })
	killed.Kill()
	stopped := time.Now()
	rec.Eventually(t, "kill -9: evicted when its lease ends", func(st registrytest.State) bool {
		_, ok := st.Last[app]
		return !ok
	})
	t.Logf("a killed instance left %s after the kill (lease 3 s, eviction every 1 s)", time.Since(stopped).Round(10*time.Millisecond))
}

// TestRealPeerFailover: two peers replicating; the first one is killed.
// Nothing is removed, the bridge reads the other one, and a change made
// there is served.
func TestRealPeerFailover(t *testing.T) {
	peers := harness.StartEurekaPeers(t, 2)
	a := harness.EurekaInstance{App: "pay", IPAddr: "10.0.0.7", Port: 19090}
	peers[0].Register(t, a)
	harness.Eventually(t, 30*time.Second, "replicated to the second peer", func() error {
		if len(peers[1].Instances(t, "PAY")) != 1 {
			return errNotYet
		}
		return nil
	})
	reg := realRegistry(t, "eureka-peers", 0, nil, peers[0].URL(), peers[1].URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced from the first peer", func(st registrytest.State) bool { return len(st.Good["PAY"]) == 1 })
	peers[0].Kill()
	b := harness.EurekaInstance{App: "pay", IPAddr: "10.0.0.8", Port: 19090}
	peers[1].Register(t, b)
	rec.Eventually(t, "a change on the second peer", func(st registrytest.State) bool { return len(st.Good["PAY"]) == 2 })
	if got := reg.Status().Server; got != peers[1].URL() {
		t.Errorf("reading %s, want the second peer", got)
	}
	for _, snap := range rec.Snapshots() {
		if snap.Removed || snap.Err != nil {
			t.Errorf("snapshot %+v while a peer answered", snap)
		}
	}
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-peers", relistFailover)); n != 1 {
		t.Errorf("failover relists %v, want 1", n)
	}
}

// TestRealMissedDelta: the bridge is paused past the server's delta
// retention while one instance is replaced by another, so that the delta
// it reads on resuming is empty and the hashcode unchanged (UP_1_); the
// timed full read serves the new instance.
func TestRealMissedDelta(t *testing.T) {
	const retention = 3 * time.Second
	e := harness.StartEureka(t, harness.EurekaOptions{DeltaRetention: retention})
	old := harness.EurekaInstance{App: "cart", IPAddr: "10.0.0.9", Port: 17070}
	e.Register(t, old)
	reg := realRegistry(t, "eureka-missed", 8*time.Second, nil, e.URL())
	paused := make(chan struct{})
	resume := make(chan struct{})
	var pausing atomic.Bool
	reg.beforePoll = func(ctx context.Context) {
		if !pausing.CompareAndSwap(true, false) {
			return
		}
		close(paused)
		select {
		case <-resume:
		case <-ctx.Done():
		}
	}
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return len(st.Good["CART"]) == 1 })
	pausing.Store(true) // the next round waits
	<-paused
	e.Deregister(t, old.App, old.ID())
	replacement := harness.EurekaInstance{App: "cart", IPAddr: "10.0.0.10", Port: 17070}
	e.Register(t, replacement)
	harness.Eventually(t, 60*time.Second, "the changes gone from the server's delta", func() error {
		if apps := e.Apps(t, "apps/delta"); len(apps.Applications.Application) != 0 {
			return errNotYet
		}
		return nil
	})
	close(resume)
	rec.Eventually(t, "the replacement, by the timed full read", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs("CART"), []string{"10.0.0.10:17070"})
	})
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-missed", relistHashcode)); n != 0 {
		t.Errorf("hashcode relists %v, want 0: the counts did not change", n)
	}
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-missed", relistTimer)); n < 1 {
		t.Errorf("timer relists %v, want at least 1", n)
	}
}

// TestRealHungServer: SIGSTOP makes the registry down within 15 s, its
// endpoints kept; SIGCONT brings it back up.
func TestRealHungServer(t *testing.T) {
	e := harness.StartEureka(t, harness.EurekaOptions{})
	e.Register(t, harness.EurekaInstance{App: "search", IPAddr: "10.0.0.11", Port: 16060})
	logs := &harness.LockedBuffer{}
	reg := realRegistry(t, "eureka-hung-real", 0, logs, e.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return len(st.Good["SEARCH"]) == 1 })
	down, up := registrytest.CheckHang(t, rec, registrytest.Hang{Registry: "eureka-hung-real", Health: reg.Health,
		Pause: func() { e.Pause(t) }, Resume: func() { e.Resume(t) }, Logs: logs, Hold: 3 * time.Second})
	t.Logf("down after %s, up %s after SIGCONT", down, up)
}

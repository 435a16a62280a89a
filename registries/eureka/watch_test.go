package eureka

import (
	"log/slog"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// newTestRegistry is a registry of servers with fast timings: deltas every 1 s,
// no timed full read unless relist says otherwise.
func newTestRegistry(t testing.TB, name string, relist time.Duration, servers ...string) *Registry {
	t.Helper()
	if relist == 0 {
		relist = time.Hour
	}
	r, err := New(Config{Name: name, Servers: servers, Interval: time.Second, RelistInterval: relist,
		RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(st registrytest.State, key string) []string { return st.IDs(key) }

// TestDeltasFollowTheRegistry: after the first full read, changes arrive
// through deltas alone (one request per interval, whatever the number of
// applications): an instance added, one taken DOWN, one deregistered, an
// application that appears and one whose last instance leaves.
func TestDeltasFollowTheRegistry(t *testing.T) {
	s := eurekatest.Start(t)
	s.Put(upInstance("ORDERS", 18080), false)
	s.Put(upInstance("ORDERS", 18081), false)
	reg := newTestRegistry(t, "eureka-deltas", 0, s.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "the first full read", func(st registrytest.State) bool {
		return st.Synced == 1 && slices.Equal(ids(st, "ORDERS"), []string{"ORDERS/host-1:ORDERS:18080", "ORDERS/host-1:ORDERS:18081"})
	})

	s.Put(upInstance("ORDERS", 18082), true)
	rec.Eventually(t, "an added instance", func(st registrytest.State) bool { return len(ids(st, "ORDERS")) == 3 })
	down := upInstance("ORDERS", 18081)
	down.Status = "DOWN"
	s.Put(down, true)
	rec.Eventually(t, "a DOWN instance leaves", func(st registrytest.State) bool {
		return slices.Equal(ids(st, "ORDERS"), []string{"ORDERS/host-1:ORDERS:18080", "ORDERS/host-1:ORDERS:18082"})
	})
	s.Delete("ORDERS", "host-1:ORDERS:18082", true)
	rec.Eventually(t, "a deregistered instance leaves", func(st registrytest.State) bool {
		return slices.Equal(ids(st, "ORDERS"), []string{"ORDERS/host-1:ORDERS:18080"})
	})
	s.Put(upInstance("PAYMENTS", 19090), true)
	rec.Eventually(t, "a new application", func(st registrytest.State) bool { return len(ids(st, "PAYMENTS")) == 1 })
	s.Delete("PAYMENTS", "host-1:PAYMENTS:19090", true)
	rec.Eventually(t, "an application without instances is removed", func(st registrytest.State) bool {
		_, ok := st.Last["PAYMENTS"]
		return !ok
	})
	if n := s.Requests("/eureka/apps/"); n != 1 {
		t.Errorf("full reads: %d, want the first one only (the deltas' hashcodes matched)", n)
	}
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-deltas", relistHashcode)); n != 0 {
		t.Errorf("hashcode relists: %v, want 0", n)
	}
}

// TestHashcodeMismatchReadsEverything: a change missing from the delta
// that changes the counts per status is caught by the hashcode at once.
func TestHashcodeMismatchReadsEverything(t *testing.T) {
	s := eurekatest.Start(t)
	s.Put(upInstance("ORDERS", 18080), false)
	reg := newTestRegistry(t, "eureka-hashcode", 0, s.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return st.Synced == 1 })
	s.Put(upInstance("ORDERS", 18081), false) // UP_1_ → UP_2_, no delta
	rec.Eventually(t, "the missed instance, by a full read", func(st registrytest.State) bool { return len(ids(st, "ORDERS")) == 2 })
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-hashcode", relistHashcode)); n != 1 {
		t.Errorf("hashcode relists: %v, want 1", n)
	}
}

// TestMissedReplacementNeedsTheTimedRelist: one instance replaced by another
// while the delta was missed leaves the hashcode as it was (UP_1_); only
// the timed full read serves the new one. This is why relistInterval
// exists.
func TestMissedReplacementNeedsTheTimedRelist(t *testing.T) {
	s := eurekatest.Start(t)
	s.Put(upInstance("ORDERS", 18080), false)
	reg := newTestRegistry(t, "eureka-aba", 3*time.Second, s.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return st.Synced == 1 })
	s.Delete("ORDERS", "host-1:ORDERS:18080", false)
	s.Put(upInstance("ORDERS", 18090), false)
	rec.Eventually(t, "the replacement, by the timed full read", func(st registrytest.State) bool {
		return slices.Equal(ids(st, "ORDERS"), []string{"ORDERS/host-1:ORDERS:18090"})
	})
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-aba", relistHashcode)); n != 0 {
		t.Errorf("hashcode relists: %v, want 0 (the counts did not change)", n)
	}
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-aba", relistTimer)); n < 1 {
		t.Errorf("timer relists: %v, want at least 1", n)
	}
}

// TestFailoverKeepsEndpoints: the first server fails; the next one is read,
// nothing is removed nor failed, and the registry stays up.
func TestFailoverKeepsEndpoints(t *testing.T) {
	a, b := eurekatest.Start(t), eurekatest.Start(t)
	for _, s := range []*eurekatest.Server{a, b} {
		s.Put(upInstance("ORDERS", 18080), false)
	}
	reg := newTestRegistry(t, "eureka-failover", 0, a.URL(), b.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced from the first server", func(st registrytest.State) bool { return st.Synced == 1 })
	a.SetStatus(http.StatusServiceUnavailable)
	harness.Eventually(t, 10*time.Second, "the second server answers", func() error {
		if reg.Status().Server != b.URL() {
			return errNotYet
		}
		return nil
	})
	b.Put(upInstance("ORDERS", 18081), true)
	rec.Eventually(t, "a change on the second server", func(st registrytest.State) bool { return len(ids(st, "ORDERS")) == 2 })
	for _, snap := range rec.Snapshots() {
		if snap.Err != nil || snap.Removed {
			t.Errorf("snapshot %+v during a failover", snap)
		}
	}
	if !reg.Health().Up {
		t.Error("the registry is down while a server answers")
	}
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-failover", relistFailover)); n != 1 {
		t.Errorf("failover relists: %v, want 1", n)
	}
}

// TestRefusedKeepsEndpoints: no server answers: the registry is down, its
// services keep their instances (errors, never removals), and a full read
// follows its return.
func TestRefusedKeepsEndpoints(t *testing.T) {
	s := eurekatest.Start(t)
	s.Put(upInstance("ORDERS", 18080), false)
	reg := newTestRegistry(t, "eureka-refused", 0, s.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return st.Synced == 1 })
	s.SetStatus(http.StatusInternalServerError)
	rec.Eventually(t, "the service fails", func(st registrytest.State) bool { return st.Last["ORDERS"].Err != nil })
	if reg.Health().Up {
		t.Error("up while no server answers")
	}
	s.Put(upInstance("ORDERS", 18081), false)
	s.SetStatus(0)
	rec.Eventually(t, "back, by a full read", func(st registrytest.State) bool {
		return st.Last["ORDERS"].Err == nil && len(ids(st, "ORDERS")) == 2
	})
	for _, snap := range rec.Snapshots() {
		if snap.Removed || (snap.Err == nil && len(snap.Service.Instances) == 0 && snap.Service.Name != "") {
			t.Errorf("snapshot %+v: an outage removed or emptied a service", snap)
		}
	}
	if n := testutil.ToFloat64(relists.WithLabelValues("eureka-refused", relistReconnect)); n != 1 {
		t.Errorf("reconnect relists: %v, want 1", n)
	}
}

// TestHungServerIsDown: a server that accepts requests and never answers
// is down within interval + requestTimeout, keeping endpoints, and up at
// once when it answers again.
func TestHungServerIsDown(t *testing.T) {
	s := eurekatest.Start(t)
	s.Put(upInstance("ORDERS", 18080), false)
	reg := newTestRegistry(t, "eureka-hung", 0, s.URL())
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return st.Synced == 1 })
	s.Pause()
	paused := time.Now()
	harness.Eventually(t, 15*time.Second, "down", func() error {
		if reg.Health().Up {
			return errNotYet
		}
		return nil
	})
	t.Logf("down %s after the server hung", time.Since(paused).Round(10*time.Millisecond))
	if st := reg.Health(); st.LastError == "" {
		t.Errorf("down without an error: %+v", st)
	}
	s.Resume()
	harness.Eventually(t, 5*time.Second, "up", func() error {
		if !reg.Health().Up {
			return errNotYet
		}
		return nil
	})
	if got := ids(rec.State(), "ORDERS"); len(got) != 1 {
		t.Errorf("after the hang: %v", got)
	}
}

// TestBasicAuth: the password goes in the Authorization header; a server
// that refuses it makes the registry down with reason forbidden, and the
// password appears in no error.
func TestBasicAuth(t *testing.T) {
	s := eurekatest.Start(t)
	s.Put(upInstance("ORDERS", 18080), false)
	s.SetAuth("Basic dTpzM2NyZXQ=") // u:s3cret
	dir := t.TempDir()
	pw := dir + "/pw"
	if err := writeFile(pw, "s3cret\n"); err != nil {
		t.Fatal(err)
	}
	reg, err := New(Config{Name: "eureka-auth", Servers: []string{s.URL()}, Username: "u", PasswordFile: pw,
		Interval: time.Second, RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "synced with the password", func(st registrytest.State) bool { return len(ids(st, "ORDERS")) == 1 })

	wrong := dir + "/wrong"
	writeFile(wrong, "nope")
	reg2, err := New(Config{Name: "eureka-auth-wrong", Servers: []string{s.URL()}, Username: "u", PasswordFile: wrong,
		Interval: time.Second, RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	registrytest.Run(t, reg2, 10*time.Second)
	harness.Eventually(t, 10*time.Second, "refused", func() error {
		if testutil.ToFloat64(registries.RegistryErrors.WithLabelValues("eureka-auth-wrong", reasonForbidden)) == 0 {
			return errNotYet
		}
		return nil
	})
	if st := reg2.Health(); st.Up || contains(st.LastError, "nope") {
		t.Errorf("health %+v", st)
	}
}

// TestTLS: an https:// server is verified against tls.caFile; without it
// (the system roots do not know the server's CA) the registry is down with
// reason tls, and nothing is read.
func TestTLS(t *testing.T) {
	s := eurekatest.StartTLS(t)
	s.Put(upInstance("ORDERS", 18080), false)
	ca := t.TempDir() + "/ca.pem"
	if err := os.WriteFile(ca, s.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := New(Config{Name: "eureka-tls", Servers: []string{s.URL()}, TLS: TLSConfig{CAFile: ca},
		Interval: time.Second, RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "read over TLS", func(st registrytest.State) bool { return len(ids(st, "ORDERS")) == 1 })

	untrusted, err := New(Config{Name: "eureka-tls-untrusted", Servers: []string{s.URL()},
		Interval: time.Second, RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec2 := registrytest.Run(t, untrusted, 10*time.Second)
	harness.Eventually(t, 10*time.Second, "refused", func() error {
		if testutil.ToFloat64(registries.RegistryErrors.WithLabelValues("eureka-tls-untrusted", reasonTLS)) == 0 {
			return errNotYet
		}
		return nil
	})
	if st := rec2.State(); len(st.Good) != 0 || untrusted.Health().Up {
		t.Errorf("an untrusted server was read: %v, health %+v", st, untrusted.Health())
	}
}

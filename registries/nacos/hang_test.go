package nacos

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// runLogged runs a registry on cfg with its info log in logs.
func runLogged(t *testing.T, cfg Config, logs *harness.LockedBuffer) (*Registry, *registrytest.Recorder) {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = t.TempDir()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	return reg, registrytest.Run(t, reg, 20*time.Second)
}

// TestHungServerIsDown: the server stopped with SIGSTOP (by its PID): its
// connections stay open and requests wait. The registry is down within
// 15 s (Health, meshbridge_registry_up, one log line), keeps every
// instance, is up within 2 s of SIGCONT with a true downFor, and then
// follows changes again (doc.go rule 12).
func TestHungServerIsDown(t *testing.T) {
	p := harness.StartNacos(t)
	p.RegisterInstance(t, "", "", "web", "10.0.7.1", 80, 1, nil, true, true, true)
	p.RegisterInstance(t, "", "G2", "api", "10.0.7.3", 8080, 1, nil, true, true, true)
	waitListed(t, p, "", "", "web")
	waitListed(t, p, "", "G2", "api")
	var logs harness.LockedBuffer
	reg, rec := runLogged(t, Config{Name: "nacos-hang", Addresses: []string{p.Address()},
		Groups: []string{DefaultGroup, "G2"}, RelistInterval: 2 * time.Second}, &logs)
	web, api := key("public", DefaultGroup, "web"), key("public", "G2", "api")
	rec.Eventually(t, "Synced with web and api", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(web)) == 1 && len(st.Addrs(api)) == 1
	})
	registrytest.CheckHang(t, rec, registrytest.Hang{
		Registry: "nacos-hang", Health: reg.Health, Logs: &logs, Hold: 3 * time.Second,
		Pause: func() { p.Pause(t) }, Resume: func() { p.Resume(t) },
	})
	p.RegisterInstance(t, "", "", "web", "10.0.7.2", 80, 1, nil, true, true, true)
	rec.Eventually(t, "a change after the hang", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(web), []string{"10.0.7.1:80", "10.0.7.2:80"}) && st.Last[api].Err == nil
	})
}

// TestEmptyReadRightAfterHangIsHeld: a service's only instance is gone
// when a hung server answers again (here deregistered at once; a Nacos
// server also drops ephemeral instances whose clients it lost while it
// hung, until they re-register). Whichever way that empty list comes, a
// push or a read, it is held as an error for the reconnection grace
// (registries.Reporter rule 6, doc.go rule 7): no empty list reaches the
// Sink until then, and the authoritative empty list comes after it.
func TestEmptyReadRightAfterHangIsHeld(t *testing.T) {
	p := harness.StartNacos(t)
	p.RegisterInstance(t, "", "", "solo", "10.0.8.1", 80, 1, nil, true, true, true)
	waitListed(t, p, "", "", "solo")
	var logs harness.LockedBuffer
	reg, rec := runLogged(t, Config{Name: "nacos-held", Addresses: []string{p.Address()},
		RelistInterval: 2 * time.Second}, &logs)
	k := key("public", DefaultGroup, "solo")
	rec.Eventually(t, "Synced with solo", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(k)) == 1
	})
	p.Pause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			p.Resume(t)
		}
	})
	harness.EventuallyTrue(t, registrytest.HangDownWithin, "the hung server seen down", func() bool { return !reg.Health().Up })
	p.Resume(t)
	resumed = true
	back := time.Now()
	p.DeregisterInstance(t, "", "", "solo", "10.0.8.1", 80, true)
	rec.Eventually(t, "the empty read held as an error", func(st registrytest.State) bool {
		return errors.Is(st.Last[k].Err, registries.ErrEmptyAfterReconnect)
	})
	if st := rec.State(); len(st.Addrs(k)) != 1 {
		t.Errorf("solo while held: %v, want its instance kept", st.Addrs(k))
	}
	rec.Eventually(t, "the empty list after the grace", func(st registrytest.State) bool {
		list, ok := st.Good[k]
		return ok && len(list) == 0
	})
	if held := time.Since(back); held < minReconnectGrace {
		t.Errorf("the empty list came %s after the server answered again, within the grace (%s)", held, minReconnectGrace)
	}
}

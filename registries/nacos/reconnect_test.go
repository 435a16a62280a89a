//go:build !race

// The tests of this file take the server away under a connected client
// (stopped and restarted, or hung with SIGSTOP), so nacos-sdk-go's own
// goroutines reconnect and fail requests while the bridge's goroutines use
// the client. nacos-sdk-go v2.3.5 races with itself there, inside
// rpc.RpcClient: reconnect writes the current connection while the
// goroutine notifying connection events reads it (rpc_client.go:449 and
// :487; nacos-group/nacos-sdk-go#905 and #833, fixed upstream after
// v2.3.5), and Request reads the client's status unsynchronized while a
// concurrent Request swaps it (rpc_client.go:592, unfixed upstream). The Go
// module proxy serves no release newer than v2.3.5, nor the fixing commit.
// The bridge keeps its own code clear of those paths where it can (doc.go
// rule 1: runWatchdog, conn.settle, conn.inFlight), but a server that goes
// away makes the SDK reconnect and fail requests before the watchdog
// replaces the connection, and the race detector then fails the test for
// the SDK's race.
//
// Rule: a test that makes the SDK reconnect lives in this file, built only
// without the race detector; make test runs it in a run of its own without
// -race (the Makefile's NORACE_TEST_FILES), so it still runs on every CI.
// Every other test of the package, which drives the same code of the
// bridge, runs under -race. When go.mod moves to a nacos-sdk-go release
// that fixes both races, the build constraint goes.

package nacos

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestServerRestart: while the server is down every service gets an error
// snapshot, never an empty list nor a removal, and the outage logs one line
// down and one up; after a restart (a server that knows ephemeral instances
// only once their clients registered again) every service is read again
// within a RelistInterval of its instances' return (registries rule 2;
// doc.go rules 7 and 10; docs/design.md §8).
func TestServerRestart(t *testing.T) {
	p := harness.StartNacos(t)
	// The instances' clients are played over the HTTP API (newNacosApp's
	// way): the test re-registers them after the restart itself, as their
	// clients would.
	registerAll := func() {
		p.RegisterInstance(t, "", "", "web", "10.0.7.1", 80, 1, nil, true, true, true)
		p.RegisterInstance(t, "", "", "web", "10.0.7.2", 80, 1, nil, true, true, true)
		p.RegisterInstance(t, "", "G2", "api", "10.0.7.3", 8080, 1, nil, true, true, true)
	}
	registerAll()
	harness.EventuallyTrue(t, waitTimeout, "the server lists web and api", func() bool {
		return slices.Contains(p.ListServices(t, "", ""), "web") && slices.Contains(p.ListServices(t, "", "G2"), "api")
	})
	var logs harness.LockedBuffer
	const relist = 2 * time.Second
	reg, rec := runRegistry(t, Config{
		Addresses: []string{p.Address()}, Groups: []string{"DEFAULT_GROUP", "G2"}, RelistInterval: relist,
	}, &logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	web, api := key("public", "DEFAULT_GROUP", "web"), key("public", "G2", "api")
	rec.Eventually(t, "Synced with web and api", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(web)) == 2 && len(st.Addrs(api)) == 1
	})
	good := rec.State().Good
	before := map[string][]registries.Instance{web: good[web], api: good[api]}

	p.Stop()
	rec.Eventually(t, "every service has an error snapshot", func(st registrytest.State) bool {
		return st.Last[web].Err != nil && st.Last[api].Err != nil
	})
	// Stay down for several failed listings (about 10 s).
	harness.EventuallyTrue(t, waitTimeout, "several failed reads", func() bool { return reg.Health().Errors >= 10 })
	if reg.Health().Up {
		t.Errorf("Health is up during the outage")
	}
	p.Restart(t)
	restarted := time.Now()
	registerAll() // the clients re-register with the restarted server
	rec.Eventually(t, "every service is read again and equals the state before", func(st registrytest.State) bool {
		for k, want := range before {
			if st.Last[k].Err != nil || !registries.SameInstances(st.Good[k], want) {
				return false
			}
		}
		return true
	})
	t.Logf("restart → every service read again: %s (relistInterval %s)", time.Since(restarted).Round(time.Millisecond), relist)
	harness.EventuallyTrue(t, waitTimeout, "the registry is up again", func() bool { return reg.Health().Up })

	for _, s := range rec.Snapshots() {
		if s.Removed {
			t.Errorf("service %q removed around the outage", s.Service.Name)
		}
		if s.Err == nil && !s.Removed && len(s.Service.Instances) == 0 {
			t.Errorf("service %q got an empty list around the outage; want errors only", s.Service.Name)
		}
	}
	good = rec.State().Good
	after := map[string][]registries.Instance{web: good[web], api: good[api]}
	if !maps.EqualFunc(before, after, registries.SameInstances) {
		t.Errorf("state after the restart = %v, want %v", after, before)
	}
	out := logs.String()
	for _, line := range []string{"Registry read failed; serving its last-known-good state", "Registry read succeeded again"} {
		if got := strings.Count(out, line); got != 1 {
			t.Errorf("%d log lines %q after %d failed reads, want 1", got, line, reg.Health().Errors)
		}
	}
	st := reg.Status()
	if st.Errors == 0 || st.LastErrorTime.IsZero() || st.LastError != "" || !st.Up || st.Namespaces[0].Reconnects == 0 {
		t.Errorf("Status = %+v, want counted errors, the last error's time, the error cleared, up, a reconnect", st)
	}
}

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

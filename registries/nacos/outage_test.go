package nacos

import (
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
	// The instances' clients are played over the HTTP API: nacos-sdk-go
	// v2.3.5 clients in this process would add their own reconnect data
	// race (rpc.RpcClient; see runWatchdog) to the race detector's report.
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

package consul

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestConsulRestart: while Consul is down every service gets an error
// snapshot, never an empty list; after a restart of the same server (same
// data dir and ports) the state equals the state before (issue 2, "Make it
// real"; DESIGN.md §8).
func TestConsulRestart(t *testing.T) {
	c := harness.StartConsulServer(t, t.TempDir(), harness.FreeConsulPorts(t))
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	registerPassing(t, c, "web", "web-2", "10.0.0.2", 80)
	registerPassing(t, c, "api", "api-1", "10.0.0.3", 8080)
	const token = "s3cr3t-token-value"
	var logs harness.LockedBuffer
	reg, rec := runRegistry(t, Config{
		Address: c.Address(), Token: token, MaxWatches: 1, // web watched, api polled
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	rec.eventually(t, "Synced with web and api", func() bool {
		return rec.synced == 1 && len(rec.ids("web")) == 2 && len(rec.ids("api")) == 1
	})
	rec.mu.Lock()
	before := map[string][]registries.Instance{"web": rec.good["web"], "api": rec.good["api"]}
	rec.mu.Unlock()

	c.Stop()
	rec.eventually(t, "every service has an error snapshot", func() bool {
		return rec.last["web"].Err != nil && rec.last["api"].Err != nil
	})
	c.Restart(t)
	rec.eventually(t, "every service is read again and equals the state before", func() bool {
		for name, want := range before {
			if rec.last[name].Err != nil || !sameInstances(rec.good[name], want) {
				return false
			}
		}
		return true
	})
	rec.mu.Lock()
	if diff := cmp.Diff(before, map[string][]registries.Instance{"web": rec.good["web"], "api": rec.good["api"]}); diff != "" {
		t.Errorf("state after restart (-before +after):\n%s", diff)
	}
	rec.mu.Unlock()

	for _, s := range rec.snapshots() {
		if s.Err == nil && !s.Removed && len(s.Service.Instances) == 0 {
			t.Errorf("service %q got an empty list around the outage; want errors only", s.Service.Name)
		}
		if s.Removed {
			t.Errorf("service %q removed during the outage", s.Service.Name)
		}
	}
	st := reg.Status()
	if st.Errors == 0 || st.LastError == "" {
		t.Errorf("Status = %+v, want counted errors and a last error", st)
	}
	if strings.Contains(st.LastError, token) || strings.Contains(logs.String(), token) {
		t.Errorf("the token leaked into Status or logs")
	}
}

// TestForbiddenIsCounted: a 403 counts under reason "forbidden"; with the
// catalog unreadable nothing is emitted and Synced is not called (an error is
// never an empty listing).
func TestForbiddenIsCounted(t *testing.T) {
	c := harness.StartConsul(t, harness.WithConsulHCL(`acl { enabled = true
  default_policy = "allow"
  tokens { initial_management = "root" }
}`))
	root, err := api.NewClient(&api.Config{Address: c.Address(), Token: "root"})
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "web", ID: "web-1", Port: 80}); err != nil {
		t.Fatal(err)
	}
	reg, rec := runRegistry(t, Config{Name: "denied", Address: c.Address(), Token: "not-a-token"})
	waitFor(t, "a forbidden error is counted", func() bool {
		return reg.Status().Errors > 0 && counted("denied", reasonForbidden) > 0
	})
	if got := rec.snapshots(); len(got) != 0 || rec.synced != 0 {
		t.Errorf("got %d snapshots, Synced %d times; want none while the catalog is forbidden", len(got), rec.synced)
	}
	if strings.Contains(reg.Status().LastError, "not-a-token") {
		t.Errorf("LastError shows the token: %q", reg.Status().LastError)
	}
}

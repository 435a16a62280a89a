package consul

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestConsulRestart: while Consul is down every service gets an error
// snapshot, never an empty list; after a restart of the same server (same
// data dir and ports) the state equals the state before (package registries
// rule 2; README "Behaviour operators rely on", "Outages never delete";
// docs/design.md §8).
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
	rec.Eventually(t, "Synced with web and api", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 2 && len(st.IDs("api")) == 1
	})
	good := rec.State().Good
	before := map[string][]registries.Instance{"web": good["web"], "api": good["api"]}

	c.Stop()
	rec.Eventually(t, "every service has an error snapshot", func(st registrytest.State) bool {
		return st.Last["web"].Err != nil && st.Last["api"].Err != nil
	})
	c.Restart(t)
	rec.Eventually(t, "every service is read again and equals the state before", func(st registrytest.State) bool {
		for name, want := range before {
			if st.Last[name].Err != nil || !registries.SameInstances(st.Good[name], want) {
				return false
			}
		}
		return true
	})
	good = rec.State().Good
	if diff := cmp.Diff(before, map[string][]registries.Instance{"web": good["web"], "api": good["api"]}); diff != "" {
		t.Errorf("state after restart (-before +after):\n%s", diff)
	}

	for _, s := range rec.Snapshots() {
		if s.Err == nil && !s.Removed && len(s.Service.Instances) == 0 {
			t.Errorf("service %q got an empty list around the outage; want errors only", s.Service.Name)
		}
		if s.Removed {
			t.Errorf("service %q removed during the outage", s.Service.Name)
		}
	}
	waitFor(t, "the registry is up again", func() bool { return reg.Health().Up })
	st := reg.Status()
	if st.Errors == 0 || st.LastErrorTime.IsZero() || st.LastError != "" || !st.Up {
		t.Errorf("Status = %+v, want counted errors, the last error's time, the error cleared by the recovery, up", st)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the token leaked into the logs")
	}
	for _, s := range rec.Snapshots() {
		if s.Err != nil && strings.Contains(s.Err.Error(), token) {
			t.Errorf("the token leaked into a snapshot error: %v", s.Err)
		}
	}
}

// TestForbiddenIsCounted: a 403 (a token Consul does not know) counts under
// reason "forbidden"; with the catalog unreadable no service is emitted and
// Synced is not called (an error is never an empty listing), and one
// registry-wide error snapshot, marked permanent, tells a one-shot reader
// that retrying will not help.
func TestForbiddenIsCounted(t *testing.T) {
	c := harness.StartConsul(t, harness.WithConsulACL("allow", "root"))
	c.Register(t, api.AgentServiceRegistration{Name: "web", ID: "web-1", Port: 80})
	reg, rec := runRegistry(t, Config{Name: "denied", Address: c.Address(), Token: "not-a-token"})
	waitFor(t, "a forbidden error is counted", func() bool {
		return reg.Status().Errors > 0 && counted("denied", reasonForbidden) > 0
	})
	waitFor(t, "a second failed read", func() bool { return reg.Health().Errors >= 2 })
	snaps := rec.Snapshots()
	if len(snaps) != 1 || snaps[0].Service.Name != "" || snaps[0].Err == nil {
		t.Fatalf("snapshots = %+v; want one registry-wide error (empty Service.Name) while the catalog is forbidden", snaps)
	}
	if err := snaps[0].Err; !registries.IsPermanent(err) || !strings.Contains(err.Error(), "ACL not found") {
		t.Errorf("Err = %v, want a permanent 403 ACL not found", err)
	}
	synced := rec.State().Synced
	if synced != 0 {
		t.Errorf("Synced called %d times; want none while the catalog is forbidden", synced)
	}
	st := reg.Status()
	if st.Up || strings.Contains(st.LastError, "not-a-token") {
		t.Errorf("Status = %+v, want down, the token not shown", st)
	}
}

// TestOutageLogsOnceDownOnceUp: an outage of the agent while many services
// are followed (watched and polled) logs one "read failed" line and one
// "succeeded again" line, whatever the number of failed reads, and sends a
// registry-wide error snapshot once per error text, not per read
// (docs/design.md §8, "one log line down and one up").
func TestOutageLogsOnceDownOnceUp(t *testing.T) {
	c := harness.StartConsulServer(t, t.TempDir(), harness.FreeConsulPorts(t))
	const n = 40
	for i := range n {
		registerPassing(t, c, fmt.Sprintf("svc-%02d", i), fmt.Sprintf("svc-%02d-1", i), "10.0.0.1", 80+i)
	}
	var logs harness.LockedBuffer
	reg, rec := runRegistry(t, Config{
		Address: c.Address(), MaxWatches: 30, // 30 watched, 10 polled
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	rec.Eventually(t, "Synced with every service", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Good) == n
	})
	if st := reg.Status(); st.Watched != 30 || st.Polled != 10 || st.Services != n {
		t.Errorf("Status = %+v, want 30 watched, 10 polled, %d services", st, n)
	}

	c.Stop()
	waitFor(t, "many failed reads", func() bool { return reg.Health().Errors >= 3*n })
	rec.Eventually(t, "every service has an error snapshot", func(st registrytest.State) bool {
		for name := range st.Good {
			if st.Last[name].Err == nil {
				return false
			}
		}
		return true
	})
	c.Restart(t)
	rec.Eventually(t, "every service is read again", func(st registrytest.State) bool {
		for name := range st.Good {
			if st.Last[name].Err != nil {
				return false
			}
		}
		return true
	})
	waitFor(t, "the registry is up", func() bool { return reg.Health().Up })

	out := logs.String()
	for _, line := range []string{"Registry read failed; serving its last-known-good state", "Registry read succeeded again"} {
		if got := strings.Count(out, line); got != 1 {
			t.Errorf("%d log lines %q after %d failed reads, want 1", got, line, reg.Health().Errors)
		}
	}
	if strings.Contains(out, "Failed to read Consul") {
		t.Errorf("a failed read was logged on its own")
	}
	// Rule 2 of registries.Reporter: one registry-wide error per run of
	// failures of the same text; a different text is sent again (an agent
	// shutting down answers 500 before its port refuses connections).
	var texts []string
	for _, s := range rec.Snapshots() {
		if s.Err != nil && s.Service.Name == "" {
			texts = append(texts, s.Err.Error())
			if registries.IsPermanent(s.Err) {
				t.Errorf("an outage was marked permanent: %v", s.Err)
			}
		}
	}
	if len(texts) == 0 {
		t.Errorf("no registry-wide error snapshot for an outage of %d failed reads", reg.Health().Errors)
	}
	for i := 1; i < len(texts); i++ {
		if texts[i] == texts[i-1] {
			t.Errorf("registry-wide error %q sent twice in one outage (snapshots %q)", texts[i], texts)
		}
	}
}

// TestReadHeldAcrossRecoveryIsSentAgain: a read sent while the agent was
// down that the agent holds (a restarted server holds the reads it gets
// before electing a leader, and answers them seconds after) does not hold
// its service's recovery back: once another reader gets through, the held
// read is abandoned and sent again, and the registry is up without it
// (blockingQuery rule 5). The proxy never releases the held read while the
// test runs.
func TestReadHeldAcrossRecoveryIsSentAgain(t *testing.T) {
	c := harness.StartConsulServer(t, t.TempDir(), harness.FreeConsulPorts(t))
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	registerPassing(t, c, "api", "api-1", "10.0.0.3", 8080)
	proxy := newHeldRequestProxy(t, c.Address())
	// The production WaitTime: the HTTP client gives up on a read only after
	// it (plus 30 s), well past this test's wait, so only the resend brings
	// web back in time.
	reg, rec := runRegistry(t, Config{Address: proxy.Address(), WaitTime: 5 * time.Minute})
	rec.Eventually(t, "Synced with web and api", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 1 && len(st.IDs("api")) == 1
	})

	c.Stop()
	rec.Eventually(t, "every service has an error snapshot", func(st registrytest.State) bool {
		return st.Last["web"].Err != nil && st.Last["api"].Err != nil
	})
	// web's next read after a failure does not block (no index): hold it.
	proxy.Arm(func(r *http.Request) bool {
		return r.URL.Path == "/v1/health/service/web" && r.URL.Query().Get("index") == ""
	})
	t.Cleanup(func() { close(proxy.Forward); close(proxy.Deliver) }) // before the proxy closes
	<-proxy.Arrived
	c.Restart(t)
	waitFor(t, "the registry up again with web's held read still unanswered", func() bool {
		return reg.Health().Up
	})
	if st := rec.State(); st.Last["web"].Err != nil || len(st.IDs("web")) != 1 {
		t.Errorf("web after the recovery: last snapshot error %v, instances %v", st.Last["web"].Err, st.IDs("web"))
	}
	select {
	case <-proxy.Fetched:
		t.Errorf("the held read was forwarded; the test holds it until its end")
	default:
	}
}

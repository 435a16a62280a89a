package consul

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestHungAgentIsDown: the agent stopped with SIGSTOP (by its PID): its
// connections stay open and its blocking queries just wait. The registry
// is down within 15 s (Health, meshbridge_registry_up, one log line), keeps
// every instance, is up within 2 s of SIGCONT with a true downFor, and then
// follows changes again, watched and polled services alike (doc.go rule 13).
func TestHungAgentIsDown(t *testing.T) {
	c := harness.StartConsul(t)
	node := c.Node()
	registerPassing(t, c, "aaa", "aaa-1", "10.0.0.1", 80) // watched
	registerPassing(t, c, "web", "web-1", "10.0.1.1", 80) // polled
	var logs harness.LockedBuffer
	reg, rec := runRegistry(t, Config{Address: c.Address(), MaxWatches: 1, Name: "consul-hang",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	rec.Eventually(t, "Synced with aaa and web", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("aaa")) == 1 && len(st.IDs("web")) == 1
	})
	registrytest.CheckHang(t, rec, registrytest.Hang{
		Registry: "consul-hang", Health: reg.Health, Logs: &logs, Hold: 3 * time.Second,
		Pause: func() { c.Pause(t) }, Resume: func() { c.Resume(t) },
	})
	rec.Eventually(t, "every service read again", func(st registrytest.State) bool {
		return st.Last["aaa"].Err == nil && st.Last["web"].Err == nil
	})
	registerPassing(t, c, "aaa", "aaa-2", "10.0.0.2", 80)
	registerPassing(t, c, "web", "web-2", "10.0.1.2", 80)
	rec.Eventually(t, "changes after the hang", func(st registrytest.State) bool {
		return slices.Equal(st.IDs("aaa"), []string{node + "/aaa-1", node + "/aaa-2"}) &&
			slices.Equal(st.IDs("web"), []string{node + "/web-1", node + "/web-2"})
	})
}

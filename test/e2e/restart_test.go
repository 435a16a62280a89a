package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// storeState reduces /debug/configz to what must survive a restart: each
// object's kind, name and content hash, not its resource version.
func storeState(b *bridge) string {
	body := b.get("/debug/configz")
	re := regexp.MustCompile(`"(kind|name|meshbridge.io/content-hash)": "([^"]*)"`)
	var out string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out += m[2] + " "
	}
	return out
}

// TestConsulRestartKeepsEndpoints pins README "Behaviour operators rely on",
// "Outages never delete, and show": while Consul is down the client keeps
// reaching every instance, and after Consul comes back the aggregate registry
// equals its state before.
func TestConsulRestartKeepsEndpoints(t *testing.T) {
	consul := harness.StartConsulServer(t, t.TempDir(), harness.FreeConsulPorts(t))
	p1, p2 := startBackend(t, "backend-1"), startBackend(t, "backend-2")
	consul.RegisterInstance(t, "echo", "echo-1", "127.0.0.1", p1, nil, grpcMeta, api.HealthPassing)
	consul.RegisterInstance(t, "echo", "echo-2", "127.0.0.1", p2, nil, grpcMeta, api.HealthPassing)
	// Consul persists a TTL check's status across an agent restart only once
	// it has been updated (a heartbeat); a check that was merely registered
	// passing comes back critical. Heartbeat once, as a real workload does.
	consul.SetCheck(t, harness.CheckID("echo-1"), api.HealthPassing)
	consul.SetCheck(t, harness.CheckID("echo-2"), api.HealthPassing)
	b := startBridge(t, consulRegistry(consul))
	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///echo.service.consul:%d", min(p1, p2)))
	c.waitSettled(c.mark(), 30*time.Second, "backend-1", "backend-2")
	before := storeState(b)

	m := c.mark()
	consul.Stop()
	// Long enough for several failed blocking queries and their backoff.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := storeState(b); got != before {
			t.Fatalf("the store changed while Consul was down:\n before %s\n after  %s", before, got)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.waitSettled(m, 10*time.Second, "backend-1", "backend-2")
	if errs := c.errorsSince(m); len(errs) > 0 {
		t.Fatalf("the client saw %d failed calls while Consul was down, first: %+v", len(errs), errs[0])
	}

	consul.Restart(t)
	eventually(t, 30*time.Second, "the store to equal its state before the restart", func() error {
		if got := storeState(b); got != before {
			return fmt.Errorf("store differs:\n before %s\n now    %s", before, got)
		}
		return nil
	})
	m = c.mark()
	c.waitSettled(m, 15*time.Second, "backend-1", "backend-2")
	if errs := c.errorsSince(m); len(errs) > 0 {
		t.Fatalf("the client saw %d failed calls after Consul came back, first: %+v", len(errs), errs[0])
	}
}

// TestBridgeRestartIsInvisible pins README "Behaviour operators rely on", "No
// partial mesh": a bridge restart never makes the client's target disappear;
// the xDS port opens only once the new process holds the whole mesh, and
// grpc-go keeps its resources meanwhile.
func TestBridgeRestartIsInvisible(t *testing.T) {
	consul := harness.StartConsul(t)
	p1 := startBackend(t, "backend-1")
	consul.RegisterInstance(t, "echo", "echo-1", "127.0.0.1", p1, nil, grpcMeta, api.HealthPassing)
	b := startBridge(t, consulRegistry(consul))
	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///echo.service.consul:%d", p1))
	c.waitSettled(c.mark(), 30*time.Second, "backend-1")

	m := c.mark()
	b.restart()
	c.waitSettled(c.mark(), 15*time.Second, "backend-1")
	if errs := c.errorsSince(m); len(errs) > 0 {
		t.Fatalf("the client saw %d failed calls across the bridge restart, first: %+v", len(errs), errs[0])
	}

	// The restarted bridge still follows Consul.
	p2 := startBackend(t, "backend-2")
	m = c.mark()
	consul.RegisterInstance(t, "echo", "echo-2", "127.0.0.1", p2, nil, grpcMeta, api.HealthPassing)
	c.waitSettled(m, 15*time.Second, "backend-1", "backend-2")
}

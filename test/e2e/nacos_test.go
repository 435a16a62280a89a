package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// nacosHost is the default host of service echo in DEFAULT_GROUP of the
// public namespace (README "Naming conventions").
const nacosHost = "echo.default-group.public.nacos"

// TestClientFollowsNacos runs one meshbridge process on the real Nacos
// server and a real Consul agent: the proxyless
// gRPC client follows a Nacos service through register, a second instance,
// unhealthy, disabled and deregister; weight and metadata changes reach the
// served objects; the Consul service is served beside it; translate prints
// both.
func TestClientFollowsNacos(t *testing.T) {
	nacosServer := harness.StartNacos(t)
	consul := harness.StartConsul(t)
	p1, p2 := startBackend(t, "backend-1"), startBackend(t, "backend-2")
	meta := map[string]string{"protocol": "grpc", "version": "v1"}
	// Ephemeral instances, beaten by the harness while registered healthy;
	// one registered unhealthy stays so until registered again (or for
	// 30 s, when the server deletes it).
	register := func(port int, weight float64, meta map[string]string, healthy, enabled bool) {
		t.Helper()
		nacosServer.RegisterInstance(t, "", "", "echo", "127.0.0.1", port, weight, meta, true, healthy, enabled)
	}
	register(p1, 1, meta, true, true)
	consul.RegisterInstance(t, "echo", "echo-1", "127.0.0.1", p2, nil, grpcMeta, api.HealthPassing)
	regs := consulRegistry(consul) + fmt.Sprintf("- name: nacos-e2e\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s}\n",
		nacosServer.Address())
	b := startBridge(t, regs)

	w := watchXDS(t, b.xdsAddr)
	w.waitFor(30*time.Second, "both registries' services", map[string][]string{
		"echo.service.consul": {"127.0.0.1:" + strconv.Itoa(p2)},
		nacosHost:             {"127.0.0.1:" + strconv.Itoa(p1)},
	})
	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///%s:%d", nacosHost, p1))
	m := c.mark()
	c.waitSettled(m, 30*time.Second, "backend-1")

	m = c.mark()
	register(p2, 1, meta, true, true)
	c.waitSettled(m, 15*time.Second, "backend-1", "backend-2")

	m = c.mark()
	register(p1, 1, meta, false, true)
	c.waitSettled(m, 15*time.Second, "backend-2")

	m = c.mark()
	register(p1, 1, meta, true, true)
	c.waitSettled(m, 15*time.Second, "backend-1", "backend-2")

	m = c.mark()
	register(p1, 1, meta, true, false)
	c.waitSettled(m, 15*time.Second, "backend-2")

	// Weight 3 is 300 on the common scale (README "Naming conventions");
	// new metadata is a new label.
	register(p1, 3, map[string]string{"protocol": "grpc", "version": "v2"}, true, true)
	eventually(t, 15*time.Second, "backend-1's weight and labels served", func() error {
		we, err := nacosWorkloadEntry(b, p1, p1)
		if err != nil {
			return err
		}
		if we.Weight != 300 || we.Labels["version"] != "v2" {
			return fmt.Errorf("WorkloadEntry weight %d, labels %v; want 300 and version v2", we.Weight, we.Labels)
		}
		return nil
	})

	m = c.mark()
	nacosServer.DeregisterInstance(t, "", "", "echo", "127.0.0.1", p2, true)
	c.waitSettled(m, 15*time.Second, "backend-1")

	out, err := exec.Command(bins.meshbridge, "translate", "--config", b.cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("translate: %v\n%s", err, out)
	}
	for _, host := range []string{"- " + nacosHost, "- echo.service.consul", "meshbridge.io/registry: nacos-e2e"} {
		if !strings.Contains(string(out), host) {
			t.Errorf("translate output lacks %q:\n%s", host, out)
		}
	}
}

// servedWorkloadEntry is a WorkloadEntry's spec as /debug/configz shows it.
type servedWorkloadEntry struct {
	Address string            `json:"address"`
	Ports   map[string]uint32 `json:"ports"`
	Labels  map[string]string `json:"labels"`
	Weight  uint32            `json:"weight"`
}

// nacosWorkloadEntry returns the served WorkloadEntry of the Nacos
// instance on port; servicePort is the ServiceEntry's.
func nacosWorkloadEntry(b *bridge, port, servicePort int) (servedWorkloadEntry, error) {
	var entries []struct {
		Kind   string            `json:"kind"`
		Labels map[string]string `json:"labels"`
		Spec   json.RawMessage   `json:"spec"`
	}
	if err := json.Unmarshal([]byte(b.get("/debug/configz")), &entries); err != nil {
		return servedWorkloadEntry{}, err
	}
	for _, e := range entries {
		if e.Kind != "WorkloadEntry" || e.Labels["meshbridge.io/registry"] != "nacos-e2e" {
			continue
		}
		var we servedWorkloadEntry
		if err := json.Unmarshal(e.Spec, &we); err != nil {
			return we, err
		}
		// An instance on the ServiceEntry's port (the first instance's,
		// kept) has no port mapping; one on another port maps to it.
		mapped := slices.Contains(slices.Collect(maps.Values(we.Ports)), uint32(port))
		if mapped || len(we.Ports) == 0 && port == servicePort {
			return we, nil
		}
	}
	return servedWorkloadEntry{}, fmt.Errorf("no WorkloadEntry of nacos-e2e for port %d", port)
}

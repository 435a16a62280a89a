package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProxylessLocalityWeights: two instances of one service in two
// localities with weights 3 and 1 (the file registry's) make two localities
// of weights 300 and 100 in the ClusterLoadAssignment, and every proxyless
// client spreads its calls 3:1 between them (weighted_target across the
// localities of a priority). 400 calls each: the share of the heavier
// locality is 0.75 ± 0.022 (one standard deviation), so the bounds, a ratio
// between 2 and 5, are about four deviations wide.
func TestProxylessLocalityWeights(t *testing.T) {
	heavy, light := startBackend(t, "backend-heavy"), startBackend(t, "backend-light")
	path := filepath.Join(t.TempDir(), "services.yaml")
	services := "services:\n"
	for _, pc := range proxylessClients {
		services += fmt.Sprintf("- host: weights-%s.static.local\n  ports: [{number: %d, protocol: grpc}]\n  instances:\n"+
			"  - {address: 127.0.0.1, port: %d, weight: 3, locality: e2e-region/zone-a}\n"+
			"  - {address: 127.0.0.1, port: %d, weight: 1, locality: e2e-region/zone-b}\n", pc.name, heavy, heavy, light)
	}
	if err := os.WriteFile(path, []byte(services), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, fmt.Sprintf("registries:\n- name: static\n  type: file\n  file: {path: %q}\n", path))
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			const calls = 400
			target := fmt.Sprintf("xds:///weights-%s.static.local:%d", pc.name, heavy)
			boot := renderBootstrap(t, "--node-id", "e2e-weights-"+pc.name, "--xds-address", b.xdsAddr,
				"--locality", "e2e-region/zone-c")
			c := runProxyless(t, pc.name, pc.command(t, target, callOpts{}), boot)
			c.waitSettled(0, 60*time.Second, "backend-heavy", "backend-light")
			m := c.mark()
			c.waitUntil(m, 120*time.Second, fmt.Sprintf("%d calls", calls), func(rs []callResult) bool { return len(rs) >= calls })
			count := map[string]int{}
			for _, r := range c.since(m)[:calls] {
				count[r.backend]++
			}
			h, l := count["backend-heavy"], count["backend-light"]
			t.Logf("%s: %d calls to the weight-3 locality, %d to the weight-1 one, %d failed", pc.name, h, l, calls-h-l)
			if h+l != calls || l == 0 || float64(h)/float64(l) < 2 || float64(h)/float64(l) > 5 {
				t.Errorf("%s: calls %d : %d (failed %d), want about 3 : 1", pc.name, h, l, calls-h-l)
			}
		})
	}
}

package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestProxylessLocalityFailover: a DestinationRule with outlier detection
// fails each proxyless client over by priority (gRFC A27), which istiod
// cannot do for them (it drops the outlier detection that would move
// calls off failing endpoints): the client is sent its own priorities,
// calls stay on priority 0, leave it within 1 s of its backends failing,
// and come back once they recover and their ejection ends. The rules set
// localityLbSetting, which ejects a priority's last failing address
// (gen.minimumHosts).
//   - zone: clients in dc1/zone-a; two backends in zone-a (priority 0),
//     one in zone-b (the next).
//   - tier: failoverPriority [tier], clients labelled tier=gold; the gold
//     backends are in zone-b and the silver one in the client's zone-a:
//     the label comes before the locality.
func TestProxylessLocalityFailover(t *testing.T) {
	const (
		interval     = 100 * time.Millisecond
		ejectionTime = 2 * time.Second
		failover     = time.Second // the bound, from the backends failing to calls reaching the next priority
	)
	consul := harness.StartConsul(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	outliers := fmt.Sprintf("    outlierDetection: {consecutive5xxErrors: 2, interval: %s, baseEjectionTime: %s, maxEjectionPercent: 100}\n",
		interval, ejectionTime)
	var rules []string
	for _, pc := range proxylessClients {
		rules = append(rules,
			fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: zone-%s}\nspec:\n"+
				"  host: zone-%s.service.consul\n  trafficPolicy:\n%s    loadBalancer:\n      localityLbSetting: {enabled: true}\n",
				pc.name, pc.name, outliers),
			fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: tier-%s}\nspec:\n"+
				"  host: tier-%s.service.consul\n  trafficPolicy:\n%s    loadBalancer:\n      localityLbSetting: {failoverPriority: [tier]}\n",
				pc.name, pc.name, outliers))
	}
	if err := os.WriteFile(policyFile, []byte(strings.Join(rules, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))

	// backend is one instance: its name, zone, tier and whether it is
	// priority 0 for the client (it fails and recovers).
	type backend struct {
		name, zone, tier string
		first            bool
	}
	run := func(t *testing.T, pc proxylessClient, svc string, backends []backend) {
		ports := map[int]backend{}
		var failing []*atomic.Bool
		var first, next []string
		for _, be := range backends {
			name := svc + "-" + be.name
			var port int
			if be.first {
				var f *atomic.Bool
				port, f = harness.StartSwitchableEcho(t, name)
				failing = append(failing, f)
				first = append(first, name)
			} else {
				port = startBackend(t, name)
				next = append(next, name)
			}
			ports[port] = be
		}
		// The host's port is its lowest instance port when first served:
		// the lowest is registered first.
		sorted := slices.Sorted(maps.Keys(ports))
		for _, p := range sorted {
			be := ports[p]
			meta := map[string]string{"protocol": "grpc", "zone": be.zone, "tier": be.tier}
			consul.RegisterInstance(t, svc, svc+"-"+be.name, "127.0.0.1", p, nil, meta, api.HealthPassing)
		}
		target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, sorted[0])
		boot := renderBootstrap(t, "--node-id", "e2e-"+svc, "--xds-address", b.xdsAddr,
			"--locality", "dc1/zone-a", "--label", "tier=gold")
		c := runProxyless(t, pc.name, pc.command(t, target, callOpts{interval: 20 * time.Millisecond}), boot)
		c.waitSettled(0, 60*time.Second, first...)

		// The priority-0 backends fail: calls reach the next priority
		// within the bound, then only it.
		m := c.mark()
		for _, f := range failing {
			f.Store(true)
		}
		failed := time.Now()
		c.waitReached(m, next[0], 10*time.Second)
		rs := c.since(m)
		reached := rs[slices.IndexFunc(rs, func(r callResult) bool { return r.backend == next[0] })].at
		t.Logf("%s: calls reached %s %v after %v failed", pc.name, next[0], reached.Sub(failed).Round(time.Millisecond), first)
		if d := reached.Sub(failed); d > failover {
			t.Errorf("%s: calls reached the next priority %v after its backends failed, want within %v", pc.name, d, failover)
		}
		c.waitSettled(m, 10*time.Second, next...)

		// They recover: once their ejection ends, calls return to them.
		m = c.mark()
		for _, f := range failing {
			f.Store(false)
		}
		c.waitSettled(m, ejectionTime+30*time.Second, first...)
	}
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			t.Run("zone", func(t *testing.T) {
				run(t, pc, "zone-"+pc.name, []backend{
					{name: "a1", zone: "zone-a", tier: "gold", first: true},
					{name: "a2", zone: "zone-a", tier: "gold", first: true},
					{name: "b1", zone: "zone-b", tier: "gold"},
				})
			})
			t.Run("tier", func(t *testing.T) {
				run(t, pc, "tier-"+pc.name, []backend{
					{name: "gold1", zone: "zone-b", tier: "gold", first: true},
					{name: "gold2", zone: "zone-b", tier: "gold", first: true},
					{name: "silver", zone: "zone-a", tier: "silver"},
				})
			})
		})
	}
	assertNoNACKs(t, b)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestProxylessOutlierDetection: a DestinationRule with outlier detection,
// read from policy.files, reaches each gRPC implementation's client as the
// cluster's outlier_detection (gRFC A50, which istiod never sends
// proxyless clients). Of three backends registered in Consul, on ports of
// their own, one answers UNAVAILABLE to every call: within two intervals
// of its first failure its share of calls is under 10 %, and after the
// ejection time it is tried again.
func TestProxylessOutlierDetection(t *testing.T) {
	const (
		interval     = time.Second
		ejectionTime = 5 * time.Second
		window       = 40 // calls: 2 s at the clients' 50 ms
	)
	consul := harness.StartConsul(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: outliers}
spec:
  host: "*.service.consul"
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 3, interval: 1s, baseEjectionTime: 5s, maxEjectionPercent: 50}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "outliers-" + pc.name
			failing := svc + "-bad"
			ports := []int{startBackend(t, svc+"-a"), startBackend(t, svc+"-b"), harness.StartFailingEcho(t, failing)}
			// The host's port is its lowest instance port when first served:
			// the lowest is registered first, so it is the target's whatever
			// the bridge saw.
			slices.Sort(ports)
			for i, p := range ports {
				consul.RegisterInstance(t, svc, fmt.Sprintf("%s-%d", svc, i), "127.0.0.1", p, nil, grpcMeta, api.HealthPassing)
			}
			target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, ports[0])
			boot := renderBootstrap(t, "--node-id", "e2e-outliers-"+pc.name, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, target, callOpts{}), boot)
			failed := func(r callResult) bool { return strings.Contains(r.err, failing) }

			first := 0
			c.waitUntil(0, 60*time.Second, "a call failed by "+failing, func(rs []callResult) bool {
				for i, r := range rs {
					if failed(r) {
						first = i
						return true
					}
				}
				return false
			})
			// Ejected: a window of calls within two intervals of the first
			// failure in which it has under 10 %.
			ejected := 0
			c.waitUntil(first, 2*interval+window*50*time.Millisecond+5*time.Second,
				fmt.Sprintf("%d calls in a row, under 10%% of them failed by %s", window, failing), func(rs []callResult) bool {
					for end := window; end <= len(rs); end++ {
						n := 0
						for _, r := range rs[end-window : end] {
							if failed(r) {
								n++
							}
						}
						if n*10 < window && rs[end-window].at.Sub(rs[0].at) <= 2*interval {
							ejected = first + end
							return true
						}
					}
					return false
				})
			// Tried again once the ejection time passed.
			c.waitUntil(ejected, ejectionTime+2*interval+10*time.Second, failing+" tried again",
				func(rs []callResult) bool { return len(rs) > 0 && slices.ContainsFunc(rs, failed) })
			if rs := c.since(0); !slices.ContainsFunc(rs, func(r callResult) bool { return r.backend == svc+"-a" }) ||
				!slices.ContainsFunc(rs, func(r callResult) bool { return r.backend == svc+"-b" }) {
				t.Errorf("the healthy backends were not both called")
			}
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessCircuitBreaking: a DestinationRule's
// connectionPool.http.http2MaxRequests reaches each gRPC implementation's
// client as the cluster's circuit_breakers max_requests (gRFC A32). The
// client keeps 6 calls in flight against a backend that answers after
// 300 ms: the backend never holds more than the 2 allowed at once (and does
// hold 2), the calls over the limit fail UNAVAILABLE at the client, and the
// others succeed. grpc-java accepts the limit but does not enforce it (as
// the README says): its cluster_impl policy counts the calls in flight only
// for a cluster with load reporting (LRS), which meshbridge does not serve;
// its row checks that every call succeeds and that more than the limit
// reach the backend, so a grpc-java that starts enforcing it shows here.
func TestProxylessCircuitBreaking(t *testing.T) {
	const maxRequests = 2
	consul := harness.StartConsul(t)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: breakers}
spec:
  host: "*.service.consul"
  trafficPolicy:
    connectionPool: {http: {http2MaxRequests: %d}}
`, maxRequests)), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "breakers-" + pc.name
			port, inFlight := harness.StartCountingSlowEcho(t, svc, 300*time.Millisecond)
			t.Cleanup(func() { t.Logf("the backend held up to %d calls at once", inFlight.Max()) })
			consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
			boot := renderBootstrap(t, "--node-id", "e2e-breakers-"+pc.name, "--xds-address", b.xdsAddr)
			opts := callOpts{concurrency: 6, timeout: 5 * time.Second}
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, port), opts), boot)
			first := 0
			c.waitUntil(0, 60*time.Second, "a first call answered", func(rs []callResult) bool {
				first = slices.IndexFunc(rs, func(r callResult) bool { return r.backend != "" })
				return first >= 0
			})
			// The limit holds from there: a client checks it at each pick but
			// counts a call once it started, so the calls queued while the
			// channel connected may all pass together.
			inFlight.Reset()
			enforced := pc.name != "grpc-java"
			c.waitUntil(first, 60*time.Second, "20 calls answered and, where enforced, one over the limit refused", func(rs []callResult) bool {
				ok := 0
				for _, r := range rs {
					if r.backend != "" {
						ok++
					}
				}
				return ok >= 20 && (!enforced || slices.ContainsFunc(rs, func(r callResult) bool { return r.backend == "" }))
			})
			// The calls up to now: stopping the client cuts those in flight.
			rs := c.since(first)
			c.stop()
			for i, r := range rs {
				if r.backend == "" && (!enforced || !isStatus(r.err, "UNAVAILABLE")) {
					t.Errorf("call %d: %s, want an answer or, where the limit is enforced, UNAVAILABLE", first+i, r.err)
				}
			}
			switch got := inFlight.Max(); {
			case enforced && got != maxRequests:
				t.Errorf("the backend held up to %d calls at once, want %d (max_requests, with 6 calls in flight at the client)", got, maxRequests)
			case !enforced && got <= maxRequests:
				t.Errorf("the backend held up to %d calls at once: %s now enforces max_requests; update the README's A32 row and this test", got, pc.name)
			}
		})
	}
	assertNoNACKs(t, b)
}

// assertNoNACKs fails t when the bridge counted a NACK
// (meshbridge_xds_nacks_total): no client rejected what it was served.
func assertNoNACKs(t *testing.T, b *bridge) {
	t.Helper()
	for line := range strings.Lines(b.get("/metrics")) {
		if strings.HasPrefix(line, "meshbridge_xds_nacks_total{") && !strings.HasSuffix(strings.TrimSpace(line), " 0") {
			t.Errorf("a client NACKed: %s", strings.TrimSpace(line))
		}
	}
}

// TestProxylessLeastRequestPerClient: a DestinationRule asking
// LEAST_REQUEST (gRFC A48) is served as it is to the clients that
// implement it (grpc-go ≥ 1.73, grpc-java ≥ 1.48) and as ROUND_ROBIN to
// those that would NACK it (gRPC C-core, grpc-js), as istiod does not:
// every client calls both backends, none NACKs, and /debug/syncz shows
// each client's family and what it was served in a substituted form.
func TestProxylessLeastRequestPerClient(t *testing.T) {
	consul := harness.StartConsul(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: least-request}
spec:
  host: "*.service.consul"
  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
	substituted := map[string]bool{"grpc-go": false, "grpc-java": false, "c-core": true, "grpc-js": true}
	family := map[string]string{"grpc-go": "grpc-go", "grpc-java": "grpc-java", "c-core": "grpc-c-core", "grpc-js": "grpc-js"}
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "least-" + pc.name
			ports := []int{startBackend(t, svc+"-a"), startBackend(t, svc+"-b")}
			slices.Sort(ports)
			for i, p := range ports {
				consul.RegisterInstance(t, svc, fmt.Sprintf("%s-%d", svc, i), "127.0.0.1", p, nil, grpcMeta, api.HealthPassing)
			}
			node := "e2e-least-" + pc.name
			boot := renderBootstrap(t, "--node-id", node, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, ports[0]), callOpts{}), boot)
			c.waitSettled(0, 60*time.Second, svc+"-a", svc+"-b")

			var syncz struct {
				Streams []struct {
					Node, Family, UserAgent string
					Substituted             []string
				}
			}
			if err := json.Unmarshal([]byte(b.get("/debug/syncz")), &syncz); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, s := range syncz.Streams {
				if s.Node != node {
					continue
				}
				found = true
				t.Logf("%s: user agent %q, family %s, substituted %q", pc.name, s.UserAgent, s.Family, s.Substituted)
				if s.Family != family[pc.name] {
					t.Errorf("%s is taken for family %q (user agent %q), want %q", pc.name, s.Family, s.UserAgent, family[pc.name])
				}
				if got := slices.Contains(s.Substituted, "loadBalancer.simple:LEAST_REQUEST"); got != substituted[pc.name] {
					t.Errorf("%s: LEAST_REQUEST substituted: %v, want %v (substituted %q)", pc.name, got, substituted[pc.name], s.Substituted)
				}
			}
			if !found {
				t.Fatalf("no stream of node %s on /debug/syncz", node)
			}
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessRingHash: a DestinationRule hashing on a header
// (consistentHash.httpHeaderName: the cluster's RING_HASH and the route's
// hash_policy, gRFC A42) sends every call carrying one value to one
// backend: 100 calls with one value reach one backend, and 100 values
// cycled three times each reach one backend per value and spread over all
// three. gRPC C-core 1.51 (Debian's python3-grpcio) crashes on a ring
// hash cluster (grpc/grpc#31766), so it is served round robin, shown as a
// substitution on /debug/syncz: its calls spread over the three, and it
// does not crash.
func TestProxylessRingHash(t *testing.T) {
	consul := harness.StartConsul(t)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ring}
spec:
  host: "*.service.consul"
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x-user}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "ring-" + pc.name
			names := []string{svc + "-a", svc + "-b", svc + "-c"}
			ports := []int{startBackend(t, names[0]), startBackend(t, names[1]), startBackend(t, names[2])}
			slices.Sort(ports)
			for i, p := range ports {
				consul.RegisterInstance(t, svc, fmt.Sprintf("%s-%d", svc, i), "127.0.0.1", p, nil, grpcMeta, api.HealthPassing)
			}
			target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, ports[0])
			run := func(values int) *client {
				boot := renderBootstrap(t, "--node-id", fmt.Sprintf("e2e-ring-%s-%d", pc.name, values), "--xds-address", b.xdsAddr)
				return runProxyless(t, pc.name, pc.command(t, target, callOpts{interval: 5 * time.Millisecond,
					cycleHeader: fmt.Sprintf("x-user=%d", values)}), boot)
			}

			// 100 values: once every backend answered (each connected:
			// a ring hash client connects lazily), 300 calls.
			c := run(100)
			ringHash := pc.name != "c-core"
			warm := 0
			c.waitUntil(0, 60*time.Second, "every backend reached", func(rs []callResult) bool {
				seen := map[string]bool{}
				for i, r := range rs {
					seen[r.backend] = true
					if seen[names[0]] && seen[names[1]] && seen[names[2]] {
						warm = i + 1
						return true
					}
				}
				return false
			})
			c.waitUntil(0, 120*time.Second, "300 more calls", func(rs []callResult) bool { return len(rs) >= warm+300 })
			substituted := slices.Contains(substitutedFor(t, b, fmt.Sprintf("e2e-ring-%s-100", pc.name)), "loadBalancer.consistentHash")
			c.stop()
			owner := map[int]string{}
			reached := map[string]int{}
			for i, r := range c.since(0)[warm : warm+300] {
				value := (warm + i) % 100
				if r.backend == "" {
					t.Fatalf("call %d (v%d) failed: %s", warm+i, value, r.err)
				}
				if o, ok := owner[value]; ok && o != r.backend && ringHash {
					t.Fatalf("v%d reached %s and %s", value, o, r.backend)
				}
				owner[value] = r.backend
				reached[r.backend]++
			}
			t.Logf("%s: 100 values over %v", pc.name, reached)
			if len(reached) != 3 {
				t.Errorf("100 values reached %v, want all three backends", reached)
			}

			if substituted == ringHash {
				t.Errorf("%s: ring hash substituted: %v, want %v", pc.name, substituted, !ringHash)
			}
			if !ringHash {
				return
			}

			// One value: 100 calls, one backend.
			one := run(1)
			one.waitUntil(0, 60*time.Second, "120 calls", func(rs []callResult) bool { return len(rs) >= 120 })
			one.stop()
			got := map[string]int{}
			for _, r := range one.since(0)[20:120] {
				got[cmpBackend(r)]++
			}
			if len(got) != 1 || got["error"] > 0 {
				t.Errorf("100 calls with one value reached %v, want one backend", got)
			}
		})
	}
	assertNoNACKs(t, b)
}

// substitutedFor returns what /debug/syncz shows node was served in a
// substituted form; it fails t when node has no stream.
func substitutedFor(t *testing.T, b *bridge, node string) []string {
	t.Helper()
	var syncz struct {
		Streams []struct {
			Node        string
			Substituted []string
		}
	}
	if err := json.Unmarshal([]byte(b.get("/debug/syncz")), &syncz); err != nil {
		t.Fatal(err)
	}
	for _, s := range syncz.Streams {
		if s.Node == node {
			return s.Substituted
		}
	}
	t.Fatalf("no stream of node %s on /debug/syncz", node)
	return nil
}

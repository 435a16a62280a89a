package e2e

import (
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

// routingBridge starts Consul and a bridge following it whose policy.files
// is one file holding policy, and returns both.
func routingBridge(t *testing.T, policy string) (*harness.Consul, *bridge) {
	t.Helper()
	consul := harness.StartConsul(t)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	return consul, startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
}

// virtualService is a VirtualService document for host with spec lines
// under http[0] (indented four spaces).
func virtualService(name, host, http string) string {
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: %s}\nspec:\n"+
		"  hosts: [%s]\n  http:\n  - %s---\n", name, host, strings.TrimPrefix(http, "    "))
}

// isStatus reports whether a client's error line carries the gRPC status
// name (as "DEADLINE_EXCEEDED"; grpc-go writes "DeadlineExceeded").
func isStatus(err, name string) bool {
	camel := strings.ReplaceAll(strings.Title(strings.ToLower(strings.ReplaceAll(name, "_", " "))), " ", "") //nolint:staticcheck // ASCII status names
	return strings.Contains(err, name) || strings.Contains(err, "code = "+camel)
}

// TestProxylessRouteTimeout: a VirtualService timeout of 200ms (gRFC A31,
// max_stream_duration) ends each call to a backend that answers after 2s
// with DEADLINE_EXCEEDED, in every gRPC implementation, although the
// caller's own deadline is 5s: no call succeeds.
func TestProxylessRouteTimeout(t *testing.T) {
	var policy strings.Builder
	for _, pc := range proxylessClients {
		host := "slow-" + pc.name + ".service.consul"
		policy.WriteString(virtualService("slow-"+pc.name, host, "    route:\n    - destination: {host: "+host+"}\n    timeout: 200ms\n"))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "slow-" + pc.name
			port := harness.StartSlowEcho(t, svc, 2*time.Second)
			consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
			boot := renderBootstrap(t, "--node-id", "e2e-timeout-"+pc.name, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, port),
				callOpts{timeout: 5 * time.Second}), boot)
			c.waitUntil(0, 60*time.Second, "3 calls in a row ended DEADLINE_EXCEEDED", func(rs []callResult) bool {
				return len(rs) >= 3 && !slices.ContainsFunc(rs[len(rs)-3:], func(r callResult) bool {
					return !isStatus(r.err, "DEADLINE_EXCEEDED")
				})
			})
			if i := slices.IndexFunc(c.since(0), func(r callResult) bool { return r.backend != "" }); i >= 0 {
				t.Errorf("call %d succeeded past the route's timeout: %+v", i, c.since(0)[i])
			}
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessRouteRetries: a backend failing each call's first attempt
// (UNAVAILABLE) serves every call of a client whose route retries
// unavailable (gRFC A44), in every gRPC implementation; without the
// VirtualService the calls fail.
func TestProxylessRouteRetries(t *testing.T) {
	var policy strings.Builder
	for _, pc := range proxylessClients {
		host := "retry-" + pc.name + ".service.consul"
		policy.WriteString(virtualService("retry-"+pc.name, host,
			"    route:\n    - destination: {host: "+host+"}\n    retries: {attempts: 2, retryOn: unavailable}\n"))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			for _, svc := range []string{"retry-" + pc.name, "noretry-" + pc.name} {
				port := harness.StartFirstAttemptFailingEcho(t, svc)
				consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
				boot := renderBootstrap(t, "--node-id", "e2e-"+svc, "--xds-address", b.xdsAddr)
				c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, port), callOpts{}), boot)
				if strings.HasPrefix(svc, "retry-") {
					c.waitSettled(0, 60*time.Second, svc)
				} else {
					c.waitUntil(0, 60*time.Second, "5 calls in a row failed by "+svc, func(rs []callResult) bool {
						return len(rs) >= 5 && !slices.ContainsFunc(rs[len(rs)-5:], func(r callResult) bool {
							return !strings.Contains(r.err, svc+" fails a first attempt")
						})
					})
				}
				c.stop()
			}
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessWeightedHosts: a VirtualService splitting a host's calls
// 90/10 with another host (gRFC A28 weighted clusters, the second on its
// own port) splits 1,000 calls of every gRPC implementation within ±5 %.
func TestProxylessWeightedHosts(t *testing.T) {
	const calls = 1000
	ports := map[string][2]int{}
	var policy strings.Builder
	for _, pc := range proxylessClients {
		stable, canary := "split-"+pc.name, "canary-"+pc.name
		ps := [2]int{startBackend(t, stable), startBackend(t, canary)}
		ports[pc.name] = ps
		policy.WriteString(virtualService(stable, stable+".service.consul", fmt.Sprintf(
			"    route:\n    - destination: {host: %s.service.consul}\n      weight: 90\n"+
				"    - destination: {host: %s.service.consul, port: {number: %d}}\n      weight: 10\n", stable, canary, ps[1])))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			stable, canary := "split-"+pc.name, "canary-"+pc.name
			ps := ports[pc.name]
			consul.RegisterInstance(t, stable, stable+"-1", "127.0.0.1", ps[0], nil, grpcMeta, api.HealthPassing)
			consul.RegisterInstance(t, canary, canary+"-1", "127.0.0.1", ps[1], nil, grpcMeta, api.HealthPassing)
			boot := renderBootstrap(t, "--node-id", "e2e-split-"+pc.name, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", stable, ps[0]),
				callOpts{interval: 5 * time.Millisecond}), boot)
			// Counted from the first call the canary answered: both
			// clusters are resolved from then on.
			first := 0
			c.waitUntil(0, 60*time.Second, "a call to "+canary, func(rs []callResult) bool {
				first = slices.IndexFunc(rs, func(r callResult) bool { return r.backend == canary })
				return first >= 0
			})
			c.waitUntil(first, 120*time.Second, fmt.Sprintf("%d calls", calls), func(rs []callResult) bool { return len(rs) >= calls })
			c.stop()
			n := map[string]int{}
			for _, r := range c.since(first)[:calls] {
				n[cmpBackend(r)]++
			}
			t.Logf("%s: %v", pc.name, n)
			if n[stable]+n[canary] != calls || n[canary] < calls*5/100 || n[canary] > calls*15/100 {
				t.Errorf("%d calls split %v, want %s 10 %% ± 5 and no error", calls, n, canary)
			}
		})
	}
	assertNoNACKs(t, b)
}

// cmpBackend is a call's backend, or "error".
func cmpBackend(r callResult) string {
	if r.backend == "" {
		return "error"
	}
	return r.backend
}

// TestProxylessRouteFault: a VirtualService fault aborting every call
// with PERMISSION_DENIED (gRFC A33: the fault filter in the listener, its
// config on the route) ends each call of every gRPC implementation with
// that status before it reaches the backend.
func TestProxylessRouteFault(t *testing.T) {
	var policy strings.Builder
	for _, pc := range proxylessClients {
		host := "fault-" + pc.name + ".service.consul"
		policy.WriteString(virtualService("fault-"+pc.name, host, "    route:\n    - destination: {host: "+host+"}\n"+
			"    fault: {abort: {grpcStatus: PERMISSION_DENIED, percentage: {value: 100}}}\n"))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "fault-" + pc.name
			port := startBackend(t, svc)
			consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
			boot := renderBootstrap(t, "--node-id", "e2e-fault-"+pc.name, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, port), callOpts{}), boot)
			c.waitUntil(0, 60*time.Second, "5 calls in a row aborted PERMISSION_DENIED", func(rs []callResult) bool {
				return len(rs) >= 5 && !slices.ContainsFunc(rs[len(rs)-5:], func(r callResult) bool {
					return !isStatus(r.err, "PERMISSION_DENIED")
				})
			})
			if i := slices.IndexFunc(c.since(0), func(r callResult) bool { return r.backend != "" }); i >= 0 {
				t.Errorf("call %d reached the backend through an abort of every call: %+v", i, c.since(0)[i])
			}
		})
	}
	assertNoNACKs(t, b)
}

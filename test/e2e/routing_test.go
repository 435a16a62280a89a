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
	apinetworking "istio.io/api/networking/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// versionSubsets is a DestinationRule document named name for host with
// subsets v1 and v2 selecting instances by their label (value v1, v2).
func versionSubsets(name, host, label string) string {
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: %[1]s}\n"+
		"spec:\n  host: %[2]s\n  subsets:\n  - name: v1\n    labels: {%[3]s: v1}\n  - name: v2\n    labels: {%[3]s: v2}\n---\n",
		name, host, label)
}

// assertSplit checks the 90/10 split of a gray release over the calls
// calls c makes after its first call that reached v2 (from there the
// VirtualService and every backend are served; before, calls may reach the
// host's cluster or fail), then stops c: every call answered, 10 % ± 5 %
// of them by v2 (the binomial spread is ±1 % at one standard deviation),
// and each of v1 reached.
func assertSplit(t *testing.T, c *client, calls int, v2 string, v1 ...string) {
	t.Helper()
	mark := 0
	c.waitUntil(0, 90*time.Second, "a call reached "+v2, func(rs []callResult) bool {
		mark = slices.IndexFunc(rs, func(r callResult) bool { return r.backend == v2 }) + 1
		return mark > 0
	})
	c.waitUntil(mark, 120*time.Second, fmt.Sprintf("%d more calls", calls), func(rs []callResult) bool { return len(rs) >= calls })
	c.stop()
	count := map[string]int{}
	for i, r := range c.since(mark)[:calls] {
		if r.backend == "" {
			t.Fatalf("call %d failed: %s", mark+i, r.err)
		}
		count[r.backend]++
	}
	if n := count[v2]; n < calls*5/100 || n > calls*15/100 {
		t.Errorf("%d of %d calls reached subset v2 (%v), want 10 %% ± 5 %%", n, calls, count)
	}
	for _, b := range v1 {
		if count[b] == 0 {
			t.Errorf("calls reached %v, want every v1 backend", count)
		}
	}
	t.Logf("%d calls: %v", calls, count)
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

// withFault runs check, for each gRPC implementation, on a client calling
// a one-instance service whose VirtualService injects fault (a YAML flow
// map of HTTPFaultInjection), and checks that no client NACKed.
func withFault(t *testing.T, prefix, fault string, opts callOpts, check func(t *testing.T, c *client)) {
	t.Helper()
	var policy strings.Builder
	for _, pc := range proxylessClients {
		host := prefix + "-" + pc.name + ".service.consul"
		policy.WriteString(virtualService(prefix+"-"+pc.name, host, "    route:\n    - destination: {host: "+host+"}\n"+
			"    fault: "+fault+"\n"))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := prefix + "-" + pc.name
			port := startBackend(t, svc)
			consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
			boot := renderBootstrap(t, "--node-id", "e2e-"+svc, "--xds-address", b.xdsAddr)
			check(t, runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, port), opts), boot))
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessRouteFault: a VirtualService fault aborting every call
// with PERMISSION_DENIED (gRFC A33: the fault filter in the listener, its
// config on the route) ends each call of every gRPC implementation with
// that status before it reaches the backend.
func TestProxylessRouteFault(t *testing.T) {
	withFault(t, "fault", "{abort: {grpcStatus: PERMISSION_DENIED, percentage: {value: 100}}}", callOpts{}, func(t *testing.T, c *client) {
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

// TestProxylessRouteFaultDelay: a VirtualService fault delaying every call
// by 300ms (gRFC A33) holds each call of every gRPC implementation that
// long before it reaches the backend, which answers at once: calls still
// succeed, and no two results of calls made back to back (5ms apart) are
// closer than the delay.
func TestProxylessRouteFaultDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	opts := callOpts{interval: 5 * time.Millisecond, timeout: 5 * time.Second}
	withFault(t, "delay", "{delay: {fixedDelay: 300ms, percentage: {value: 100}}}", opts, func(t *testing.T, c *client) {
		first := 0
		c.waitUntil(0, 60*time.Second, "a first call answered", func(rs []callResult) bool {
			first = slices.IndexFunc(rs, func(r callResult) bool { return r.backend != "" })
			return first >= 0
		})
		c.waitUntil(first, 60*time.Second, "10 more calls", func(rs []callResult) bool { return len(rs) > 10 })
		c.stop()
		rs := c.since(first)[:11]
		for i := 1; i < len(rs); i++ {
			if rs[i].backend == "" {
				t.Fatalf("call %d failed: %s", first+i, rs[i].err)
			}
			if gap := rs[i].at.Sub(rs[i-1].at); gap < delay {
				t.Errorf("call %d ended %v after the one before, want at least the %v delay", first+i, gap, delay)
			}
		}
	})
}

// TestProxylessSubsets: gray release by metadata. Three instances of one
// Consul service, each on its own port, declare version v1, v1 and v2 in
// their meta; a DestinationRule's subsets select by it (gRFC A28: a
// cluster per subset), and a VirtualService sends calls with x-canary: v1
// to subset v2, the others (x-canary: v0) to v1. Every call of every gRPC
// implementation reaches its subset. Then one v1 instance re-registers as
// v2 (a meta change, nothing else): calls with x-canary: v1 reach it too,
// and the others no longer do.
func TestProxylessSubsets(t *testing.T) {
	var policy strings.Builder
	for _, pc := range proxylessClients {
		host := "gray-" + pc.name + ".service.consul"
		policy.WriteString(versionSubsets("gray-"+pc.name, host, "version"))
		policy.WriteString(fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: gray-%s}\n"+
			"spec:\n  hosts: [%s]\n  http:\n  - match:\n    - headers: {x-canary: {exact: v1}}\n"+
			"    route:\n    - destination: {host: %s, subset: v2}\n  - route:\n    - destination: {host: %s, subset: v1}\n---\n",
			pc.name, host, host, host))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "gray-" + pc.name
			names := []string{svc + "-v1a", svc + "-v1b", svc + "-v2"}
			ports := []int{startBackend(t, names[0]), startBackend(t, names[1]), startBackend(t, names[2])}
			meta := func(version string) map[string]string {
				return map[string]string{"protocol": "grpc", "version": version}
			}
			// In port order: the service's port is the first instance's,
			// which the client dials.
			versions := []string{"v1", "v1", "v2"}
			order := []int{0, 1, 2}
			slices.SortFunc(order, func(i, j int) int { return ports[i] - ports[j] })
			for _, i := range order {
				consul.RegisterInstance(t, svc, names[i], "127.0.0.1", ports[i], nil, meta(versions[i]), api.HealthPassing)
			}
			boot := renderBootstrap(t, "--node-id", "e2e-gray-"+pc.name, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, slices.Min(ports)),
				callOpts{interval: 5 * time.Millisecond, cycleHeader: "x-canary=2"}), boot)
			// inSubset reports whether the last 100 calls from start each
			// reached a backend of their subset (v2: the names of subset
			// v2's); call i sends x-canary: v<i mod 2>.
			inSubset := func(start int, v2 []string) func(rs []callResult) bool {
				return func(rs []callResult) bool {
					if len(rs) < 100 {
						return false
					}
					for i, r := range rs[len(rs)-100:] {
						canary := (start+len(rs)-100+i)%2 == 1
						if r.backend == "" || slices.Contains(v2, r.backend) != canary {
							return false
						}
					}
					return true
				}
			}
			c.waitUntil(0, 90*time.Second, "100 calls in a row in their subsets", inSubset(0, names[2:]))
			mark := len(c.since(0))
			// Once it holds, it holds: every later call too.
			c.waitUntil(mark, 60*time.Second, "200 more calls", func(rs []callResult) bool { return len(rs) >= 200 })
			for i, r := range c.since(mark)[:200] {
				canary := (mark+i)%2 == 1
				if r.backend == "" || (r.backend == names[2]) != canary {
					t.Fatalf("call %d (x-canary %v) reached %q (%s)", mark+i, canary, r.backend, r.err)
				}
			}
			seen := map[string]bool{}
			for _, r := range c.since(mark) {
				seen[r.backend] = true
			}
			if !seen[names[0]] || !seen[names[1]] {
				t.Errorf("v1 calls reached %v, want both v1 instances", seen)
			}

			// v1b becomes v2.
			consul.RegisterInstance(t, svc, names[1], "127.0.0.1", ports[1], nil, meta("v2"), api.HealthPassing)
			mark = len(c.since(0))
			c.waitUntil(mark, 90*time.Second, "100 calls in a row in their new subsets", inSubset(mark, names[1:]))
			c.stop()
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessSubsetWeights: gray release by weight. Three instances of
// one Consul service on their own ports declare version v1, v1 and v2 in
// their meta; a DestinationRule's subsets select by it and a VirtualService
// sends 90 % of calls to subset v1, 10 % to v2 (gRFC A28 weighted
// clusters). Of 1,000 calls of each gRPC implementation, all answered,
// between 5 % and 15 % reach the v2 instance (10 % ± 5 %; the binomial
// spread is ±1 % at one standard deviation), and both v1 instances are
// reached.
func TestProxylessSubsetWeights(t *testing.T) {
	const calls = 1000
	var policy strings.Builder
	for _, pc := range proxylessClients {
		host := "split-" + pc.name + ".service.consul"
		policy.WriteString(versionSubsets("split-"+pc.name, host, "version"))
		policy.WriteString(virtualService("split-"+pc.name, host, "    route:\n    - destination: {host: "+host+", subset: v1}\n"+
			"      weight: 90\n    - destination: {host: "+host+", subset: v2}\n      weight: 10\n"))
	}
	consul, b := routingBridge(t, policy.String())
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "split-" + pc.name
			names := []string{svc + "-v1a", svc + "-v1b", svc + "-v2"}
			versions := []string{"v1", "v1", "v2"}
			ports := []int{startBackend(t, names[0]), startBackend(t, names[1]), startBackend(t, names[2])}
			order := []int{0, 1, 2}
			slices.SortFunc(order, func(i, j int) int { return ports[i] - ports[j] })
			for _, i := range order { // the lowest port first: the service's port, which the client dials
				consul.RegisterInstance(t, svc, names[i], "127.0.0.1", ports[i], nil,
					map[string]string{"protocol": "grpc", "version": versions[i]}, api.HealthPassing)
			}
			boot := renderBootstrap(t, "--node-id", "e2e-split-"+pc.name, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, slices.Min(ports)),
				callOpts{interval: 2 * time.Millisecond, timeout: 5 * time.Second}), boot)
			assertSplit(t, c, calls, names[2], names[0], names[1])
		})
	}
	assertNoNACKs(t, b)
}

// TestProxylessPolicyFromKubernetes: a VirtualService created in a real
// kube-apiserver (policy.kubernetes) reaches every gRPC implementation
// through the bridge (a fault aborting every call), and deleting it
// leaves them: calls succeed again.
func TestProxylessPolicyFromKubernetes(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ic := istioClient(t, k)
	consul := harness.StartConsul(t)
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("kubernetes: {kubeconfig: %q}\npolicy: {kubernetes: {enabled: true, namespaces: [%s]}}\n",
		k.Kubeconfig(t), ns))
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "kpolicy-" + pc.name
			host := svc + ".service.consul"
			vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: ns}}
			vs.Spec.Hosts = []string{host}
			vs.Spec.Http = []*apinetworking.HTTPRoute{{
				Route: []*apinetworking.HTTPRouteDestination{{Destination: &apinetworking.Destination{Host: host}}},
				Fault: &apinetworking.HTTPFaultInjection{Abort: &apinetworking.HTTPFaultInjection_Abort{
					ErrorType:  &apinetworking.HTTPFaultInjection_Abort_GrpcStatus{GrpcStatus: "PERMISSION_DENIED"},
					Percentage: &apinetworking.Percent{Value: 100}}},
			}}
			if _, err := ic.NetworkingV1().VirtualServices(ns).Create(t.Context(), vs, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			port := startBackend(t, svc)
			consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
			boot := renderBootstrap(t, "--node-id", "e2e-"+svc, "--xds-address", b.xdsAddr)
			c := runProxyless(t, pc.name, pc.command(t, fmt.Sprintf("xds:///%s:%d", host, port), callOpts{interval: 20 * time.Millisecond}), boot)
			inARow := func(ok func(callResult) bool) func([]callResult) bool {
				return func(rs []callResult) bool {
					return len(rs) >= 5 && !slices.ContainsFunc(rs[len(rs)-5:], func(r callResult) bool { return !ok(r) })
				}
			}
			c.waitUntil(0, 60*time.Second, "5 calls in a row aborted PERMISSION_DENIED", inARow(func(r callResult) bool {
				return isStatus(r.err, "PERMISSION_DENIED")
			}))
			if err := ic.NetworkingV1().VirtualServices(ns).Delete(t.Context(), svc, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			mark := len(c.since(0))
			c.waitUntil(mark, 60*time.Second, "5 calls in a row answered once the VirtualService is deleted",
				inARow(func(r callResult) bool { return r.backend == svc }))
		})
	}
	assertNoNACKs(t, b)
}

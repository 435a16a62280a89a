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

// TestProxylessTLS: a DestinationRule's tls reaches every proxyless client
// as an UpstreamTlsContext whose certificates come from the file_watcher
// certificate provider `meshbridge bootstrap --upstream-*` writes (gRFC
// A29), against backends registered in Consul that speak TLS only:
//   - SIMPLE (the backend verified by the CA and a SAN) and MUTUAL (the
//     backend also requires the client's certificate) succeed;
//   - a SAN the backend's certificate lacks, and a bootstrap whose CA did
//     not sign it, are refused: no call succeeds;
//   - a client whose bootstrap declares no certificate provider is refused
//     the backend (no endpoint: never plaintext), at once (its calls do
//     not wait for their deadline), and /debug/syncz names the refusal;
//
// and no client NACKs.
func TestProxylessTLS(t *testing.T) {
	consul := harness.StartConsul(t)
	ca := harness.NewCA(t, "backend-ca")
	other := harness.NewCA(t, "other-ca")
	const san = "echo-tls.backend.test"
	serverCert := ca.ServerCert(t, san)
	clientCert := ca.ClientCert(t, "e2e-client", "spiffe://cluster.local/ns/e2e/sa/client")

	// Per client family: a SIMPLE host, a MUTUAL host, and a SIMPLE host
	// asking a SAN the backend lacks.
	var rules strings.Builder
	rule := func(host, mode string, sans ...string) {
		fmt.Fprintf(&rules, "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: %s}\n"+
			"spec:\n  host: %s.service.consul\n  trafficPolicy:\n    tls: {mode: %s, subjectAltNames: [%s]}\n",
			host, host, mode, strings.Join(sans, ", "))
	}
	for _, pc := range proxylessClients {
		rule("simple-"+pc.name, "SIMPLE", san)
		rule("mutual-"+pc.name, "MUTUAL", san)
		rule("wrongsan-"+pc.name, "SIMPLE", "someone-else.test")
	}
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, consulRegistry(consul)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))

	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			register := func(svc string, clientCA *harness.CA) int {
				port := harness.StartTLSEcho(t, svc, serverCert, clientCA)
				consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
				return port
			}
			simple, mutual, wrongSAN := "simple-"+pc.name, "mutual-"+pc.name, "wrongsan-"+pc.name
			simplePort := register(simple, nil)
			mutualPort := register(mutual, ca)
			wrongSANPort := register(wrongSAN, nil)

			boot := func(node string, caFile string) string {
				return renderBootstrap(t, "--node-id", node, "--xds-address", b.xdsAddr, "--upstream-ca-file", caFile,
					"--upstream-cert-file", clientCert.CertFile, "--upstream-key-file", clientCert.KeyFile)
			}
			opts := callOpts{xdsCreds: true}
			call := func(node, svc string, port int, bootstrap string) *client {
				return runProxyless(t, node, pc.command(t, fmt.Sprintf("xds:///%s.service.consul:%d", svc, port), opts), bootstrap)
			}
			good := boot("e2e-tls-"+pc.name, ca.CertFile)
			simpleCalls := call("simple", simple, simplePort, good)
			mutualCalls := call("mutual", mutual, mutualPort, good)
			wrongSANCalls := call("wrong-san", wrongSAN, wrongSANPort, good)
			wrongCACalls := call("wrong-ca", simple, simplePort, boot("e2e-tls-wrong-ca-"+pc.name, other.CertFile))
			refusedNode := "e2e-tls-no-provider-" + pc.name
			refusedCalls := call("no-provider", simple, simplePort,
				renderBootstrap(t, "--node-id", refusedNode, "--xds-address", b.xdsAddr))

			simpleCalls.waitSettled(0, 60*time.Second, simple)
			mutualCalls.waitSettled(0, 60*time.Second, mutual)
			for _, c := range []struct {
				what  string
				calls *client
			}{
				{"a SAN the backend lacks", wrongSANCalls},
				{"a CA that did not sign the backend", wrongCACalls},
				{"a bootstrap with no certificate provider", refusedCalls},
			} {
				c.calls.waitUntil(0, 60*time.Second, "20 calls answered or failed", func(rs []callResult) bool { return len(rs) >= 20 })
				for i, r := range c.calls.since(0) {
					if r.backend != "" {
						t.Errorf("%s: call %d reached %s, want every call refused", c.what, i, r.backend)
					}
				}
			}
			// Refused at once (an assignment without endpoints), not held
			// until the call's deadline waiting for one: held, the first
			// 15 s of calls (gRPC's resource timer) would each wait their
			// 1 s. A few may wait while the client first resolves the
			// target (a cold JVM).
			rs := refusedCalls.since(0)[:20]
			held := 0
			for _, r := range rs {
				if strings.Contains(strings.ToLower(r.err), "deadline") {
					held++
				}
			}
			t.Logf("%s: a refused call fails with %q; %d of 20 waited for their deadline", pc.name, rs[len(rs)-1].err, held)
			if held > 8 {
				t.Errorf("%d of the first 20 refused calls waited for their deadline, want them to fail at once", held)
			}
			if got := substitutedFor(t, b, refusedNode); !slices.Contains(got, "tls.mode:SIMPLE:refused") {
				t.Errorf("/debug/syncz shows %s served %q in a substituted form, want tls.mode:SIMPLE:refused", refusedNode, got)
			}
			if got := substitutedFor(t, b, "e2e-tls-"+pc.name); len(got) != 0 {
				t.Errorf("/debug/syncz shows e2e-tls-%s served %q in a substituted form, want nothing", pc.name, got)
			}
			for _, c := range []*client{simpleCalls, mutualCalls, wrongSANCalls, wrongCACalls, refusedCalls} {
				c.stop()
			}
		})
	}
	assertNoNACKs(t, b)
}

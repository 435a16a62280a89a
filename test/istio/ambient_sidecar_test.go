package istio

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// TestAmbientSidecarViewProxylessGRPC: the istiod that serves ztunnel
// serves the sidecar view of meshbridge's Kubernetes output too. A
// proxyless grpc-go client (node metadata GENERATOR: grpc, so istiod
// answers with its grpc generator) resolves xds:///<host>:8080 through
// istiod, and its calls reach the registry's instances, real gRPC servers;
// an instance removed from the registry stops receiving calls. In both
// endpoint modes.
func TestAmbientSidecarViewProxylessGRPC(t *testing.T) {
	a := startAmbient(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		b1, b2 := startEcho(t, "b1"), startEcho(t, "b2")
		s := a.scenario(t)
		host := s.host("echo")
		writeServices(t, s.path, fileServices{host: svc(host, 8080, "grpc", b1, b2)})
		start := time.Now()
		s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
		conn := dialIstiod(t, a.istiod.GRPCAddr, s.ns, host+":8080")
		// The sidecar view needs no VIP; istiod allocates one all the same.
		t.Logf("%s: VIPs %v", host, vips(s.allocated(t, host)[host]))

		reached := awaitCalls(t, conn, 1, "b1", "b2")
		t.Logf("first call through istiod reached %s %s after meshbridge started", reached,
			time.Since(start).Round(time.Millisecond))
		awaitCalls(t, conn, 1, map[string]string{"b1": "b2", "b2": "b1"}[reached])

		removed := writeServices(t, s.path, fileServices{host: svc(host, 8080, "grpc", b1)})
		awaitCalls(t, conn, 20, "b1")
		t.Logf("20 calls in a row reached b1 alone %s after b2 left the registry", time.Since(removed).Round(time.Millisecond))
	})
}

// startEcho serves echo.Whoami, answering name, on a free 127.0.0.1 port
// until the test ends, and returns it as a registry instance.
func startEcho(t *testing.T, name string) file.InstanceSpec {
	t.Helper()
	return instance("127.0.0.1", uint32(harness.StartEcho(t, name)), nil)
}

// dialIstiod connects a proxyless gRPC client to xds:///target through
// istiod's plaintext xDS at addr, as a workload of namespace ns (a sidecar
// node id, which istiod requires: type~ip~id~domain).
func dialIstiod(t *testing.T, addr, ns, target string) *grpc.ClientConn {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~127.0.0.1~echo-client.%s~%s.svc.cluster.local",
			"metadata": {"GENERATOR": "grpc", "NAMESPACE": %q}}
	}`, addr, ns, ns, ns)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// awaitCalls calls until streak calls in a row reach one of want, and
// returns the backend the last call reached; it fails at ambientWait. The
// client applies xDS updates asynchronously and offers no hook, so this
// retries.
func awaitCalls(t *testing.T, conn *grpc.ClientConn, streak int, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ambientWait)
	defer cancel()
	run := 0
	var name string
	var err error
	for run < streak {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		name, err = echo.Whoami(callCtx, waitForReady{conn})
		callCancel()
		if ctx.Err() != nil {
			t.Fatalf("no %d calls in a row reached %v; last: %q, %v", streak, want, name, err)
		}
		if err == nil && slices.Contains(want, name) {
			run++
		} else {
			run = 0
		}
	}
	return name
}

// waitForReady makes every call wait for a ready connection (until its
// deadline) instead of failing at once while the xDS client resolves.
type waitForReady struct{ *grpc.ClientConn }

func (c waitForReady) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.ClientConn.Invoke(ctx, method, args, reply, append(opts, grpc.WaitForReady(true))...)
}

package xds

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// These tests run a real grpc-go xDS client (google.golang.org/grpc/xds)
// in-process against a DiscoveryServer and real gRPC backends (rules 3-6 and
// 8). The client applies updates asynchronously and offers no hook, so
// assertions on it retry until a deadline.

const echoHost = "echo.test.local"

// dialXDS connects a proxyless gRPC client to xds:///echo.test.local:8080
// through the xDS server at xdsAddr, with node metadata GENERATOR: grpc.
func dialXDS(t *testing.T, xdsAddr string) *grpc.ClientConn {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "test-client", "metadata": {"GENERATOR": "grpc"}}
	}`, xdsAddr)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+gen.ListenerName(8080, echoHost),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// awaitBackends calls until `streak` calls in a row reach one of want, or
// fails at the deadline.
func awaitBackends(t *testing.T, conn *grpc.ClientConn, streak int, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	run := 0
	for run < streak {
		name, err := callName(ctx, conn)
		if ctx.Err() != nil {
			t.Fatalf("no %d calls in a row reached %v; last: %q, %v", streak, want, name, err)
		}
		if err == nil && contains(want, name) {
			run++
		} else {
			run = 0
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func echoServiceModel() *model.Service {
	return &model.Service{
		Hostname: echoHost, Namespace: "mesh", Resolution: model.ResolutionStatic,
		Ports: []model.Port{{Name: "grpc-8080", Number: 8080, Protocol: model.ProtocolGRPC}},
	}
}

func TestProxylessGRPCClientFollowsEndpoints(t *testing.T) {
	b1 := startBackend(t, "b1", "r1/z1/")
	b2 := startBackend(t, "b2", "r1/z2/")
	src := &staticSource{}
	src.set(echoServiceModel())
	ts := startServer(t, src, "127.0.0.1:0")
	ts.EDSUpdate("test", echoHost, "mesh", []*model.Endpoint{b1}, time.Time{})
	close(ts.ready)
	<-ts.Serving()
	ts.waitPushes(t, 1)
	conn := dialXDS(t, ts.Addr().String())

	t.Run("calls reach the only endpoint", func(t *testing.T) {
		awaitBackends(t, conn, 5, "b1")
	})
	t.Run("an added endpoint receives traffic", func(t *testing.T) {
		ts.EDSUpdate("test", echoHost, "mesh", []*model.Endpoint{b1, b2}, time.Time{})
		ts.waitPushes(t, 1)
		awaitBackends(t, conn, 1, "b2")
	})
	t.Run("a removed endpoint stops receiving traffic", func(t *testing.T) {
		ts.EDSUpdate("test", echoHost, "mesh", []*model.Endpoint{b2}, time.Time{})
		ts.waitPushes(t, 1)
		awaitBackends(t, conn, 20, "b2")
	})
}

func TestNoXDSBeforeReady(t *testing.T) {
	b1 := startBackend(t, "b1", "")
	src := &staticSource{}
	src.set(echoServiceModel())

	// Reserve a port, so the client can be pointed at the server before it
	// is bound.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()

	ts := startServer(t, src, addr)
	ts.EDSUpdate("test", echoHost, "mesh", []*model.Endpoint{b1}, time.Time{})
	conn := dialXDS(t, addr)
	conn.Connect() // the xDS client starts talking to the server that does not serve yet

	// An ADS stream of its own (not the xDS client's) opened before ready,
	// waiting for the server.
	first := make(chan *discovery.DiscoveryResponse, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := ads.OpenSotW(ctx, rawClient(t, addr), ads.Options{Node: envoyNode(), Manual: true,
			CallOptions: []grpc.CallOption{grpc.WaitForReady(true)}})
		if err == nil {
			s.Receive(nil)
			err = s.Subscribe(resourcev3.ClusterType, nil)
		}
		var resp *discovery.DiscoveryResponse
		if err == nil {
			resp, err = s.Next(30 * time.Second)
		}
		if err != nil {
			t.Errorf("raw ADS stream: %v", err)
		}
		first <- resp
	}()

	// The port is bound from the start (a taken port fails at once), and
	// answers nothing until ready.
	harness.EventuallyTrue(t, 10*time.Second, "the port bound before ready", func() bool {
		return ts.Addr() != nil && ts.Addr().String() == addr
	})
	select {
	case <-ts.Serving():
		t.Fatal("serving before ready")
	case resp := <-first:
		t.Fatalf("xDS response before ready: %v", resp)
	default:
	}
	close(ts.ready)
	<-ts.Serving()
	if resp := <-first; len(resp.GetResources()) != 1 {
		t.Fatalf("first CDS response after ready has %d clusters, want the whole mesh (1)", len(resp.GetResources()))
	}
	awaitBackends(t, conn, 5, "b1")
}

// TestProxylessGRPCClientCallsAtMaxWeights: endpoints at the largest weight
// a registry lets through, two in one locality and one in another, sum past
// what grpc-go accepts per locality and per priority; the assignment's
// weights are scaled down to fit (weightScale), so the client takes it,
// NACKs nothing, and calls reach the backends; the service is counted once
// in meshbridge_xds_scaled_weights_total however often it is pushed.
func TestProxylessGRPCClientCallsAtMaxWeights(t *testing.T) {
	heavy := func(name, locality string) *model.Endpoint {
		e := startBackend(t, name, locality)
		e.Weight = maxFileWeight
		return e
	}
	b1, b2, b3 := heavy("b1", "r1/z1/"), heavy("b2", "r1/z1/"), heavy("b3", "r2/z1/")
	scaledBefore := testutil.ToFloat64(scaledWeights)
	nacksBefore := testutil.ToFloat64(nacksTotal.WithLabelValues(resourcev3.EndpointType))
	src := &staticSource{}
	src.set(echoServiceModel())
	ts := startServer(t, src, "127.0.0.1:0")
	ts.EDSUpdate("test", echoHost, "mesh", []*model.Endpoint{b1, b2, b3}, time.Time{})
	close(ts.ready)
	<-ts.Serving()
	ts.waitPushes(t, 1)
	conn := dialXDS(t, ts.Addr().String())
	awaitBackends(t, conn, 10, "b1", "b2", "b3")
	// Pushed again with one weight changed: still scaled, not counted again.
	b3.Weight = maxFileWeight - 1
	ts.EDSUpdate("test", echoHost, "mesh", []*model.Endpoint{b1, b2, b3}, time.Time{})
	ts.waitPushes(t, 1)
	awaitBackends(t, conn, 10, "b1", "b2", "b3")
	if n := testutil.ToFloat64(nacksTotal.WithLabelValues(resourcev3.EndpointType)) - nacksBefore; n != 0 {
		t.Errorf("%v EDS NACKs, want none", n)
	}
	if n := testutil.ToFloat64(scaledWeights) - scaledBefore; n != 1 {
		t.Errorf("meshbridge_xds_scaled_weights_total grew by %v, want 1 (once per service)", n)
	}
}

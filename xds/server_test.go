package xds

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshbridge/meshbridge/model"
)

// staticSource is a ServiceSource whose services the test sets.
type staticSource struct {
	mu       sync.Mutex
	services []*model.Service
}

func (s *staticSource) Services() []*model.Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services
}

func (s *staticSource) set(services ...*model.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services = services
}

// testServer is a running DiscoveryServer and what it was started with.
type testServer struct {
	*DiscoveryServer
	ready chan struct{}
	seen  int // last sequence number waited for
}

// startServer runs a DiscoveryServer with a 1ms quiet period until the test
// ends; ready is left open for the test to close (or use startReadyServer).
func startServer(t *testing.T, src ServiceSource, address string) *testServer {
	t.Helper()
	return runServer(t, src, Options{Address: address, DebounceAfter: time.Millisecond, EnableEDSDebounce: true})
}

// runServer runs a DiscoveryServer with opts (logs discarded unless
// opts.Logger is set) until the test ends; ready is left open for the test
// to close.
func runServer(t *testing.T, src ServiceSource, opts Options) *testServer {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := NewDiscoveryServer(src, opts)
	ts := &testServer{DiscoveryServer: srv, ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ts.ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ts
}

// startReadyServer starts a server on a free port, declares it ready and
// waits until it serves.
func startReadyServer(t *testing.T, src ServiceSource) *testServer {
	t.Helper()
	ts := startServer(t, src, "127.0.0.1:0")
	close(ts.ready)
	<-ts.Serving()
	ts.waitPushes(t, 1)
	return ts
}

// waitPushes waits until n more pushes than last time completed.
func (ts *testServer) waitPushes(t *testing.T, n int) {
	t.Helper()
	ts.seen += n
	deadline := time.After(30 * time.Second)
	for {
		select {
		case seq := <-ts.Sequence():
			if seq >= ts.seen {
				ts.seen = seq
				return
			}
		case <-deadline:
			t.Fatalf("push %d: not within 30s", ts.seen)
		}
	}
}

// echoService answers /meshbridge.test.Echo/Name with the backend's name.
var echoService = grpc.ServiceDesc{
	ServiceName: "meshbridge.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Name",
		Handler: func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.StringValue)); err != nil {
				return nil, err
			}
			return wrapperspb.String(srv.(string)), nil
		},
	}},
}

// startBackend serves echoService on a free 127.0.0.1 port until the test
// ends and returns its endpoint for service port 8080.
func startBackend(t *testing.T, name, locality string) *model.Endpoint {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&echoService, name)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	host, port, _ := net.SplitHostPort(lis.Addr().String())
	p, _ := strconv.ParseUint(port, 10, 32)
	return &model.Endpoint{
		Address: host, EndpointPort: uint32(p), ServicePortName: "grpc-8080",
		Weight: 1, Locality: locality, WorkloadName: name,
	}
}

// callName calls the echo service once and returns the backend's name.
func callName(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, "/meshbridge.test.Echo/Name", wrapperspb.String(""), out, grpc.WaitForReady(true))
	return out.GetValue(), err
}

// rawClient opens a plain (non-xDS) gRPC connection to addr.
func rawClient(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// envoyNode is a node without GENERATOR metadata: an Envoy.
func envoyNode() *core.Node {
	return &core.Node{Id: "envoy-1"}
}

// grpcNode is a proxyless gRPC node.
func grpcNode() *core.Node {
	return &core.Node{Id: "grpc-1", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"GENERATOR": structpb.NewStringValue("grpc"),
	}}}
}

// TestRunFailsAtOnceOnATakenPort: Run binds its listeners before it waits
// for ready, so a port that is taken is an error at once, naming it, not
// after every registry synced.
func TestRunFailsAtOnceOnATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for name, opts := range map[string]Options{
		"xds": {Address: taken.Addr().String()},
		"mcp": {Address: "127.0.0.1:0", MCP: mcpOptions(&fakeConfigs{}), MCPAddress: taken.Addr().String()},
	} {
		t.Run(name, func(t *testing.T) {
			opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			srv := NewDiscoveryServer(&staticSource{}, opts)
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { done <- srv.Run(ctx, make(chan struct{})) }() // never ready
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
					t.Fatalf("Run: %v, want an error naming %s in use", err, taken.Addr())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run still waits for ready with its port taken")
			}
		})
	}
}

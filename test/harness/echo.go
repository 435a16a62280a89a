package harness

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
)

// StartEcho serves the example echo service (examples/grpc/echo: Whoami
// answers name) on a free 127.0.0.1 port until the test ends, and returns
// the port.
func StartEcho(t testing.TB, name string) int {
	t.Helper()
	return startEcho(t, name)
}

// StartTLSEcho serves the example echo service over TLS only, presenting
// cert, on a free 127.0.0.1 port until the test ends; with clientCA it
// also requires of every client a certificate clientCA issued (mTLS). A
// plaintext or unverified connection fails its handshake. It returns the
// port.
func StartTLSEcho(t testing.TB, name string, cert *KeyPair, clientCA *CA) int {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLSCertificate(t)}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCA.Pool()
	}
	return startEcho(t, name, grpc.Creds(credentials.NewTLS(cfg)))
}

// StartFailingEcho serves the example echo service on a free 127.0.0.1
// port until the test ends, answering every call UNAVAILABLE with the
// message "<name> fails every call", so that a client's errors name it;
// it returns the port.
func StartFailingEcho(t testing.TB, name string) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return status.Error(codes.Unavailable, name+" fails every call")
	}))
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

// StartSwitchableEcho serves the example echo service on a free 127.0.0.1
// port until the test ends, answering every call UNAVAILABLE ("<name> is
// failing") while failing is set, as a backend that goes bad and recovers;
// it returns the port and the switch, off.
func StartSwitchableEcho(t testing.TB, name string) (port int, failing *atomic.Bool) {
	t.Helper()
	failing = &atomic.Bool{}
	port = startEchoWith(t, name, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if failing.Load() {
			return nil, status.Error(codes.Unavailable, name+" is failing")
		}
		return h(ctx, req)
	})
	return port, failing
}

// StartSlowEcho serves the example echo service on a free 127.0.0.1 port
// until the test ends, answering each call after delay (or when the call
// ends first); it returns the port.
func StartSlowEcho(t testing.TB, name string, delay time.Duration) int {
	t.Helper()
	port, _ := StartCountingSlowEcho(t, name, delay)
	return port
}

// StartCountingSlowEcho is StartSlowEcho that also counts the calls it
// holds at once (InFlight).
func StartCountingSlowEcho(t testing.TB, name string, delay time.Duration) (port int, in *InFlight) {
	t.Helper()
	in = &InFlight{}
	port = startEchoWith(t, name, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		in.add(1)
		defer in.add(-1)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return h(ctx, req)
	})
	return port, in
}

// InFlight counts a server's calls in flight. Safe for concurrent use.
type InFlight struct {
	mu        sync.Mutex
	now, most int
}

func (in *InFlight) add(d int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.now += d
	in.most = max(in.most, in.now)
}

// Max returns the most calls held at once since the server started or the
// last Reset.
func (in *InFlight) Max() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.most
}

// Reset starts a new count of the most calls held at once from the calls
// in flight now.
func (in *InFlight) Reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.most = in.now
}

// StartFirstAttemptFailingEcho serves the example echo service on a free
// 127.0.0.1 port until the test ends, answering UNAVAILABLE ("<name>
// fails a first attempt") to each call's first attempt and serving its
// retries: an attempt carrying grpc-previous-rpc-attempts, which a gRPC
// client sends on each retry (gRFC A6). It returns the port.
func StartFirstAttemptFailingEcho(t testing.TB, name string) int {
	t.Helper()
	return startEchoWith(t, name, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("grpc-previous-rpc-attempts")) == 0 {
			return nil, status.Error(codes.Unavailable, name+" fails a first attempt")
		}
		return h(ctx, req)
	})
}

// startEchoWith serves the example echo service behind interceptor.
func startEchoWith(t testing.TB, name string, interceptor grpc.UnaryServerInterceptor) int {
	t.Helper()
	return startEcho(t, name, grpc.UnaryInterceptor(interceptor))
}

// startEcho serves the example echo service with opts on a free 127.0.0.1
// port until the test ends, and returns the port.
func startEcho(t testing.TB, name string, opts ...grpc.ServerOption) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	echo.Register(s, name)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

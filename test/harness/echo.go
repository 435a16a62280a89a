package harness

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
)

// StartEcho serves the example echo service (examples/grpc/echo: Whoami
// answers name) on a free 127.0.0.1 port until the test ends, and returns
// the port.
func StartEcho(t testing.TB, name string) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	echo.Register(s, name)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
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

package harness

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Linux
// hands out ephemeral ports pseudo-randomly, so another process taking it
// before the caller binds it is unlikely, not impossible.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. Calling FreePort n times may return a port twice (each is
// closed before the next is picked); a server given two equal ports fails.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago (see FreePort), holding each open until all are picked so none repeats.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

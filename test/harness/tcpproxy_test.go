package harness

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// ioTimeout bounds every read and write of these tests.
const ioTimeout = 10 * time.Second

// startTCPServer serves handle on a 127.0.0.1 port until the test ends,
// closing each connection when handle returns.
func startTCPServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = lis.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(ioTimeout))
				handle(c)
			})
		}
	})
	return lis.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	return c
}

// roundTrip writes msg to an echoing connection and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back %q: %v", msg, err)
	}
	if string(got) != msg {
		t.Fatalf("read back %q, want %q", got, msg)
	}
}

// ended waits until c's peer closed it: a read returns EOF or a reset.
func ended(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after the cut: read: %v", err)
	}
}

// TestTCPProxyForwardsCutsAndKeepsAccepting: bytes go both ways and are
// counted; Cut closes every open pair at once; a new connection gets through
// after it; Close ends the open pairs and stops accepting.
func TestTCPProxyForwardsCutsAndKeepsAccepting(t *testing.T) {
	target := startTCPServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	p := StartTCPProxy(t, target)

	c1, c2 := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, c1, "hello")
	roundTrip(t, c2, "world!")
	EventuallyTrue(t, ioTimeout, "bytes counted both ways", func() bool {
		return p.BytesToTarget() == 11 && p.BytesToClient() == 11
	})
	if p.Open() != 2 || p.Accepted() != 2 {
		t.Fatalf("open %d, accepted %d; want 2 and 2", p.Open(), p.Accepted())
	}

	if n := p.Cut(); n != 2 {
		t.Fatalf("Cut closed %d pairs, want 2", n)
	}
	ended(t, c1)
	ended(t, c2)
	if p.Cuts() != 1 {
		t.Fatalf("Cuts = %d, want 1", p.Cuts())
	}

	c3 := dial(t, p.Addr())
	roundTrip(t, c3, "again")
	if p.Accepted() != 3 {
		t.Fatalf("accepted %d, want 3", p.Accepted())
	}

	p.Close()
	ended(t, c3)
	if c, err := net.DialTimeout("tcp", p.Addr(), ioTimeout); err == nil {
		_ = c.Close()
		t.Fatal("the proxy still accepts after Close")
	}
	p.Close() // a second Close does nothing
}

// TestTCPProxyCutAfter: an armed cut lets exactly n of the target's bytes
// through, however large the target's write, then closes every pair (an
// idle one too); the proxy keeps accepting and the next cut needs arming.
func TestTCPProxyCutAfter(t *testing.T) {
	blob := make([]byte, 256<<10)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	// The target answers each byte it reads with the whole blob.
	target := startTCPServer(t, func(c net.Conn) {
		one := make([]byte, 1)
		for {
			if _, err := c.Read(one); err != nil {
				return
			}
			if _, err := c.Write(blob); err != nil {
				return
			}
		}
	})
	p := StartTCPProxy(t, target)
	idle := dial(t, p.Addr())
	c := dial(t, p.Addr())
	EventuallyTrue(t, ioTimeout, "both pairs open", func() bool { return p.Open() == 2 })

	const n = 1000
	tr := p.CutAfter(n)
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if len(got) != n || !bytes.Equal(got, blob[:n]) {
		t.Fatalf("the client got %d bytes (read error %v), want the blob's first %d", len(got), err, n)
	}
	ended(t, idle)
	EventuallyTrue(t, ioTimeout, "the trip fired", tr.Fired)
	if tr.Pairs() != 2 {
		t.Fatalf("the trip closed %d pairs, want 2", tr.Pairs())
	}
	t.Logf("the cut dropped %d bytes of the read that reached %d", tr.Dropped(), n)

	// Not armed any more: a whole blob gets through.
	c = dial(t, p.Addr())
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	all := make([]byte, len(blob))
	if _, err := io.ReadFull(c, all); err != nil || !bytes.Equal(all, blob) {
		t.Fatalf("after the trip: read %v, equal %v", err, bytes.Equal(all, blob))
	}
	if p.Cuts() != 1 {
		t.Fatalf("Cuts = %d, want 1", p.Cuts())
	}
}

package zookeeper

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// heldReadProxy is a TCP proxy in front of the real ZooKeeper that, once
// armed, lets the next watch notification through and then holds the
// server's next reply (the read the notification prompts) and everything
// after it, until released. It produces on demand the interleaving a real
// server produces only by chance: changes between a watch firing and the
// answer to the read that re-arms it.
type heldReadProxy struct {
	ln     net.Listener
	server string

	mu      sync.Mutex
	armed   bool
	holding bool
	release chan struct{}
	// Holding is closed when a reply is held.
	Holding chan struct{}
}

func newHeldReadProxy(t *testing.T, server string) *heldReadProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldReadProxy{ln: ln, server: server}
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", server)
			if err != nil {
				c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, s)
			connsMu.Unlock()
			wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			wg.Go(func() { p.serverToClient(c, s); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.Release()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return p
}

// Address is the proxy's host:port.
func (p *heldReadProxy) Address() string { return p.ln.Addr().String() }

// Arm holds the reply after the next watch notification.
func (p *heldReadProxy) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.holding = true, false
	p.release, p.Holding = make(chan struct{}), make(chan struct{})
}

// Release lets the held replies through.
func (p *heldReadProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.release != nil {
		close(p.release)
		p.release = nil
	}
}

// ZooKeeper frames: a 4-byte length, then the packet; every packet but the
// first (the connect response) starts with a reply header whose xid is -1
// for a watch notification and -2 for a ping reply.
const (
	xidWatch = -1
	xidPing  = -2
)

// serverToClient copies the server's frames to the client, holding them
// as Arm says.
func (p *heldReadProxy) serverToClient(c, s net.Conn) {
	first := true
	for {
		var size [4]byte
		if _, err := io.ReadFull(s, size[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
		copy(frame, size[:])
		if _, err := io.ReadFull(s, frame[4:]); err != nil {
			return
		}
		if !first && len(frame) >= 8 {
			p.hold(int32(binary.BigEndian.Uint32(frame[4:8])))
		}
		first = false
		if _, err := c.Write(frame); err != nil {
			return
		}
	}
}

// hold waits, when armed, before the first reply after a notification.
func (p *heldReadProxy) hold(xid int32) {
	p.mu.Lock()
	switch {
	case !p.armed:
	case xid == xidWatch:
		p.holding = true
	case p.holding && xid != xidPing:
		p.armed = false
		release, holding := p.release, p.Holding
		p.mu.Unlock()
		close(holding)
		if release != nil {
			<-release
		}
		return
	}
	p.mu.Unlock()
}

// TestProviderChangedWhileReadIsHeld: a provider leaves (the watch on its
// interface's providers fires), and its read's answer is held while it
// comes back, then while it comes back and leaves again. The read re-arms
// the watch in the same request (ZooKeeper's getChildren with a watch), so
// a change after the read fires again and is read again: the final state
// is the server's, whatever the interleaving (doc.go rule 1).
func TestProviderChangedWhileReadIsHeld(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	key := "providers:" + demoIface + "::"
	urlA := providerURL("tri", "10.0.0.1:50051", demoIface, nil)
	urlB := providerURL("tri", "10.0.0.2:50051", demoIface, nil)
	pathA := "/dubbo/" + demoIface + "/providers/" + urlA
	register(t, app, demoIface, urlB)
	both := []string{"10.0.0.1:50051", "10.0.0.2:50051"}
	cases := []struct {
		name   string
		during func(t *testing.T)
		want   []string
	}{
		{"A leaves and comes back while the read is held", func(t *testing.T) { register(t, app, demoIface, urlA) }, both},
		{"A leaves, comes back and leaves again while the read is held", func(t *testing.T) {
			register(t, app, demoIface, urlA)
			if err := app.Delete(pathA, -1); err != nil {
				t.Fatal(err)
			}
		}, []string{"10.0.0.2:50051"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has a registry of its own, through a proxy of its
			// own: once it serves both providers, the read that delivered
			// them has set the watch the deletion below fires. (A registry
			// shared with the case before could still be re-reading after
			// that case's release, with no watch set when A leaves.)
			if ok, _, err := app.Exists(pathA); err != nil {
				t.Fatal(err)
			} else if !ok {
				register(t, app, demoIface, urlA)
			}
			proxy := newHeldReadProxy(t, z.Address())
			b := &Block{Servers: []string{proxy.Address()}, SessionTimeout: duration("10s")}
			b.Default()
			reg, err := b.New("zk-held", slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			rec := registrytest.Run(t, reg, 20*time.Second)
			rec.Eventually(t, "both providers", func(s registrytest.State) bool { return slices.Equal(s.Addrs(key), both) })
			proxy.Arm()
			if err := app.Delete(pathA, -1); err != nil {
				t.Fatal(err)
			}
			registrytest.WaitClosed(t, proxy.Holding, "a read held")
			tc.during(t)
			proxy.Release()
			rec.Eventually(t, "the server's state", func(s registrytest.State) bool { return slices.Equal(s.Addrs(key), tc.want) })
		})
	}
}

// TestHungServerIsDown: ZooKeeper stopped with SIGSTOP (by its PID): the
// kernel still accepts connections and the client sits connected, waiting.
// The registry is down within 15 s (Health, meshbridge_registry_up, one log
// line), keeps every provider, is up within 2 s of SIGCONT with a true
// downFor, and then follows changes again.
func TestHungServerIsDown(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	key := "providers:" + demoIface + "::"
	// Persistent: the test server's sessions last at most 4 s, and a
	// server that resumes expires those it did not hear from meanwhile,
	// ephemeral providers' included (they register again in a new one).
	persistent := func(url string) {
		harness.CreatePath(t, app, "/dubbo/"+demoIface+"/providers/"+url, nil, zk.FlagPersistent)
	}
	persistent(providerURL("tri", "10.0.0.1:50051", demoIface, nil))
	var logs harness.LockedBuffer
	b := &Block{Servers: z.Servers(), SessionTimeout: duration("4s")}
	b.Default()
	reg, err := b.New("zk-hang", slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	rec := registrytest.Run(t, reg, 20*time.Second)
	rec.Eventually(t, "the provider", func(s registrytest.State) bool { return len(s.Good[key]) == 1 })
	registrytest.CheckHang(t, rec, registrytest.Hang{
		Registry: "zk-hang", Health: reg.(*Registry).Health, Logs: &logs, Hold: 3 * time.Second,
		Pause: func() { z.Pause(t) }, Resume: func() { z.Resume(t) },
	})
	app = z.Client(t) // the first one's session expired while the server hung
	persistent(providerURL("tri", "10.0.0.2:50051", demoIface, nil))
	rec.Eventually(t, "a provider registered after the hang", func(s registrytest.State) bool { return len(s.Good[key]) == 2 })
}

package xds

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// reconnectingClient keeps one CDS subscription open, reopening its stream
// whenever it ends, and records the size of every response.
type reconnectingClient struct {
	mu        sync.Mutex
	responses []int // clusters per response, in order
	changed   chan struct{}
}

func (c *reconnectingClient) run(ctx context.Context, conn *grpc.ClientConn, id string) {
	node := grpcNode()
	node.Id = id
	for ctx.Err() == nil {
		s, err := ads.OpenSotW(ctx, conn, ads.Options{Node: node, CallOptions: []grpc.CallOption{grpc.WaitForReady(true)}})
		if err != nil {
			continue
		}
		s.Receive(func(r ads.Receipt) error {
			c.mu.Lock()
			c.responses = append(c.responses, len(r.Resp.GetResources()))
			c.mu.Unlock()
			select {
			case c.changed <- struct{}{}:
			default:
			}
			return nil
		})
		// A failed send ends the stream, as a failed receive does.
		_ = s.Subscribe(resourcev3.ClusterType, nil)
		<-s.Done()
	}
}

func (c *reconnectingClient) snapshot() (count, last int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.responses) > 0 {
		last = c.responses[len(c.responses)-1]
	}
	return len(c.responses), last
}

// waitLast waits until the client's latest response holds want clusters.
func (c *reconnectingClient) waitLast(t *testing.T, want int) {
	t.Helper()
	deadline := time.After(wait)
	for {
		if _, last := c.snapshot(); last == want {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			_, last := c.snapshot()
			t.Fatalf("latest response holds %d clusters, want %d", last, want)
		}
	}
}

// TestSyncGateHoldsAcrossRestartWithManyClients pins rule 8: with 50 clients
// connected, a restarted server answers none of them before its first full
// push (a grpc-go client treats a cluster missing from a SotW response as
// deleted), and then every client gets the complete current state.
func TestSyncGateHoldsAcrossRestartWithManyClients(t *testing.T) {
	const clients = 50
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	src := &staticSource{}
	src.set(grpcService("a.example", 8080), grpcService("b.example", 8080))
	start := func(ready <-chan struct{}) (*DiscoveryServer, func()) {
		s := NewDiscoveryServer(src, Options{Address: addr, DebounceAfter: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx, ready) }()
		return s, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	ready1 := make(chan struct{})
	close(ready1)
	s1, stop1 := start(ready1)
	<-s1.Serving()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cs := make([]*reconnectingClient, clients)
	for i := range cs {
		cs[i] = &reconnectingClient{changed: make(chan struct{}, 1)}
		conn := rawClient(t, addr)
		wg.Go(func() { cs[i].run(ctx, conn, fmt.Sprintf("client-%d", i)) })
	}
	for _, c := range cs {
		c.waitLast(t, 2)
	}

	// Restart: the mesh grows meanwhile; the new server is not ready yet.
	stop1()
	src.set(grpcService("a.example", 8080), grpcService("b.example", 8080), grpcService("c.example", 8080))
	before := make([]int, clients)
	for i, c := range cs {
		before[i], _ = c.snapshot()
	}
	ready2 := make(chan struct{})
	s2, stop2 := start(ready2)
	defer stop2()
	// An observation window, not a timing assertion: clients keep retrying
	// while the new server holds back.
	time.Sleep(300 * time.Millisecond)
	for i, c := range cs {
		if n, _ := c.snapshot(); n != before[i] {
			t.Fatalf("client %d got %d responses before the restarted server was ready", i, n-before[i])
		}
	}
	select {
	case <-s2.Serving():
		t.Fatal("the restarted server serves before ready")
	default:
	}

	close(ready2)
	for _, c := range cs {
		c.waitLast(t, 3)
	}
}

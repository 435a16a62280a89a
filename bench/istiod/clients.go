package istiod

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// node is a proxyless gRPC client's node: an Istio sidecar-style ID
// (type~ip~id~domain, which istiod requires) and metadata GENERATOR=grpc,
// so that istiod serves it with its grpc generator, as it does grpc-go's
// xDS client with Istio's bootstrap, and ISTIO_VERSION of the istiod built
// (istio.io/istio's VERSION file). Both servers get the same nodes.
func node(name string) *core.Node {
	md, err := structpb.NewStruct(map[string]any{"GENERATOR": "grpc", "NAMESPACE": "default", "ISTIO_VERSION": "1.31.0"})
	if err != nil {
		panic(err)
	}
	return &core.Node{Id: "sidecar~127.0.0.1~" + name + ".default~default.svc.cluster.local", Cluster: "bench", Metadata: md}
}

// coldClient is the cold-sync client: one SotW stream asking the
// ClusterLoadAssignment of every generated service by name; it is done once
// it holds each with all of its endpoints.
type coldClient struct {
	conn *grpc.ClientConn
	st   *ads.SotW
	want int // endpoints per CLA

	mu       sync.Mutex
	counts   map[string]int // endpoints of each CLA held
	complete int            // CLAs holding want endpoints
	total    int
	doneAt   time.Time
	done     chan struct{}
	err      error // a CLA that did not decode
}

// openCold connects to addr and subscribes to clusters' CLAs.
func openCold(ctx context.Context, addr string, clusters []string, want int) (*coldClient, error) {
	conn, err := ads.Dial(addr)
	if err != nil {
		return nil, err
	}
	st, err := ads.OpenSotW(ctx, conn, ads.Options{Node: node("bench-cold"), DiscardResources: true,
		CallOptions: []grpc.CallOption{grpc.WaitForReady(true)}})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	c := &coldClient{conn: conn, st: st, want: want, counts: make(map[string]int, len(clusters)),
		total: len(clusters), done: make(chan struct{})}
	st.Receive(func(r ads.Receipt) error {
		if r.Resp.GetTypeUrl() == resourcev3.EndpointType {
			c.record(r)
		}
		return nil
	})
	if err := st.Subscribe(resourcev3.EndpointType, clusters); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *coldClient) record(r ads.Receipt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, res := range r.Resp.GetResources() {
		name, eps, err := ads.Endpoints(res)
		if err != nil {
			c.err = err
			continue
		}
		old, had := c.counts[name]
		if had && old == c.want {
			c.complete--
		}
		c.counts[name] = len(eps)
		if len(eps) == c.want {
			c.complete++
		}
	}
	if c.complete == c.total && c.doneAt.IsZero() {
		c.doneAt = r.At
		close(c.done)
	}
}

// progress reports how far the client got: CLAs held, CLAs complete.
func (c *coldClient) progress() (held, complete int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.counts), c.complete
}

// wait waits until the client is done (its receive time), ctx ends, the
// stream ends or the deadline passes (zero time, no error).
func (c *coldClient) wait(ctx context.Context, deadline time.Time) (time.Time, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.doneAt, c.err
	case <-c.st.Done():
		return time.Time{}, fmt.Errorf("cold-sync stream ended: %v", c.st.Err())
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-t.C:
		return time.Time{}, nil
	}
}

func (c *coldClient) close() {
	c.st.Close()
	_ = c.conn.Close()
}

// watcher is one of the N churn clients: a SotW stream on the changing
// service's ClusterLoadAssignment, counting what it receives.
type watcher struct {
	st    *ads.SotW
	count atomic.Int64 // EDS responses since reset
	bytes atomic.Int64 // their encoded size
	first atomic.Int64 // UnixNano of the first since reset
}

func (w *watcher) reset() {
	w.count.Store(0)
	w.bytes.Store(0)
	w.first.Store(0)
}

// fanout is the N churn clients, StreamsPerConn streams per connection as
// in the scale suite.
type fanout struct {
	conns    []*grpc.ClientConn
	watchers []*watcher
}

// connectFanout opens n streams to addr watching cluster and waits until
// each received its first ClusterLoadAssignment.
func connectFanout(ctx context.Context, addr string, n int, cluster string, timeout time.Duration) (*fanout, error) {
	conns, err := pipeline.Dial(addr, n)
	if err != nil {
		return nil, err
	}
	f := &fanout{conns: conns}
	for i := range n {
		st, err := ads.OpenSotW(ctx, conns[i/pipeline.StreamsPerConn], ads.Options{Node: node(fmt.Sprintf("bench-%d", i)),
			DiscardResources: true})
		if err != nil {
			f.close()
			return nil, err
		}
		w := &watcher{st: st}
		f.watchers = append(f.watchers, w)
		st.Receive(func(r ads.Receipt) error {
			if r.Resp.GetTypeUrl() != resourcev3.EndpointType {
				return nil
			}
			if w.count.Add(1) == 1 {
				w.first.Store(r.At.UnixNano())
			}
			w.bytes.Add(int64(r.Size))
			return nil
		})
		if err := st.Subscribe(resourcev3.EndpointType, []string{cluster}); err != nil {
			f.close()
			return nil, err
		}
	}
	if _, err := f.await(ctx, time.Now().Add(timeout)); err != nil {
		f.close()
		return nil, fmt.Errorf("connecting %d clients: %w", n, err)
	}
	return f, nil
}

// await waits until every watcher received something since the last reset
// and returns how many did; an error when the deadline passed first.
func (f *fanout) await(ctx context.Context, deadline time.Time) (int, error) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		got := 0
		for _, w := range f.watchers {
			if w.count.Load() > 0 {
				got++
			}
		}
		if got == len(f.watchers) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("%d of %d clients received nothing in time", len(f.watchers)-got, len(f.watchers))
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-tick.C:
		}
	}
}

func (f *fanout) reset() {
	for _, w := range f.watchers {
		w.reset()
	}
}

// sums returns the latest first receive (UnixNano), the responses and the
// bytes received over all watchers since the last reset.
func (f *fanout) sums() (last, responses, bytes int64) {
	for _, w := range f.watchers {
		last = max(last, w.first.Load())
		responses += w.count.Load()
		bytes += w.bytes.Load()
	}
	return last, responses, bytes
}

func (f *fanout) close() {
	for _, w := range f.watchers {
		w.st.Close()
	}
	for _, c := range f.conns {
		_ = c.Close()
	}
}

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// client is one ADS stream, SotW or Delta, behaving like Envoy: CDS by
// wildcard, then EDS for exactly the clusters it holds, subscribed before
// the CDS response is ACKed. Its view is what it holds now.
type client struct {
	name  string
	delta bool
	done  <-chan struct{}
	err   func() error

	bad atomic.Int64 // resources it could not decode

	mu       sync.Mutex
	clusters map[string]struct{} // from CDS
	clas     map[string]cla      // by cluster, from EDS
	eds      bool                // SotW: EDS requested
	lastEDS  time.Time           // when the latest EDS response came
}

// cla is what a client holds of one ClusterLoadAssignment: the digest of
// its endpoints and when it came (UnixNano), for diagnosis.
type cla struct {
	digest uint64
	at     int64
}

func newClient(name string, delta bool) *client {
	return &client{name: name, delta: delta, clusters: make(map[string]struct{}), clas: make(map[string]cla)}
}

// view returns the clusters the client holds with their endpoints' digest;
// a cluster without a ClusterLoadAssignment yet has digest 0, which no
// endpoint set has in practice.
func (c *client) view() state {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(state, len(c.clusters))
	for name := range c.clusters {
		out[name] = c.clas[name].digest
	}
	// A ClusterLoadAssignment held for a cluster it no longer has is a
	// difference too.
	for name := range c.clas {
		if _, ok := c.clusters[name]; !ok {
			out["stale CLA "+name] = 0
		}
	}
	return out
}

// setCLA records an encoded ClusterLoadAssignment of a cluster the client
// holds; others are late answers to an unsubscribed name.
func (c *client) setCLA(b []byte) {
	name, d, err := claDigest(b)
	if err != nil {
		c.bad.Add(1)
		return
	}
	c.mu.Lock()
	if _, ok := c.clusters[name]; ok {
		c.clas[name] = cla{digest: d, at: time.Now().UnixNano()}
	}
	c.mu.Unlock()
}

// openSotW opens a SotW client: every CDS response is the whole set, and a
// changed set is re-requested on EDS by its complete list of names.
func openSotW(ctx context.Context, conn *grpc.ClientConn, name string) (*client, error) {
	s, err := ads.OpenSotW(ctx, conn, ads.Options{Node: &core.Node{Id: name, Cluster: "soak"}, DiscardResources: true})
	if err != nil {
		return nil, err
	}
	c := newClient(name, false)
	c.done, c.err = s.Done(), s.Err
	s.Receive(func(r ads.Receipt) error {
		switch r.Resp.TypeUrl {
		case resourcev3.ClusterType:
			set := make(map[string]struct{}, len(r.Resp.Resources))
			for _, res := range r.Resp.Resources {
				set[ads.ResourceName(res.GetValue())] = struct{}{}
			}
			c.mu.Lock()
			changed := !c.eds || len(set) != len(c.clusters)
			c.eds = true
			for name := range c.clusters {
				if _, ok := set[name]; !ok {
					changed = true
					delete(c.clas, name)
				}
			}
			c.clusters = set
			c.mu.Unlock()
			if changed {
				_ = s.Subscribe(resourcev3.EndpointType, slices.Sorted(maps.Keys(set)))
			}
		case resourcev3.EndpointType:
			for _, res := range r.Resp.Resources {
				c.setCLA(res.GetValue())
			}
			c.mu.Lock()
			c.lastEDS = r.At
			c.mu.Unlock()
		}
		return nil
	})
	if err := s.Subscribe(resourcev3.ClusterType, nil); err != nil {
		s.Close()
		return nil, err
	}
	return c, nil
}

// openDelta opens a Delta client: CDS responses add and remove clusters,
// and EDS subscriptions follow them name by name.
func openDelta(ctx context.Context, conn *grpc.ClientConn, name string) (*client, error) {
	d, err := ads.OpenDelta(ctx, conn, ads.Options{Node: &core.Node{Id: name, Cluster: "soak"}, DiscardResources: true})
	if err != nil {
		return nil, err
	}
	c := newClient(name, true)
	c.done, c.err = d.Done(), d.Err
	d.Receive(func(r ads.DeltaReceipt) error {
		switch r.Resp.TypeUrl {
		case resourcev3.ClusterType:
			var sub, unsub []string
			c.mu.Lock()
			for _, res := range r.Resp.Resources {
				if _, ok := c.clusters[res.Name]; !ok {
					c.clusters[res.Name] = struct{}{}
					sub = append(sub, res.Name)
				}
			}
			for _, name := range r.Resp.RemovedResources {
				if _, ok := c.clusters[name]; ok {
					delete(c.clusters, name)
					delete(c.clas, name)
					unsub = append(unsub, name)
				}
			}
			c.mu.Unlock()
			if len(sub) > 0 || len(unsub) > 0 {
				_ = d.Subscribe(resourcev3.EndpointType, sub, unsub)
			}
		case resourcev3.EndpointType:
			for _, res := range r.Resp.Resources {
				c.setCLA(res.GetResource().GetValue())
			}
			c.mu.Lock()
			for _, name := range r.Resp.RemovedResources {
				delete(c.clas, name)
			}
			c.lastEDS = r.At
			c.mu.Unlock()
		}
		return nil
	})
	if err := d.Subscribe(resourcev3.ClusterType, nil, nil); err != nil {
		d.Close()
		return nil, err
	}
	return c, nil
}

// fleet is the soak's clients and their connections.
type fleet struct {
	conns   []*grpc.ClientConn
	clients []*client
}

// connect opens n clients on addr, pipeline.StreamsPerConn per connection,
// alternately SotW and Delta.
func connect(ctx context.Context, addr string, n int) (*fleet, error) {
	conns, err := pipeline.Dial(addr, n)
	if err != nil {
		return nil, err
	}
	f := &fleet{conns: conns}
	for i := range n {
		conn := conns[i/pipeline.StreamsPerConn]
		var c *client
		var err error
		if i%2 == 0 {
			c, err = openSotW(ctx, conn, fmt.Sprintf("soak-sotw-%d", i))
		} else {
			c, err = openDelta(ctx, conn, fmt.Sprintf("soak-delta-%d", i))
		}
		if err != nil {
			f.close()
			return nil, err
		}
		f.clients = append(f.clients, c)
	}
	return f, nil
}

// convergence compares every client's view with want: how many match it,
// the most clusters any client differs in, and how many streams ended.
func (f *fleet) convergence(want state) (converged, worst, ended int) {
	for _, c := range f.clients {
		select {
		case <-c.done:
			ended++
			continue
		default:
		}
		n := want.diff(c.view())
		if n == 0 {
			converged++
		}
		worst = max(worst, n)
	}
	return converged, worst, ended
}

// diagnose describes the first cluster in which a client differs from
// want: what the clients hold of it, grouped by endpoint digest, with
// their modes and when their copies came; and, of the clients that hold
// another copy than want's, how many got EDS responses after it (a later
// response leaving the cluster out means the server thought the copy
// current).
func (f *fleet) diagnose(want state) string {
	var cluster, how, who string
	for _, c := range f.clients {
		view := c.view()
		if want.diff(view) > 0 {
			cluster, how = want.firstDiff(view)
			who = c.name
			break
		}
	}
	if cluster == "" {
		return ""
	}
	type group struct {
		sotw, delta int
		first, last int64
		laterEDS    int
	}
	groups := make(map[uint64]*group)
	var digests []uint64
	for _, c := range f.clients {
		c.mu.Lock()
		held, lastEDS := c.clas[cluster], c.lastEDS
		c.mu.Unlock()
		g := groups[held.digest]
		if g == nil {
			g = &group{first: held.at, last: held.at}
			groups[held.digest] = g
			digests = append(digests, held.digest)
		}
		if c.delta {
			g.delta++
		} else {
			g.sotw++
		}
		g.first, g.last = min(g.first, held.at), max(g.last, held.at)
		if held.digest != want[cluster] && lastEDS.UnixNano() > held.at {
			g.laterEDS++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s (want digest %x)", who, cluster, how, want[cluster])
	stamp := func(ns int64) string {
		if ns == 0 {
			return "never"
		}
		return time.Unix(0, ns).Format("15:04:05.000")
	}
	for _, d := range digests {
		g := groups[d]
		fmt.Fprintf(&b, "\n  digest %x: %d SotW and %d Delta streams, received %s to %s", d, g.sotw, g.delta, stamp(g.first), stamp(g.last))
		if d != want[cluster] {
			fmt.Fprintf(&b, ", %d of them got EDS responses since", g.laterEDS)
		}
	}
	return b.String()
}

// undecodable counts the resources the clients could not decode.
func (f *fleet) undecodable() int64 {
	var n int64
	for _, c := range f.clients {
		n += c.bad.Load()
	}
	return n
}

// firstEnded returns the first ended client's name and error, if any.
func (f *fleet) firstEnded() (string, error, bool) {
	for _, c := range f.clients {
		select {
		case <-c.done:
			return c.name, c.err(), true
		default:
		}
	}
	return "", nil, false
}

// close closes the connections, which ends every stream.
func (f *fleet) close() {
	for _, conn := range f.conns {
		_ = conn.Close()
	}
}

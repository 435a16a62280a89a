// Package ads is the ADS test client of meshbridge's tests, benchmarks and
// soak: a SotW stream (SotW) and a Delta stream (Delta) over go-control-plane's
// protos that subscribe like Envoy or proxyless gRPC (by type, by resource
// names, by wildcard), answer every response, and record per type what they
// received and accepted.
//
// A stream is opened (OpenSotW, OpenDelta; NewSotW and NewDelta for a test,
// ending with it), then its receive loop started (Receive). By default the
// loop hands each response to an optional handler, on the loop's goroutine,
// and then ACKs it; a handler that returns an error has the response NACKed
// with the error's message instead, as Envoy rejects a resource. With
// Options.FollowCDS a stream subscribes to the ClusterLoadAssignments of
// exactly the clusters its CDS responses give, before ACKing them, as Envoy
// does. With Options.Manual nothing is answered: the test reads responses
// with Next and answers with ACK, NACK or Send, for the exact requests a
// server test pins.
//
// What a stream records, per type URL: the responses it received (count,
// latest version and nonce), what it ACKed and NACKed, its subscription, and
// the resources it accepted by name (a SotW response of Listeners, Clusters
// or a non-Envoy type is the whole set; one of other types, and every Delta
// response, changes the set; resources of names no longer subscribed are
// dropped). Options.DiscardResources keeps versions and nonces only, for
// benchmarks with thousands of streams.
//
// Tests wait with Wait or Await: the condition is checked again on every
// change of the stream's state, never on a timer, until a deadline.
//
// The package imports nothing of meshbridge, so any package's tests can use
// it (package xds's own included), and nothing of the servers in
// test/harness, so the benchmark programs link it without them.
package ads

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Dial opens a plaintext gRPC connection to an xDS server that accepts
// responses of up to 1 GiB; opts are added. Many streams may share it, each
// with its own node.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30)),
	}, opts...)...)
}

// Options shape a stream.
type Options struct {
	// Node goes with the stream's first request unless that request has
	// its own.
	Node *core.Node
	// Manual: the receive loop answers nothing and queues every response
	// for Next; the caller answers with ACK, NACK or Send.
	Manual bool
	// FollowCDS: on every CDS response, before its ACK, the stream
	// subscribes to the ClusterLoadAssignments of exactly the clusters it
	// then holds (SotW: the whole list, sent when it changed; Delta: the
	// names added and removed), as Envoy does.
	FollowCDS bool
	// FollowLDS: on every LDS response, before its ACK, the stream
	// subscribes to the RouteConfigurations its listeners then name (their
	// HttpConnectionManager's RDS route_config_name), as a proxyless gRPC
	// client does.
	FollowLDS bool
	// DiscardResources: record versions, nonces and subscriptions but not
	// resources (FollowCDS and FollowLDS still keep the resources they
	// follow).
	DiscardResources bool
	// CallOptions open the stream, e.g. grpc.WaitForReady(true).
	CallOptions []grpc.CallOption
}

// TypeState is what a stream recorded of one type URL.
type TypeState struct {
	Responses int    // responses received
	Version   string // of the latest response received (Delta: system_version_info)
	Nonce     string // of the latest response received
	ACKed     string // version of the latest response ACKed
	NACKs     int    // responses NACKed
	NACKed    string // version of the latest response NACKed
	// Pending counts the responses received and not answered yet.
	Pending int
	// Names are the names subscribed to, sorted: SotW, those of the latest
	// request; Delta, those subscribed and not unsubscribed since.
	Names []string
	// Wildcard: the subscription is a wildcard, explicit ("*") or by a
	// first request without names.
	Wildcard bool
}

// ErrTimeout is what Next returns when nothing came in time.
var ErrTimeout = errors.New("nothing received in time")

// ErrEnded is what Wait's error wraps when the stream ended first.
var ErrEnded = errors.New("the stream ended")

// typeState is a stream's record of one type URL.
type typeState struct {
	TypeState
	seen       bool            // a request of this type was sent
	subscribed map[string]bool // explicit names
	// held are the accepted resources by name; the values are nil under
	// DiscardResources.
	held map[string]*anypb.Any
	// versions are the Delta resource versions of held, by name.
	versions map[string]string
	// unanswered are the responses received and neither ACKed nor NACKed
	// yet, oldest first.
	unanswered []unanswered
}

type unanswered struct {
	nonce, version string
	apply          func(*typeState) // adds the response's resources to held
}

// client is what SotW and Delta share: the record, the change signal, the
// queue of Manual streams and the end of the stream.
type client struct {
	opts Options
	done chan struct{} // closed when the receive loop ended
	err  error         // why; set before done is closed

	// sendMu orders requests on the wire as in the record.
	sendMu sync.Mutex

	mu      sync.Mutex
	node    *core.Node // sent with the first request, then nil
	types   map[string]*typeState
	changed chan struct{}   // closed and replaced on every change
	queue   []proto.Message // Manual: responses not taken by Next yet
}

func newClient(opts Options) client {
	return client{opts: opts, done: make(chan struct{}), node: opts.Node,
		types: make(map[string]*typeState), changed: make(chan struct{})}
}

// stateLocked returns typeURL's record, made on first use.
func (c *client) stateLocked(typeURL string) *typeState {
	ts := c.types[typeURL]
	if ts == nil {
		ts = &typeState{subscribed: make(map[string]bool), held: make(map[string]*anypb.Any), versions: make(map[string]string)}
		c.types[typeURL] = ts
	}
	return ts
}

// signalLocked wakes every waiter.
func (c *client) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// keeps reports whether resources of typeURL are recorded.
func (c *client) keeps(typeURL string) bool {
	return !c.opts.DiscardResources || c.following(typeURL) != nil
}

// following returns the rule by which the stream follows resources of
// typeURL (FollowCDS, FollowLDS), nil when it does not.
func (c *client) following(typeURL string) *follow {
	switch {
	case c.opts.FollowCDS && typeURL == resourcev3.ClusterType:
		return &followCDS
	case c.opts.FollowLDS && typeURL == resourcev3.ListenerType:
		return &followLDS
	}
	return nil
}

// kept is what the record holds of one resource.
func (c *client) kept(a *anypb.Any) *anypb.Any {
	if c.opts.DiscardResources && c.following(a.GetTypeUrl()) == nil {
		return nil
	}
	return a
}

// nodeLocked returns the node for the next request, once.
func (c *client) nodeLocked() *core.Node {
	n := c.node
	c.node = nil
	return n
}

// received records a response; apply adds its resources to the record once
// it is ACKed.
func (c *client) received(typeURL, version, nonce string, apply func(*typeState), msg proto.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.stateLocked(typeURL)
	ts.Responses++
	ts.Version, ts.Nonce = version, nonce
	ts.unanswered = append(ts.unanswered, unanswered{nonce: nonce, version: version, apply: apply})
	if c.opts.Manual {
		c.queue = append(c.queue, msg)
	}
	c.signalLocked()
}

// answeredLocked records a request that names nonce: an ACK accepts that
// response and any earlier unanswered ones of its type, a NACK rejects it.
// A nonce of no unanswered response changes nothing.
func (c *client) answeredLocked(ts *typeState, nonce string, nack bool) {
	i := slices.IndexFunc(ts.unanswered, func(u unanswered) bool { return u.nonce == nonce })
	if i < 0 {
		return
	}
	if nack {
		ts.NACKs++
		ts.NACKed = ts.unanswered[i].version
		ts.unanswered = slices.Delete(ts.unanswered, i, i+1)
		return
	}
	for _, u := range ts.unanswered[:i+1] {
		if u.apply != nil {
			u.apply(ts)
		}
	}
	ts.ACKed = ts.unanswered[i].version
	ts.unanswered = slices.Delete(ts.unanswered, 0, i+1)
}

// stream is what the receive loop needs of a SotW or Delta stream, whose
// responses are of type R.
type stream[R proto.Message] struct {
	recv func() (R, error)
	// record records a response (client.received).
	record func(R)
	// typeURL, ack, nack and follow answer it.
	typeURL func(R) string
	ack     func(R) error
	nack    func(R, string) error
	follow  func(R) error
}

// receive runs a stream's receive loop until the stream ends: each
// response is recorded, then, unless the stream is Manual, handed to
// handle (nil: none) and answered: NACKed with handle's error as the
// message when it returns one, else (after FollowCDS's or FollowLDS's
// subscription) ACKed.
func receive[R proto.Message](c *client, st stream[R], handle func(R, time.Time) error) {
	if c.opts.Manual && handle != nil {
		panic("ads: a Manual stream takes no handler")
	}
	go func() {
		for {
			resp, err := st.recv()
			if err != nil {
				c.end(err)
				return
			}
			at := time.Now()
			st.record(resp)
			if c.opts.Manual {
				continue
			}
			var rejected error
			if handle != nil {
				rejected = handle(resp, at)
			}
			// A failed send leaves the loop to the Recv that reports why
			// the stream ended.
			switch {
			case rejected != nil:
				_ = st.nack(resp, rejected.Error())
			case c.following(st.typeURL(resp)) != nil:
				if st.follow(resp) == nil {
					_ = st.ack(resp)
				}
			default:
				_ = st.ack(resp)
			}
		}
	}()
}

// end records the end of the receive loop.
func (c *client) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	close(c.done)
	c.signalLocked()
}

// ended reports whether the receive loop ended.
func (c *client) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// next returns the next queued response of a Manual stream.
func (c *client) next(timeout time.Duration) (proto.Message, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return m, nil
		}
		changed := c.changed
		c.mu.Unlock()
		if c.ended() {
			return nil, c.err
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, fmt.Errorf("%w (%s)", ErrTimeout, timeout)
		}
	}
}

// Done is closed when the receive loop ended; Err then says why.
func (c *client) Done() <-chan struct{} { return c.done }

// Err is the error that ended the receive loop (the stream's status, or
// the context's); valid once Done is closed.
func (c *client) Err() error { return c.err }

// State returns what the stream recorded of typeURL.
func (c *client) State(typeURL string) TypeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.types[typeURL]
	if ts == nil {
		return TypeState{}
	}
	st := ts.TypeState
	st.Names = slices.Clone(st.Names)
	st.Pending = len(ts.unanswered)
	return st
}

// Names returns the names of the resources of typeURL the stream accepted
// and holds, sorted.
func (c *client) Names(typeURL string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.types[typeURL]
	if ts == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(ts.held))
}

// Resources returns the resources of typeURL the stream accepted and
// holds, by name (nil values under DiscardResources).
func (c *client) Resources(typeURL string) map[string]*anypb.Any {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := c.types[typeURL]
	if ts == nil {
		return map[string]*anypb.Any{}
	}
	return maps.Clone(ts.held)
}

// Snapshot returns the resources of each of typeURLs the stream accepted
// and holds, by type URL and name, read at once: one state of the stream,
// where a Resources call per type may straddle a response.
func (c *client) Snapshot(typeURLs ...string) map[string]map[string]*anypb.Any {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]*anypb.Any, len(typeURLs))
	for _, typeURL := range typeURLs {
		out[typeURL] = map[string]*anypb.Any{}
		if ts := c.types[typeURL]; ts != nil {
			out[typeURL] = maps.Clone(ts.held)
		}
	}
	return out
}

// Wait returns nil once cond holds, checking it now and after every change
// of the stream's record. When ctx ends first it returns ctx's error, when
// the stream ends first ErrEnded (with the stream's error), each with cond's
// last error. A handler must not wait: it runs on the loop that makes the
// changes.
func (c *client) Wait(ctx context.Context, cond func() error) error {
	for {
		c.mu.Lock()
		changed := c.changed
		c.mu.Unlock()
		ended := c.ended()
		err := cond()
		if err == nil {
			return nil
		}
		if ended {
			return fmt.Errorf("%w (%v): %w", ErrEnded, c.err, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
}

// Await is Wait for a test: it fails t, naming what, unless cond holds
// within timeout.
func (c *client) Await(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.Wait(ctx, cond); err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// setNames records a subscription's explicit names.
func (ts *typeState) setNames() {
	ts.Names = slices.Sorted(maps.Keys(ts.subscribed))
}

// fullState reports whether a SotW response of typeURL is the whole set
// (Listeners, Clusters, and the non-Envoy types of MCP) rather than the
// resources that changed.
func fullState(typeURL string) bool {
	switch typeURL {
	case resourcev3.ListenerType, resourcev3.ClusterType:
		return true
	}
	return !isEnvoyType(typeURL)
}

func isEnvoyType(typeURL string) bool {
	const prefix = "type.googleapis.com/"
	return len(typeURL) > len(prefix) && typeURL[:len(prefix)] == prefix
}

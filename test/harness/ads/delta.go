package ads

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// DeltaReceipt is a Delta response as the receive loop hands it to a
// handler.
type DeltaReceipt struct {
	Resp *discovery.DeltaDiscoveryResponse
	At   time.Time // when it was received
	Size int       // encoded size
}

// Delta is one Delta (incremental) ADS stream. Its methods may be called
// from any goroutine, a handler's included.
type Delta struct {
	client
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

// OpenDelta opens a Delta ADS stream on conn; Receive starts reading it. It
// ends with ctx.
func OpenDelta(ctx context.Context, conn *grpc.ClientConn, opts Options) (*Delta, error) {
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx, opts.CallOptions...)
	if err != nil {
		return nil, fmt.Errorf("open delta ADS stream: %w", err)
	}
	return &Delta{client: newClient(opts), stream: st}, nil
}

// NewDelta opens a Delta ADS stream on conn for a test and starts its
// receive loop with handler h (nil: none; must be nil with Options.Manual).
// The stream ends with the test, which waits for its loop.
func NewDelta(t testing.TB, conn *grpc.ClientConn, opts Options, h func(DeltaReceipt) error) *Delta {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := OpenDelta(ctx, conn, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-d.done
	})
	d.Receive(h)
	return d
}

// Receive starts the receive loop. Each response is recorded, then, unless
// the stream is Manual, handed to h (nil: none) on the loop's goroutine, and
// answered: NACKed with h's error as the message when h returns one, else
// (after FollowCDS's subscription) ACKed. h may call Subscribe. The loop
// ends with the stream (Done, Err).
func (d *Delta) Receive(h func(DeltaReceipt) error) {
	var handle func(*discovery.DeltaDiscoveryResponse, time.Time) error
	if h != nil {
		handle = func(resp *discovery.DeltaDiscoveryResponse, at time.Time) error {
			return h(DeltaReceipt{Resp: resp, At: at, Size: proto.Size(resp)})
		}
	}
	receive(&d.client, stream[*discovery.DeltaDiscoveryResponse]{
		recv: d.stream.Recv,
		record: func(resp *discovery.DeltaDiscoveryResponse) {
			d.received(resp.GetTypeUrl(), resp.GetSystemVersionInfo(), resp.GetNonce(), d.applier(resp), resp)
		},
		typeURL: (*discovery.DeltaDiscoveryResponse).GetTypeUrl,
		ack:     d.ACK, nack: d.NACK, follow: d.follow,
	}, handle)
}

// applier returns what an ACK of resp does to the record.
func (d *Delta) applier(resp *discovery.DeltaDiscoveryResponse) func(*typeState) {
	if !d.keeps(resp.GetTypeUrl()) {
		return nil
	}
	return func(ts *typeState) {
		for _, r := range resp.GetResources() {
			if ts.Wildcard || ts.subscribed[r.GetName()] {
				ts.held[r.GetName()] = d.kept(r.GetResource())
				ts.versions[r.GetName()] = r.GetVersion()
			}
		}
		for _, name := range resp.GetRemovedResources() {
			delete(ts.held, name)
			delete(ts.versions, name)
		}
	}
}

// follow subscribes to the child resources (FollowCDS, FollowLDS) of the
// parents the stream holds once resp applies, and unsubscribes from the
// others.
func (d *Delta) follow(resp *discovery.DeltaDiscoveryResponse) error {
	f := d.following(resp.GetTypeUrl())
	d.mu.Lock()
	parents := d.heldLocked(resp.GetTypeUrl())
	for _, r := range resp.GetResources() {
		parents[r.GetName()] = r.GetResource()
	}
	for _, name := range resp.GetRemovedResources() {
		delete(parents, name)
	}
	want := f.childNames(slices.Collect(maps.Values(parents)))
	wanted := make(map[string]bool, len(want))
	var have map[string]bool
	if ts := d.types[f.child]; ts != nil {
		have = ts.subscribed
	}
	var sub, unsub []string
	for _, name := range want {
		wanted[name] = true
		if !have[name] {
			sub = append(sub, name)
		}
	}
	for name := range have {
		if !wanted[name] {
			unsub = append(unsub, name)
		}
	}
	d.mu.Unlock()
	if len(sub) == 0 && len(unsub) == 0 {
		return nil
	}
	slices.Sort(unsub)
	return d.Subscribe(f.child, sub, unsub)
}

// Send sends req as it is, with the stream's node if it is the first
// request and has none, and records it: its names subscribed and
// unsubscribed, and its nonce, if that of a response not answered yet, as
// the ACK or (with error_detail) NACK of that response.
func (d *Delta) Send(req *discovery.DeltaDiscoveryRequest) error {
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	d.mu.Lock()
	if node := d.nodeLocked(); node != nil && req.GetNode() == nil {
		req = proto.CloneOf(req)
		req.Node = node
	}
	ts := d.stateLocked(req.GetTypeUrl())
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if !ts.seen && len(sub) == 0 && len(unsub) == 0 {
		ts.Wildcard = true // the legacy wildcard
	}
	ts.seen = true
	for _, name := range sub {
		if name == "*" {
			ts.Wildcard = true
		} else {
			ts.subscribed[name] = true
		}
	}
	for _, name := range unsub {
		if name == "*" {
			ts.Wildcard = false
			continue
		}
		delete(ts.subscribed, name)
	}
	if len(unsub) > 0 && !ts.Wildcard {
		for name := range ts.held {
			if !ts.subscribed[name] {
				delete(ts.held, name)
				delete(ts.versions, name)
			}
		}
	}
	if len(sub) > 0 || len(unsub) > 0 {
		ts.setNames()
	}
	if nonce := req.GetResponseNonce(); nonce != "" {
		d.answeredLocked(ts, nonce, req.GetErrorDetail() != nil)
	}
	d.signalLocked()
	d.mu.Unlock()
	return d.stream.Send(req)
}

// Subscribe sends a request for typeURL that subscribes to and unsubscribes
// from names. A type's first request with no names subscribes to the
// wildcard.
func (d *Delta) Subscribe(typeURL string, subscribe, unsubscribe []string) error {
	return d.Send(&discovery.DeltaDiscoveryRequest{
		TypeUrl: typeURL, ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe,
	})
}

// ACK accepts resp.
func (d *Delta) ACK(resp *discovery.DeltaDiscoveryResponse) error {
	return d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
}

// NACK rejects resp with message (status INVALID_ARGUMENT).
func (d *Delta) NACK(resp *discovery.DeltaDiscoveryResponse, message string) error {
	return d.Send(&discovery.DeltaDiscoveryRequest{
		TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: message},
	})
}

// Next returns the next response of a Manual stream not taken yet, waiting
// up to timeout: ErrTimeout when none came, the stream's error when it
// ended (responses received before are returned first).
func (d *Delta) Next(timeout time.Duration) (*discovery.DeltaDiscoveryResponse, error) {
	if !d.opts.Manual {
		return nil, errors.New("ads: Next reads a Manual stream")
	}
	m, err := d.next(timeout)
	if err != nil {
		return nil, err
	}
	return m.(*discovery.DeltaDiscoveryResponse), nil
}

// Resume opens a Delta stream on conn that takes over from d, as a client
// that lost its stream reconnects (xDS protocol, "Reconnect"): it starts
// with d's record (the resources it holds with their versions, its
// subscriptions), and its first request of each type d subscribed to names
// the same subscription and the held resources as initial_resource_versions,
// so the server sends only what changed since and the names removed
// meanwhile. Its receive loop runs with h; d should have ended. The stream
// ends with ctx.
func (d *Delta) Resume(ctx context.Context, conn *grpc.ClientConn, h func(DeltaReceipt) error) (*Delta, error) {
	nd, err := OpenDelta(ctx, conn, d.opts)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	var first []*discovery.DeltaDiscoveryRequest
	for _, typeURL := range slices.Sorted(maps.Keys(d.types)) {
		ts := d.types[typeURL]
		if !ts.seen {
			continue
		}
		nts := nd.stateLocked(typeURL)
		nts.Wildcard, nts.seen = ts.Wildcard, true
		maps.Copy(nts.subscribed, ts.subscribed)
		maps.Copy(nts.held, ts.held)
		maps.Copy(nts.versions, ts.versions)
		nts.setNames()
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: slices.Clone(nts.Names),
			InitialResourceVersions: maps.Clone(ts.versions)}
		if ts.Wildcard {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, "*")
		}
		first = append(first, req)
	}
	d.mu.Unlock()
	nd.Receive(h)
	for _, req := range first {
		if err := nd.Send(req); err != nil {
			return nil, fmt.Errorf("resume %s: %w", req.GetTypeUrl(), err)
		}
	}
	return nd, nil
}

// Close half-closes the stream; the server then ends it. Cancelling its
// context ends it at once.
func (d *Delta) Close() { _ = d.stream.CloseSend() }

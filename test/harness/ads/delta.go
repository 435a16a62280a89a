package ads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
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
	if d.opts.Manual && h != nil {
		panic("ads: a Manual stream takes no handler")
	}
	go func() {
		for {
			resp, err := d.stream.Recv()
			if err != nil {
				d.end(err)
				return
			}
			at := time.Now()
			d.received(resp.GetTypeUrl(), resp.GetSystemVersionInfo(), resp.GetNonce(), d.applier(resp), resp)
			if d.opts.Manual {
				continue
			}
			var rejected error
			if h != nil {
				rejected = h(DeltaReceipt{Resp: resp, At: at, Size: proto.Size(resp)})
			}
			// A failed send leaves the loop to the Recv that reports why
			// the stream ended.
			switch {
			case rejected != nil:
				_ = d.NACK(resp, rejected.Error())
			case d.opts.FollowCDS && resp.GetTypeUrl() == resourcev3.ClusterType:
				if d.followCDS(resp) == nil {
					_ = d.ACK(resp)
				}
			default:
				_ = d.ACK(resp)
			}
		}
	}()
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
			}
		}
		for _, name := range resp.GetRemovedResources() {
			delete(ts.held, name)
		}
	}
}

// followCDS subscribes to the ClusterLoadAssignments of the clusters resp
// adds and unsubscribes from those it removes.
func (d *Delta) followCDS(resp *discovery.DeltaDiscoveryResponse) error {
	d.mu.Lock()
	want := make(map[string]bool)
	if ts := d.types[resourcev3.ClusterType]; ts != nil {
		for name := range ts.held {
			want[name] = true
		}
	}
	for _, r := range resp.GetResources() {
		want[r.GetName()] = true
	}
	for _, name := range resp.GetRemovedResources() {
		delete(want, name)
	}
	var have map[string]bool
	if ts := d.types[resourcev3.EndpointType]; ts != nil {
		have = ts.subscribed
	}
	var sub, unsub []string
	for name := range want {
		if !have[name] {
			sub = append(sub, name)
		}
	}
	for name := range have {
		if !want[name] {
			unsub = append(unsub, name)
		}
	}
	d.mu.Unlock()
	if len(sub) == 0 && len(unsub) == 0 {
		return nil
	}
	slices.Sort(sub)
	slices.Sort(unsub)
	return d.Subscribe(resourcev3.EndpointType, sub, unsub)
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

// Close half-closes the stream; the server then ends it. Cancelling its
// context ends it at once.
func (d *Delta) Close() { _ = d.stream.CloseSend() }

package ads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Receipt is a SotW response as the receive loop hands it to a handler.
type Receipt struct {
	Resp *discovery.DiscoveryResponse
	At   time.Time // when it was received
	Size int       // encoded size
}

// SotW is one SotW ADS stream. Its methods may be called from any
// goroutine, a handler's included.
type SotW struct {
	client
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	// sent are the names of each type's latest request, as sent: ACKs and
	// NACKs repeat them.
	sent map[string][]string
}

// OpenSotW opens a SotW ADS stream on conn; Receive starts reading it. It
// ends with ctx.
func OpenSotW(ctx context.Context, conn *grpc.ClientConn, opts Options) (*SotW, error) {
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx, opts.CallOptions...)
	if err != nil {
		return nil, fmt.Errorf("open ADS stream: %w", err)
	}
	return &SotW{client: newClient(opts), stream: st, sent: make(map[string][]string)}, nil
}

// NewSotW opens a SotW ADS stream on conn for a test and starts its receive
// loop with handler h (nil: none; must be nil with Options.Manual). The
// stream ends with the test, which waits for its loop.
func NewSotW(t testing.TB, conn *grpc.ClientConn, opts Options, h func(Receipt) error) *SotW {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := OpenSotW(ctx, conn, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	s.Receive(h)
	return s
}

// Receive starts the receive loop. Each response is recorded, then, unless
// the stream is Manual, handed to h (nil: none) on the loop's goroutine, and
// answered: NACKed with h's error as the message when h returns one, else
// (after FollowCDS's subscription) ACKed. h may call Subscribe. The loop
// ends with the stream (Done, Err).
func (s *SotW) Receive(h func(Receipt) error) {
	var handle func(*discovery.DiscoveryResponse, time.Time) error
	if h != nil {
		handle = func(resp *discovery.DiscoveryResponse, at time.Time) error {
			return h(Receipt{Resp: resp, At: at, Size: proto.Size(resp)})
		}
	}
	receive(&s.client, stream[*discovery.DiscoveryResponse]{
		recv: s.stream.Recv,
		record: func(resp *discovery.DiscoveryResponse) {
			s.received(resp.GetTypeUrl(), resp.GetVersionInfo(), resp.GetNonce(), s.applier(resp), resp)
		},
		typeURL: (*discovery.DiscoveryResponse).GetTypeUrl,
		ack:     s.ACK, nack: s.NACK, follow: s.follow,
	}, handle)
}

// applier returns what an ACK of resp does to the record.
func (s *SotW) applier(resp *discovery.DiscoveryResponse) func(*typeState) {
	typeURL := resp.GetTypeUrl()
	if !s.keeps(typeURL) {
		return nil
	}
	return func(ts *typeState) {
		if fullState(typeURL) {
			clear(ts.held)
		}
		for _, a := range resp.GetResources() {
			if name := nameOf(a); ts.Wildcard || ts.subscribed[name] || fullState(typeURL) {
				ts.held[name] = s.kept(a)
			}
		}
	}
}

// follow subscribes to the child resources of resp's (FollowCDS,
// FollowLDS) when they are not the child type's subscription already: a
// SotW response of Clusters or Listeners is the whole set.
func (s *SotW) follow(resp *discovery.DiscoveryResponse) error {
	f := s.following(resp.GetTypeUrl())
	names := f.childNames(resp.GetResources())
	if slices.Equal(s.State(f.child).Names, names) {
		return nil
	}
	return s.Subscribe(f.child, names)
}

// Send sends req as it is, with the stream's node if it is the first
// request and has none, and records it: its names as the subscription of
// its type, and its nonce, if that of a response not answered yet, as the
// ACK or (with error_detail) NACK of that response.
func (s *SotW) Send(req *discovery.DiscoveryRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.sendLocked(req)
}

// sendLocked is Send with sendMu held.
func (s *SotW) sendLocked(req *discovery.DiscoveryRequest) error {
	s.mu.Lock()
	if node := s.nodeLocked(); node != nil && req.GetNode() == nil {
		req = proto.CloneOf(req)
		req.Node = node
	}
	typeURL, names := req.GetTypeUrl(), req.GetResourceNames()
	ts := s.stateLocked(typeURL)
	if !ts.seen || !slices.Equal(s.sent[typeURL], names) {
		s.subscribeLocked(ts, typeURL, names)
	}
	if nonce := req.GetResponseNonce(); nonce != "" {
		s.answeredLocked(ts, nonce, req.GetErrorDetail() != nil)
	}
	s.signalLocked()
	s.mu.Unlock()
	return s.stream.Send(req)
}

// subscribeLocked records names as the subscription of typeURL and drops
// the resources it no longer names.
func (s *SotW) subscribeLocked(ts *typeState, typeURL string, names []string) {
	switch {
	case slices.Contains(names, "*"):
		ts.Wildcard = true
	case len(names) == 0:
		// The legacy wildcard: a first request without names. Later, no
		// names is no subscription, or the wildcard still.
		ts.Wildcard = ts.Wildcard || !ts.seen
	default:
		ts.Wildcard = false
	}
	ts.seen = true
	clear(ts.subscribed)
	for _, n := range names {
		if n != "*" {
			ts.subscribed[n] = true
		}
	}
	ts.setNames()
	if !fullState(typeURL) && !ts.Wildcard {
		for name := range ts.held {
			if !ts.subscribed[name] {
				delete(ts.held, name)
			}
		}
	}
	s.sent[typeURL] = slices.Clone(names)
}

// Subscribe sends a request for typeURL and names (none: the wildcard on
// a type's first request, else nothing); the ACKs of that type then carry
// the same names. Like Envoy's, the request quotes the version and nonce
// of the latest response of that type: go-control-plane ignores a SotW
// request whose nonce is not the one it sent last, so a changed
// subscription without it would wait for the next ACK.
func (s *SotW) Subscribe(typeURL string, names []string) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	last := s.State(typeURL)
	return s.sendLocked(&discovery.DiscoveryRequest{
		TypeUrl: typeURL, ResourceNames: names, VersionInfo: last.Version, ResponseNonce: last.Nonce,
	})
}

// ACK accepts resp, repeating the names of its type's latest request.
func (s *SotW) ACK(resp *discovery.DiscoveryResponse) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	names := s.sent[resp.GetTypeUrl()]
	s.mu.Unlock()
	return s.sendLocked(&discovery.DiscoveryRequest{
		TypeUrl: resp.GetTypeUrl(), ResourceNames: names, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
	})
}

// NACK rejects resp with message (status INVALID_ARGUMENT), quoting the
// version last ACKed of its type, as Envoy does, and the names of its
// type's latest request.
func (s *SotW) NACK(resp *discovery.DiscoveryResponse, message string) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	names := s.sent[resp.GetTypeUrl()]
	s.mu.Unlock()
	return s.sendLocked(&discovery.DiscoveryRequest{
		TypeUrl: resp.GetTypeUrl(), ResourceNames: names, VersionInfo: s.State(resp.GetTypeUrl()).ACKed,
		ResponseNonce: resp.GetNonce(), ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: message},
	})
}

// Next returns the next response of a Manual stream not taken yet, waiting
// up to timeout: ErrTimeout when none came, the stream's error when it
// ended (responses received before are returned first).
func (s *SotW) Next(timeout time.Duration) (*discovery.DiscoveryResponse, error) {
	if !s.opts.Manual {
		return nil, errors.New("ads: Next reads a Manual stream")
	}
	m, err := s.next(timeout)
	if err != nil {
		return nil, err
	}
	return m.(*discovery.DiscoveryResponse), nil
}

// Close half-closes the stream; the server then ends it. Cancelling its
// context ends it at once.
func (s *SotW) Close() { _ = s.stream.CloseSend() }

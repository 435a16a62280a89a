package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// StreamsPerConn is how many ADS streams the benchmarks open on one client
// connection.
const StreamsPerConn = 100

// Dial opens a plaintext gRPC connection to the xDS server. Many ADS
// streams share one connection, each with its own node ID.
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
}

// Receipt is what a SotW stream's receive loop reports of one response.
type Receipt struct {
	Resp *discovery.DiscoveryResponse
	At   time.Time
	Size int // encoded size
}

// SotW is one SotW ADS stream. Its first request carries the node; its
// receive loop (Receive) ACKs every response with the names subscribed to
// for that type at the time.
type SotW struct {
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	done   chan struct{}
	err    error // why the receive loop ended; read after done

	mu    sync.Mutex
	node  *core.Node          // sent with the first request, then nil
	names map[string][]string // type URL → subscribed names
	last  map[string]received // type URL → the latest response's version and nonce
}

// received is what a request quotes of the latest response of its type.
type received struct{ version, nonce string }

// OpenSotW opens a SotW ADS stream on conn for node; Receive starts reading
// it.
func OpenSotW(ctx context.Context, conn *grpc.ClientConn, node *core.Node) (*SotW, error) {
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("open ADS stream: %w", err)
	}
	return &SotW{stream: st, node: node, names: make(map[string][]string), last: make(map[string]received),
		done: make(chan struct{})}, nil
}

// Subscribe sends a request for typeURL and names (empty: wildcard); the
// next ACKs of that type carry the same names. Like Envoy's, the request
// quotes the version and nonce of the latest response of that type:
// go-control-plane ignores a SotW request whose nonce is not the one it
// sent last, so a changed subscription without it would wait for the next
// ACK.
func (s *SotW) Subscribe(typeURL string, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.last[typeURL]
	return s.sendLocked(&discovery.DiscoveryRequest{
		TypeUrl: typeURL, ResourceNames: names, VersionInfo: last.version, ResponseNonce: last.nonce,
	}, names)
}

func (s *SotW) sendLocked(req *discovery.DiscoveryRequest, names []string) error {
	if s.node != nil {
		req.Node = s.node
		s.node = nil
	}
	s.names[req.TypeUrl] = names
	return s.stream.Send(req)
}

// Receive starts the receive loop: each response goes to onResponse (nil:
// none), on the loop's goroutine, which may call Subscribe; then it is
// ACKed. The loop ends with the stream (Done, Err).
func (s *SotW) Receive(onResponse func(Receipt)) {
	go func() {
		defer close(s.done)
		for {
			resp, err := s.stream.Recv()
			if err != nil {
				s.err = err
				return
			}
			at := time.Now()
			s.mu.Lock()
			s.last[resp.TypeUrl] = received{resp.VersionInfo, resp.Nonce}
			s.mu.Unlock()
			if onResponse != nil {
				onResponse(Receipt{Resp: resp, At: at, Size: proto.Size(resp)})
			}
			s.mu.Lock()
			names := s.names[resp.TypeUrl]
			err = s.sendLocked(&discovery.DiscoveryRequest{
				TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce, ResourceNames: names,
			}, names)
			s.mu.Unlock()
			if err != nil {
				s.err = err
				return
			}
		}
	}()
}

// Done is closed when the receive loop ended; Err then says why.
func (s *SotW) Done() <-chan struct{} { return s.done }

// Err is the error that ended the receive loop; valid once Done is closed.
func (s *SotW) Err() error { return s.err }

// Close half-closes the stream; cancelling its context ends it.
func (s *SotW) Close() { _ = s.stream.CloseSend() }

// DeltaReceipt is what a Delta stream's receive loop reports of one
// response.
type DeltaReceipt struct {
	Resp *discovery.DeltaDiscoveryResponse
	At   time.Time
	Size int // encoded size
}

// Delta is one Delta (incremental) ADS stream. Its first request carries
// the node; its receive loop (Receive) ACKs every response by nonce.
type Delta struct {
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	done   chan struct{}
	err    error // why the receive loop ended; read after done

	mu   sync.Mutex
	node *core.Node // sent with the first request, then nil
}

// OpenDelta opens a Delta ADS stream on conn for node; Receive starts
// reading it.
func OpenDelta(ctx context.Context, conn *grpc.ClientConn, node *core.Node) (*Delta, error) {
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("open delta ADS stream: %w", err)
	}
	return &Delta{stream: st, node: node, done: make(chan struct{})}, nil
}

// Subscribe sends a request for typeURL that subscribes to and unsubscribes
// from names. The first request of a type with no names subscribes to the
// wildcard.
func (d *Delta) Subscribe(typeURL string, subscribe, unsubscribe []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sendLocked(&discovery.DeltaDiscoveryRequest{
		TypeUrl: typeURL, ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe,
	})
}

func (d *Delta) sendLocked(req *discovery.DeltaDiscoveryRequest) error {
	if d.node != nil {
		req.Node = d.node
		d.node = nil
	}
	return d.stream.Send(req)
}

// Receive starts the receive loop: each response goes to onResponse (nil:
// none), on the loop's goroutine, which may call Subscribe; then it is
// ACKed. The loop ends with the stream (Done, Err).
func (d *Delta) Receive(onResponse func(DeltaReceipt)) {
	go func() {
		defer close(d.done)
		for {
			resp, err := d.stream.Recv()
			if err != nil {
				d.err = err
				return
			}
			if onResponse != nil {
				onResponse(DeltaReceipt{Resp: resp, At: time.Now(), Size: proto.Size(resp)})
			}
			d.mu.Lock()
			err = d.sendLocked(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce})
			d.mu.Unlock()
			if err != nil {
				d.err = err
				return
			}
		}
	}()
}

// Done is closed when the receive loop ended; Err then says why.
func (d *Delta) Done() <-chan struct{} { return d.done }

// Err is the error that ended the receive loop; valid once Done is closed.
func (d *Delta) Err() error { return d.err }

// Close half-closes the stream; cancelling its context ends it.
func (d *Delta) Close() { _ = d.stream.CloseSend() }

// ResourceName reads field 1 of an encoded Cluster or
// ClusterLoadAssignment (name, cluster_name) without unmarshalling the rest.
func ResourceName(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ""
			}
			return string(v)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

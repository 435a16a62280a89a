package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// dial opens a plaintext gRPC connection to the xDS server. Many ADS
// streams share one connection, each with its own node ID.
func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
}

// receipt is what a stream's receive loop reports of one response.
type receipt struct {
	resp *discovery.DiscoveryResponse
	at   time.Time
	size int
}

// adsStream is one SotW ADS stream: it sends the first request with its
// node, ACKs every response with the same names, and reports each response
// to onResponse (called on the stream's receive goroutine).
type adsStream struct {
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *core.Node

	mu    sync.Mutex
	names map[string][]string // type URL → subscribed names

	// Counters for the fan-out scenario, reset between rounds.
	count atomic.Int64 // responses received
	bytes atomic.Int64 // their encoded size
	last  atomic.Int64 // UnixNano of the last receive
	first atomic.Int64 // UnixNano of the first receive
	other atomic.Int64 // resources other than the stream's own
}

// openStream opens an ADS stream on conn for node and starts its receive
// loop; onResponse may be nil.
func openStream(ctx context.Context, conn *grpc.ClientConn, node string, onResponse func(*adsStream, receipt)) (*adsStream, error) {
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("open ADS stream: %w", err)
	}
	s := &adsStream{stream: st, node: &core.Node{Id: node, Cluster: "bench"}, names: make(map[string][]string)}
	go s.receive(onResponse)
	return s, nil
}

// subscribe sends a request for typeURL and names (empty: wildcard).
func (s *adsStream) subscribe(typeURL string, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sendLocked(&discovery.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names}, names)
}

func (s *adsStream) sendLocked(req *discovery.DiscoveryRequest, names []string) error {
	if s.node != nil {
		req.Node = s.node
		s.node = nil
	}
	s.names[req.TypeUrl] = names
	return s.stream.Send(req)
}

func (s *adsStream) receive(onResponse func(*adsStream, receipt)) {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			return
		}
		r := receipt{resp: resp, at: time.Now(), size: proto.Size(resp)}
		if onResponse != nil {
			onResponse(s, r)
		}
		s.mu.Lock()
		names := s.names[resp.TypeUrl]
		err = s.sendLocked(&discovery.DiscoveryRequest{
			TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce, ResourceNames: names,
		}, names)
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// close ends the stream.
func (s *adsStream) close() { _ = s.stream.CloseSend() }

// record adds r to the fan-out counters; own is the stream's CLA name.
func (s *adsStream) record(r receipt, own string) {
	if s.count.Add(1) == 1 {
		s.first.Store(r.at.UnixNano())
	}
	s.bytes.Add(int64(r.size))
	s.last.Store(r.at.UnixNano())
	for _, res := range r.resp.Resources {
		if name := resourceName(res.GetValue()); name != own {
			s.other.Add(1)
		}
	}
}

// reset zeroes the fan-out counters.
func (s *adsStream) reset() {
	s.count.Store(0)
	s.bytes.Store(0)
	s.last.Store(0)
	s.first.Store(0)
	s.other.Store(0)
}

// resourceName reads field 1 of an encoded Cluster or
// ClusterLoadAssignment (name, cluster_name) without unmarshalling the rest.
func resourceName(b []byte) string {
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

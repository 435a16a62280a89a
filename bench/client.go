package main

import (
	"context"
	"sync/atomic"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// adsStream is one SotW ADS stream (ads.SotW: node on the first request,
// every response ACKed with the same names, versions and nonces recorded
// but not resources) with the fan-out scenario's counters.
type adsStream struct {
	*ads.SotW

	// Counters for the fan-out scenario, reset between rounds.
	count atomic.Int64 // responses received
	bytes atomic.Int64 // their encoded size
	last  atomic.Int64 // UnixNano of the last receive
	first atomic.Int64 // UnixNano of the first receive
	other atomic.Int64 // resources other than the stream's own
}

// openStream opens an ADS stream on conn for node and starts its receive
// loop, which reports each response to onResponse (may be nil) before
// ACKing it.
func openStream(ctx context.Context, conn *grpc.ClientConn, node string, onResponse func(*adsStream, ads.Receipt)) (*adsStream, error) {
	st, err := ads.OpenSotW(ctx, conn, ads.Options{Node: &core.Node{Id: node, Cluster: "bench"}, DiscardResources: true})
	if err != nil {
		return nil, err
	}
	s := &adsStream{SotW: st}
	st.Receive(func(r ads.Receipt) error {
		if onResponse != nil {
			onResponse(s, r)
		}
		return nil
	})
	return s, nil
}

// subscribe sends a request for typeURL and names (empty: wildcard).
func (s *adsStream) subscribe(typeURL string, names []string) error {
	return s.Subscribe(typeURL, names)
}

// close ends the stream.
func (s *adsStream) close() { s.Close() }

// record adds r to the fan-out counters; own is the stream's CLA name.
func (s *adsStream) record(r ads.Receipt, own string) {
	if s.count.Add(1) == 1 {
		s.first.Store(r.At.UnixNano())
	}
	s.bytes.Add(int64(r.Size))
	s.last.Store(r.At.UnixNano())
	for _, res := range r.Resp.Resources {
		if name := ads.ResourceName(res.GetValue()); name != own {
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

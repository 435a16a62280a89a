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
// but not resources) with a response counter for its handler to use.
type adsStream struct {
	*ads.SotW
	count atomic.Int64
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

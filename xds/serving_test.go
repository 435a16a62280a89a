package xds

import (
	"io"
	"log/slog"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// Unit tests of the serving pieces: ACK tracking (rule 11) and stream
// metrics. Marshal once (rule 10) is xds/cache's
// TestEachResourceVersionIsMarshalledOnce.

func TestCallbacksTrackACKsAndCountStreams(t *testing.T) {
	c := newCallbacks(slog.New(slog.NewTextHandler(io.Discard, nil)), listenerXDS, nil)
	key := streamKey{id: 1_000_000, delta: true}
	streamsBefore := testutil.ToFloat64(xdsStreams.WithLabelValues(modeDelta))
	st := c.opened(t.Context(), key)
	if got := testutil.ToFloat64(xdsStreams.WithLabelValues(modeDelta)) - streamsBefore; got != 1 {
		t.Errorf("delta streams rose by %v, want 1", got)
	}
	typ := resourcev3.EndpointType
	c.request(key, st, grpcNode(), typ, "", nil, requestedNames{})
	c.response(key, st, typ, "1", "v1", 10, time.Now())
	c.request(key, st, nil, typ, "1", nil, requestedNames{})
	c.response(key, st, typ, "2", "v2", 10, time.Now())
	if got := c.ackedVersion(key, typ); got != "v1" {
		t.Errorf("acked %q while v2 is un-ACKed, want v1", got)
	}
	c.request(key, st, nil, typ, "2", &status.Status{Message: "rejected"}, requestedNames{})
	if got := c.ackedVersion(key, typ); got != "v1" {
		t.Errorf("acked %q after v2's NACK, want v1", got)
	}
	c.response(key, st, typ, "3", "v3", 10, time.Now())
	c.request(key, st, nil, typ, "3", nil, requestedNames{})
	if got := c.ackedVersion(key, typ); got != "v3" {
		t.Errorf("acked %q, want v3", got)
	}
	c.closed(key)
	if got := testutil.ToFloat64(xdsStreams.WithLabelValues(modeDelta)) - streamsBefore; got != 0 {
		t.Errorf("delta streams off by %v after close, want 0", got)
	}
}

func TestResponsesAreCountedWithTheirBytes(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())
	typ := resourcev3.ClusterType
	pushes := func() float64 { return tallied(t, metricStreamPushes, typ) }
	bytes := func() float64 { return tallied(t, metricPushBytes, typ) }
	pushesBefore, bytesBefore := pushes(), bytes()

	sotw := openSotW(t, conn)
	sotw.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: typ})
	a := sotw.next(t)
	delta := openDelta(t, conn)
	delta.send(&discovery.DeltaDiscoveryRequest{Node: envoyNode(), TypeUrl: typ})
	b := delta.next(t)

	if got := pushes() - pushesBefore; got != 2 {
		t.Errorf("CDS responses rose by %v, want 2", got)
	}
	// Sizes are of the messages, so the client's copies measure the same.
	if got, want := bytes()-bytesBefore, float64(proto.Size(a)+proto.Size(b)); got != want {
		t.Errorf("CDS bytes rose by %v, want %v", got, want)
	}
}

// tallied returns the value of responses' counter name (metricStreamPushes
// or metricPushBytes) of type label, as a registry that checks its
// collectors (Describe against Collect) gathers it.
func tallied(t *testing.T, name, label string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(responses)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{type_url=%q}", name, label)
	return 0
}

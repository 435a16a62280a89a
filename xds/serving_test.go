package xds

import (
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// Unit tests of the serving pieces: send bound (rule 12), ACK tracking
// (rule 11) and stream metrics. Marshal once (rule 10) is xds/cache's
// TestEachResourceVersionIsMarshalledOnce.

func TestSendLimiter(t *testing.T) {
	t.Run("no more sends at once than slots", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newSendLimiter(2, time.Second)
			var running, peak atomic.Int32
			release := make(chan struct{})
			for range 5 {
				go func() {
					_ = l.sender(nil).do(func() error {
						peak.Store(max(peak.Load(), running.Add(1)))
						<-release
						running.Add(-1)
						return nil
					})
				}()
			}
			synctest.Wait()
			if got := running.Load(); got != 2 {
				t.Errorf("%d sends running, want 2", got)
			}
			close(release)
			synctest.Wait()
			if got := peak.Load(); got != 2 {
				t.Errorf("peak of %d sends at once, want 2", got)
			}
		})
	})
	t.Run("a send blocked past slowAfter frees its slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newSendLimiter(1, 50*time.Millisecond)
			stuck := make(chan struct{})
			go func() { _ = l.sender(nil).do(func() error { <-stuck; return nil }) }()
			synctest.Wait()
			start := time.Now()
			if err := l.sender(nil).do(func() error { return nil }); err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(start); waited != 50*time.Millisecond {
				t.Errorf("second send waited %v, want 50ms", waited)
			}
			close(stuck)
		})
	})
	t.Run("each send of a stream holds its own slot for up to slowAfter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newSendLimiter(1, 50*time.Millisecond)
			s := l.sender(nil)
			// Slow: its timer gives the slot back at 50ms, and is not armed again.
			if err := s.do(func() error { time.Sleep(60 * time.Millisecond); return nil }); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				// A quick send stops its timer; the blocked send after it
				// arms the same timer again.
				if err := s.do(func() error { return nil }); err != nil {
					t.Fatal(err)
				}
				release := make(chan struct{})
				go func() { _ = s.do(func() error { <-release; return nil }) }()
				synctest.Wait()
				start := time.Now()
				if err := l.sender(nil).do(func() error { return nil }); err != nil {
					t.Fatal(err)
				}
				if waited := time.Since(start); waited != 50*time.Millisecond {
					t.Errorf("another stream's send waited %v, want 50ms", waited)
				}
				close(release)
				synctest.Wait()
			}
			if got := len(l.slots); got != 0 {
				t.Errorf("%d slots held after every send ended, want 0", got)
			}
		})
	})
	t.Run("a stream that ends while waiting gives up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newSendLimiter(1, time.Hour)
			stuck := make(chan struct{})
			go func() { _ = l.sender(nil).do(func() error { <-stuck; return nil }) }()
			synctest.Wait()
			done := make(chan struct{})
			close(done)
			if err := l.sender(done).do(func() error { return nil }); !errors.Is(err, errStreamDone) {
				t.Errorf("err = %v, want errStreamDone", err)
			}
			close(stuck)
		})
	})
}

func TestCallbacksTrackACKsAndCountStreams(t *testing.T) {
	c := newCallbacks(slog.New(slog.NewTextHandler(io.Discard, nil)), listenerXDS, nil)
	key := streamKey{id: 1_000_000, delta: true}
	streamsBefore := testutil.ToFloat64(xdsStreams.WithLabelValues(modeDelta))
	c.opened(t.Context(), key)
	if got := testutil.ToFloat64(xdsStreams.WithLabelValues(modeDelta)) - streamsBefore; got != 1 {
		t.Errorf("delta streams rose by %v, want 1", got)
	}
	typ := resourcev3.EndpointType
	c.request(key, grpcNode(), typ, "", nil, requestedNames{})
	c.response(key, typ, "1", "v1", 10)
	c.request(key, nil, typ, "1", nil, requestedNames{})
	c.response(key, typ, "2", "v2", 10)
	if got := c.ackedVersion(key, typ); got != "v1" {
		t.Errorf("acked %q while v2 is un-ACKed, want v1", got)
	}
	c.request(key, nil, typ, "2", &status.Status{Message: "rejected"}, requestedNames{})
	if got := c.ackedVersion(key, typ); got != "v1" {
		t.Errorf("acked %q after v2's NACK, want v1", got)
	}
	c.response(key, typ, "3", "v3", 10)
	c.request(key, nil, typ, "3", nil, requestedNames{})
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
	pushes := func() float64 { return testutil.ToFloat64(streamPushesTotal.WithLabelValues(typ)) }
	bytes := func() float64 { return testutil.ToFloat64(pushBytesTotal.WithLabelValues(typ)) }
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

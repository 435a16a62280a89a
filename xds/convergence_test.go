package xds

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/test/harness"
)

func TestCovers(t *testing.T) {
	named := func(names ...string) stream.Subscription { return stream.NewSotwSubscription(names, false) }
	upd := func(names ...string) map[string]types.Resource {
		m := map[string]types.Resource{}
		for _, n := range names {
			m[n] = nil
		}
		return m
	}
	tests := map[string]struct {
		sub          stream.Subscription
		toldRemovals bool
		update       map[string]types.Resource
		remove       []string
		want         bool
	}{
		"a subscribed name updated":                  {sub: named("a", "b"), update: upd("b"), want: true},
		"only other names updated":                   {sub: named("a"), update: upd("b", "c"), want: false},
		"more names updated than subscribed":         {sub: named("c"), update: upd("a", "b", "c"), want: true},
		"wildcard hears every update":                {sub: stream.NewSotwSubscription(nil, true), update: upd("x"), want: true},
		"a removal where removals are told":          {sub: named("a"), toldRemovals: true, remove: []string{"a"}, want: true},
		"a removal where they are not (SotW EDS)":    {sub: named("a"), remove: []string{"a"}, want: false},
		"wildcard and a removal where told":          {sub: stream.NewSotwSubscription([]string{"*"}, false), toldRemovals: true, remove: []string{"z"}, want: true},
		"wildcard and a removal where not told":      {sub: stream.NewSotwSubscription([]string{"*"}, false), remove: []string{"z"}, want: false},
		"no legacy wildcard: empty subscribes none":  {sub: stream.NewSotwSubscription(nil, false), update: upd("a"), want: false},
		"Delta wildcard by explicit subscription":    {sub: stream.NewDeltaSubscription([]string{"*"}, nil, nil, false), update: upd("a"), want: true},
		"Delta names after an unsubscription":        {sub: deltaSub([]string{"a", "b"}, []string{"a"}), update: upd("a"), want: false},
		"Delta names after an unsubscription, other": {sub: deltaSub([]string{"a", "b"}, []string{"a"}), update: upd("b"), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := covers(tc.sub, tc.toldRemovals, newUpdateSet(tc.update), tc.remove); got != tc.want {
				t.Errorf("covers = %v, want %v", got, tc.want)
			}
		})
	}
}

func deltaSub(subscribe, unsubscribe []string) stream.Subscription {
	s := stream.NewDeltaSubscription(subscribe, nil, nil, false)
	s.UpdateResourceSubscriptions(nil, unsubscribe)
	return s
}

// convHarness drives one listener's callbacks and a convergence tracker by
// hand, as go-control-plane and a push would, recording the samples.
type convHarness struct {
	t    *testing.T
	cb   *callbacks
	conv *convergence

	mu      sync.Mutex
	samples []string // stage names, in order
	start   time.Time
	short   []string // stages measured below a second, which start rules out
}

func newConvHarness(t *testing.T) *convHarness {
	h := &convHarness{t: t, cb: newCallbacks(slog.New(slog.NewTextHandler(io.Discard, nil)), listenerXDS, nil)}
	h.conv = newConvergence(h.cb)
	h.conv.observe = func(stage string, d time.Duration) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.samples = append(h.samples, stage)
		if d < time.Second {
			h.short = append(h.short, stage)
		}
	}
	return h
}

// open opens a stream whose first request subscribes to typeURL (SotW:
// names; Delta: subscribe), answered with version "1" and ACKed.
func (h *convHarness) open(key streamKey, grpc bool, typeURL string, names ...string) {
	node := envoyNode()
	if grpc {
		node = grpcNode()
	}
	st := h.cb.opened(h.t.Context(), key)
	rn := requestedNames{names: names}
	if key.delta {
		rn = requestedNames{subscribe: names}
	}
	h.cb.request(key, st, node, typeURL, "", nil, rn)
	h.respond(key, typeURL, "1")
	h.ack(key, typeURL, "1", names...)
}

func nonceOf(key streamKey, version string) string { return key.mode() + version }

func (h *convHarness) respond(key streamKey, typeURL, version string) {
	h.cb.response(key, h.cb.state(key), typeURL, nonceOf(key, version), version, 0, time.Now())
}

func (h *convHarness) ack(key streamKey, typeURL, version string, names ...string) {
	h.cb.request(key, h.cb.state(key), nil, typeURL, nonceOf(key, version), nil, requestedNames{names: names})
}

func (h *convHarness) nack(key streamKey, typeURL, version string, names ...string) {
	h.cb.request(key, h.cb.state(key), nil, typeURL, nonceOf(key, version), &status.Status{Message: "rejected"},
		requestedNames{names: names})
}

// push follows a push observed a second ago that updates names of typeURL
// from version 1 and removes remove.
func (h *convHarness) push(typeURL string, update []string, remove ...string) {
	h.start = time.Now().Add(-time.Second)
	p := h.conv.begin(h.start, time.Now())
	m := map[string]types.Resource{}
	for _, n := range update {
		m[n] = nil
	}
	h.conv.expect(p, typeURL, 1, m, remove)
	h.conv.seal(p)
}

func (h *convHarness) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.short) > 0 {
		h.t.Errorf("stages %v measured under the second since the observation", h.short)
	}
	return slices.Clone(h.samples)
}

func TestConvergenceFollowsAPush(t *testing.T) {
	eds, cds, lds := resourcev3.EndpointType, resourcev3.ClusterType, resourcev3.ListenerType
	s1, s2, d3 := streamKey{id: 1}, streamKey{id: 2}, streamKey{id: 3, delta: true}
	tests := map[string]struct {
		run  func(h *convHarness)
		want []string
	}{
		"push at the first response, ack at the last subscribed stream's ACK": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "a")
				h.open(d3, false, eds, "a", "b")
				h.open(s2, true, eds, "b") // not subscribed to a: not waited for
				h.push(eds, []string{"a"})
				h.respond(s1, eds, "2")
				h.ack(s1, eds, "2", "a")
				if got := h.got(); !slices.Equal(got, []string{"push"}) {
					t.Errorf("after one of two ACKs: %v, want [push]", got)
				}
				h.respond(d3, eds, "2")
				h.ack(d3, eds, "2")
			},
			want: []string{"push", "ack"},
		},
		"an ACK of a version from before the push settles nothing": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "a")
				h.respond(s1, eds, "1") // in flight while the push happens
				h.push(eds, []string{"a"})
				h.ack(s1, eds, "1", "a")
				if got := h.got(); len(got) != 0 {
					t.Errorf("after the ACK of version 1: %v, want none", got)
				}
				h.respond(s1, eds, "2")
				h.ack(s1, eds, "2", "a")
			},
			want: []string{"push", "ack"},
		},
		"a NACK ends the wait, without an ack sample": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "a")
				h.push(eds, []string{"a"})
				h.respond(s1, eds, "2")
				h.nack(s1, eds, "2", "a")
			},
			want: []string{"push"},
		},
		"a closed stream ends its wait": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "a")
				h.open(s2, true, eds, "a")
				h.push(eds, []string{"a"})
				h.respond(s1, eds, "2")
				h.ack(s1, eds, "2", "a")
				h.cb.closed(s2)
			},
			want: []string{"push", "ack"},
		},
		"a push nobody subscribes to gives no sample": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "b")
				h.push(eds, []string{"a"})
				h.respond(s1, eds, "2")
				h.ack(s1, eds, "2", "b")
			},
		},
		"a CDS removal reaches a wildcard SotW stream": {
			run: func(h *convHarness) {
				h.open(s1, false, cds) // legacy wildcard
				h.push(cds, nil, "gone")
				h.respond(s1, cds, "2")
				h.ack(s1, cds, "2")
			},
			want: []string{"push", "ack"},
		},
		"an EDS removal does not reach a SotW stream, but a Delta one": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "a")
				h.open(d3, true, eds, "a")
				h.push(eds, nil, "a")
				h.respond(d3, eds, "2")
				h.ack(d3, eds, "2")
			},
			want: []string{"push", "ack"},
		},
		"an Envoy stream is not waited for on LDS": {
			run: func(h *convHarness) {
				h.open(s1, false, lds, "a.local:80")
				h.push(lds, []string{"a.local:80"})
			},
		},
		"a stale-nonce SotW request leaves the subscription": {
			run: func(h *convHarness) {
				h.open(s1, true, eds, "a")
				h.respond(s1, eds, "1b")
				// Quotes the nonce of version 1, not 1b's: go-control-plane
				// ignores it, so s1 still watches a.
				h.ack(s1, eds, "1", "b")
				h.push(eds, []string{"a"})
				h.respond(s1, eds, "2")
				h.ack(s1, eds, "2", "a")
			},
			want: []string{"push", "ack"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newConvHarness(t)
			tc.run(h)
			if got := h.got(); !slices.Equal(got, tc.want) {
				t.Errorf("samples %v, want %v", got, tc.want)
			}
			h.conv.mu.Lock()
			defer h.conv.mu.Unlock()
			if tc.want != nil && len(h.conv.followed) != 0 {
				t.Errorf("%d pushes still followed", len(h.conv.followed))
			}
		})
	}
}

func TestConvergenceFollowsAtMostEightPushes(t *testing.T) {
	h := newConvHarness(t)
	now := time.Now()
	for i := range maxFollowed {
		if h.conv.begin(now, now) == nil {
			t.Fatalf("push %d not followed", i+1)
		}
	}
	if h.conv.begin(now, now) != nil {
		t.Fatalf("a push past %d followed", maxFollowed)
	}
	if h.conv.begin(now, now.Add(followFor)) == nil {
		t.Fatalf("a push not followed after the others were given up")
	}
	h.conv.mu.Lock()
	if n := len(h.conv.followed); n != 1 {
		t.Errorf("%d pushes followed, want 1", n)
	}
	h.conv.mu.Unlock()
	if h.conv.begin(time.Time{}, now) != nil {
		t.Errorf("a push without a start is followed")
	}
}

// TestConvergenceOverADS follows a push observed a second before it to a
// SotW and a Delta stream and checks the stages and /debug/syncz's view of
// the streams, a NACKing one included.
func TestConvergenceOverADS(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	var (
		mu     sync.Mutex
		stages = map[string][]time.Duration{}
	)
	ts.conv.mu.Lock()
	ts.conv.observe = func(stage string, d time.Duration) {
		mu.Lock()
		stages[stage] = append(stages[stage], d)
		mu.Unlock()
	}
	ts.conv.mu.Unlock()
	conn := rawClient(t, ts.Addr().String())

	sotw := openSotW(t, conn)
	sotw.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{clusterA}})
	sotwEDS := sotw.next(t)
	sotw.ack(sotwEDS, clusterA)
	sotw.send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	sotw.ack(sotw.next(t))

	delta := openDelta(t, conn)
	delta.send(&discovery.DeltaDiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, clusterB}})
	delta.ack(delta.next(t))

	nacker := openSotW(t, conn)
	nackNode := envoyNode()
	nackNode.Id = "nacker"
	nacker.send(&discovery.DiscoveryRequest{Node: nackNode, TypeUrl: resourcev3.ClusterType})
	rejected := nacker.next(t)
	nacker.send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: rejected.GetNonce(),
		ErrorDetail: &status.Status{Code: 3, Message: "cluster rejected by test"}})

	observed := time.Now().Add(-time.Second)
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, "")}, observed)
	ts.waitPushes(t, 1)
	sotwEDS = sotw.next(t)
	sotw.ack(sotwEDS, clusterA)
	deltaEDS := delta.next(t)
	delta.ack(deltaEDS)

	harness.EventuallyTrue(t, wait, "push and ack samples", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(stages[serviceentry.StagePush]) == 1 && len(stages[serviceentry.StageAck]) == 1
	})
	mu.Lock()
	push, ack := stages[serviceentry.StagePush][0], stages[serviceentry.StageAck][0]
	mu.Unlock()
	if push < time.Second || ack < push || ack > time.Second+wait {
		t.Errorf("push %v, ack %v: want a second ≤ push ≤ ack", push, ack)
	}

	var st SyncStatus
	harness.Eventually(t, wait, "every stream ACKed what it was sent", func() error {
		st = ts.SyncStatus()
		for _, s := range st.Streams {
			for _, ty := range s.Types {
				if ty.NACK == nil && (ty.Pending || ty.Acked != ty.Sent) {
					return fmt.Errorf("%s %s %s: sent %s, acked %s", s.Node, s.Mode, ty.TypeURL, ty.Sent, ty.Acked)
				}
			}
		}
		return nil
	})
	type row struct{ Node, Mode, Client, TypeURL, Sent, Acked, NACK string }
	var got []row
	for _, s := range st.Streams {
		if s.Listener != listenerXDS || s.Peer == "" || s.Connected.IsZero() {
			t.Errorf("stream %+v: want listener xds, its peer and connection time", s)
		}
		for _, ty := range s.Types {
			r := row{s.Node, s.Mode, s.Client, ty.TypeURL, ty.Sent, ty.Acked, ""}
			if ty.NACK != nil {
				r.NACK = ty.NACK.Version + " " + ty.NACK.Message
			}
			got = append(got, r)
		}
	}
	want := []row{
		{"envoy-1", modeDelta, "envoy", resourcev3.EndpointType, deltaEDS.GetSystemVersionInfo(), deltaEDS.GetSystemVersionInfo(), ""},
		{"grpc-1", modeSotW, "grpc", resourcev3.ClusterType, "", "", ""},
		{"grpc-1", modeSotW, "grpc", resourcev3.EndpointType, sotwEDS.GetVersionInfo(), sotwEDS.GetVersionInfo(), ""},
		{"nacker", modeSotW, "envoy", resourcev3.ClusterType, rejected.GetVersionInfo(), "", rejected.GetVersionInfo() + " cluster rejected by test"},
	}
	// The grpc stream's CDS versions are whatever the cache had.
	for i := range got {
		if got[i].Node == "grpc-1" && got[i].TypeURL == resourcev3.ClusterType {
			if got[i].Sent == "" || got[i].Sent != got[i].Acked {
				t.Errorf("grpc-1 CDS: sent %q, acked %q", got[i].Sent, got[i].Acked)
			}
			got[i].Sent, got[i].Acked = "", ""
		}
	}
	assertEqual(t, want, got)
}

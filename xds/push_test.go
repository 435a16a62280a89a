package xds

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
)

func TestPushHandsOnlyChangedResources(t *testing.T) {
	a, b := grpcService("a.local", 80), grpcService("b.local", 80)
	keyA := map[model.ConfigKey]struct{}{model.ServiceKey("mesh", "a.local"): {}}
	tests := map[string]struct {
		services  []*model.Service // after the first full push of a and b
		endpoints []*model.Endpoint
		req       *model.PushRequest
		want      int // resources handed to the caches
		// wantServices is the number of services the push generated from.
		wantServices int
	}{
		"full push with nothing changed hands nothing": {
			services:     []*model.Service{a, b},
			req:          &model.PushRequest{Full: true},
			wantServices: 2,
		},
		"EDS push with unchanged endpoints hands nothing": {
			services:     []*model.Service{a, b},
			req:          &model.PushRequest{ConfigsUpdated: keyA},
			wantServices: 1,
		},
		"EDS push hands only the changed assignment": {
			services:     []*model.Service{a, b},
			endpoints:    []*model.Endpoint{ep("10.0.0.1", 80, "")},
			req:          &model.PushRequest{ConfigsUpdated: keyA},
			want:         1,
			wantServices: 1,
		},
		"EDS push for everything regenerates every service": {
			services:     []*model.Service{a, b},
			endpoints:    []*model.Endpoint{ep("10.0.0.1", 80, "")},
			req:          &model.PushRequest{},
			want:         1,
			wantServices: 2,
		},
		"full push removes a vanished service's cluster, listener, route and assignment": {
			services:     []*model.Service{b},
			req:          &model.PushRequest{Full: true},
			want:         4,
			wantServices: 1,
		},
		"full push adds a new service's cluster, listener, route and assignment": {
			services:     []*model.Service{a, b, grpcService("c.local", 80)},
			req:          &model.PushRequest{Full: true, ConfigsUpdated: map[model.ConfigKey]struct{}{model.ServiceKey("mesh", "c.local"): {}}},
			want:         4,
			wantServices: 3,
		},
		"full push for listed services leaves other assignments alone": {
			services:     []*model.Service{a, b},
			endpoints:    []*model.Endpoint{ep("10.0.0.1", 80, "")},
			req:          &model.PushRequest{Full: true, ConfigsUpdated: map[model.ConfigKey]struct{}{model.ServiceKey("mesh", "b.local"): {}}},
			wantServices: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &staticSource{}
			src.set(a, b)
			s := NewDiscoveryServer(src, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			s.initialPush()
			src.set(tc.services...)
			s.EDSCacheUpdate("test", "a.local", "mesh", tc.endpoints)
			var services, got int
			if tc.req.Full {
				services, got = s.fullPush(tc.req)
			} else {
				services, got = s.edsPush(tc.req)
			}
			if got != tc.want {
				t.Errorf("changed resources = %d, want %d", got, tc.want)
			}
			if services != tc.wantServices {
				t.Errorf("services = %d, want %d", services, tc.wantServices)
			}
		})
	}
}

func TestPushBeforeReadyIsDropped(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	s := NewDiscoveryServer(src, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.push(&model.PushRequest{Full: true})
	if n := len(s.caches.clusters.names()); n != 0 {
		t.Fatalf("%d clusters in the cache before the first full push, want 0", n)
	}
}

func TestDominantReason(t *testing.T) {
	tests := map[string]struct {
		reasons model.ReasonStats
		want    string
	}{
		"no reason is unknown":             {nil, "unknown"},
		"the most counted reason wins":     {model.NewReason(model.EndpointUpdate, model.EndpointUpdate, model.ServiceUpdate), "endpoint"},
		"a tie goes to the broader reason": {model.NewReason(model.EndpointUpdate, model.ServiceUpdate), "service"},
		"global beats everything in a tie": {model.NewReason(model.ConfigUpdate, model.GlobalUpdate), "global"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, dominantReason(tc.reasons))
		})
	}
}

// TestUpdatesBeforeTheFirstPushQueueNothing: XDSUpdater calls before the first
// full push only fill the shards, which that push reads; queueing them would
// push the whole mesh a second time right after it.
func TestUpdatesBeforeTheFirstPushQueueNothing(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	s := NewDiscoveryServer(src, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.SvcUpdate("test", "a.local", "mesh", model.EventAdd)
	s.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, "")}, time.Time{})
	s.ConfigUpdate(&model.PushRequest{Full: true})
	if req, _ := s.queue.take(); req != nil {
		t.Fatalf("queued %+v before the first full push, want nothing", req)
	}
	s.initialPush()
	if got := len(s.caches.endpoints.names()); got != 1 {
		t.Fatalf("the first full push holds %d ClusterLoadAssignments, want 1 (the early update's)", got)
	}
	s.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.2", 80, "")}, time.Time{})
	if req, _ := s.queue.take(); req == nil || req.Full {
		t.Fatalf("after the first push an endpoint change queued %+v, want an EDS request", req)
	}
}

// TestPushLogSaysWhatWasPushed: the push log line counts the services the
// push generated from and the resources it changed, apart from the
// request's ConfigsUpdated, which a global full push leaves empty.
func TestPushLogSaysWhatWasPushed(t *testing.T) {
	src := &staticSource{}
	var services []*model.Service
	for i := range 9 {
		services = append(services, grpcService(fmt.Sprintf("s%d.local", i), 80))
	}
	src.set(services...)
	var logs harness.LockedBuffer
	ts := runServer(t, src, Options{
		Address: "127.0.0.1:0", DebounceAfter: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	close(ts.ready)
	ts.waitPushes(t, 1)

	// 9 services, each a Cluster, a Listener, a Route and a
	// ClusterLoadAssignment.
	lines := logs.Messages("Pushed full")
	want := " reason=global services=9 changedResources=36 configsUpdated=0 "
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("want one \"Pushed full\" line containing %q; log:\n%s", want, logs.String())
	}
}

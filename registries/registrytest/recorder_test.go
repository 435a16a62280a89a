package registrytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// errorsTB records Errorf calls instead of failing the test.
type errorsTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func instance(id, addr string, port uint32) registries.Instance {
	return registries.Instance{ID: id, Address: addr, Port: port}
}

func TestRecorderKeysServicesByKey(t *testing.T) {
	rec := NewRecorder(t)
	public := registries.Service{Namespace: "public", Group: "G", Name: "web",
		Instances: []registries.Instance{instance("b", "10.0.0.2", 80), instance("a", "10.0.0.1", 80)}}
	other := registries.Service{Namespace: "ns2", Group: "G", Name: "web",
		Instances: []registries.Instance{instance("c", "10.0.0.3", 81)}}
	rec.Snapshot(registries.Snapshot{Service: public})
	rec.Snapshot(registries.Snapshot{Service: other})
	rec.Snapshot(registries.Snapshot{Err: errors.New("listing failed")})

	st := rec.State()
	if len(st.All) != 3 || len(st.Last) != 2 || len(st.Good) != 2 {
		t.Fatalf("state = %s; want 3 snapshots, 2 services (the registry-wide error is none)", st)
	}
	if got := st.IDs(public.Key().String()); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("IDs = %v, want [a b]", got)
	}
	if got := st.Addrs(other.Key().String()); !slices.Equal(got, []string{"10.0.0.3:81"}) {
		t.Errorf("Addrs = %v, want [10.0.0.3:81]", got)
	}
	if got := st.ByAddr(public.Key().String())["10.0.0.1:80"].ID; got != "a" {
		t.Errorf("ByAddr ID = %q, want a", got)
	}
	if st.IDs("web") != nil || st.Addrs("web") != nil || st.ByAddr("web") != nil {
		t.Errorf("a bare name found a namespaced service")
	}

	failed := registries.Service{Namespace: "public", Group: "G", Name: "web"}
	rec.Snapshot(registries.Snapshot{Service: failed, Err: errors.New("read failed")})
	rec.Listing("", registries.ScopeOf(other.Namespace, other.Group), nil, []registries.ServiceKey{other.Key()})
	rec.Snapshot(registries.Snapshot{Service: other, Removed: true})
	st = rec.State()
	if len(st.Listings) != 1 || st.Listings[0].Scope != registries.ScopeOf("ns2", "G") {
		t.Errorf("Listings = %+v", st.Listings)
	}
	if st.Last[public.Key().String()].Err == nil || len(st.Good[public.Key().String()]) != 2 {
		t.Errorf("after a failed read: last = %+v, good = %v; want the error, the instances kept",
			st.Last[public.Key().String()], st.Good[public.Key().String()])
	}
	if _, ok := st.Last[other.Key().String()]; ok {
		t.Errorf("a removed service is still in Last")
	}
	if _, ok := st.Good[other.Key().String()]; ok {
		t.Errorf("a removed service is still in Good")
	}
}

func TestRecorderStateIsACopy(t *testing.T) {
	rec := NewRecorder(t)
	st := rec.State()
	rec.Snapshot(registries.Snapshot{Service: registries.Service{Name: "web"}})
	rec.Synced("r")
	if len(st.All) != 0 || len(st.Last) != 0 || len(st.Good) != 0 || st.Synced != 0 {
		t.Errorf("an earlier State changed: %s", st)
	}
	if snaps := rec.Snapshots(); len(snaps) != 1 {
		t.Errorf("Snapshots = %+v, want one", snaps)
	}
}

func TestRecorderReportsSecondSynced(t *testing.T) {
	tb := &errorsTB{TB: t}
	rec := NewRecorder(tb)
	rec.Synced("r")
	if len(tb.errs) != 0 {
		t.Fatalf("errors after one Synced: %v", tb.errs)
	}
	rec.Synced("r")
	if len(tb.errs) != 1 {
		t.Errorf("errors after two Synced: %v, want one", tb.errs)
	}
	if n := rec.State().Synced; n != 2 {
		t.Errorf("State.Synced = %d, want 2", n)
	}
}

// TestRecorderChecksNamedRemovals: a Removed snapshot the Listing before
// it did not name, a named removal that never comes, or a removal the
// Listing lists itself is an error (registries.Sink).
func TestRecorderChecksNamedRemovals(t *testing.T) {
	web, api := registries.ServiceKey{Name: "web"}, registries.ServiceKey{Name: "api"}
	cases := map[string]struct {
		calls func(rec *Recorder)
		errs  int
	}{
		"named, then sent": {calls: func(rec *Recorder) {
			rec.Listing("r", registries.Scope{}, nil, []registries.ServiceKey{web})
			rec.Snapshot(registries.Snapshot{Service: web.Service(), Removed: true})
		}},
		"sent without being named": {errs: 1, calls: func(rec *Recorder) {
			rec.Listing("r", registries.Scope{}, nil, nil)
			rec.Snapshot(registries.Snapshot{Service: web.Service(), Removed: true})
		}},
		"named, never sent before the next listing": {errs: 1, calls: func(rec *Recorder) {
			rec.Listing("r", registries.Scope{}, nil, []registries.ServiceKey{web})
			rec.Listing("r", registries.Scope{}, nil, nil)
		}},
		"named and listed": {errs: 1, calls: func(rec *Recorder) {
			rec.Listing("r", registries.Scope{}, []registries.ServiceKey{web}, []registries.ServiceKey{web})
			rec.Snapshot(registries.Snapshot{Service: web.Service(), Removed: true})
		}},
		"named out of scope": {errs: 1, calls: func(rec *Recorder) {
			rec.Listing("r", registries.ScopeOf("ns", "G"), nil, []registries.ServiceKey{api})
			rec.Snapshot(registries.Snapshot{Service: api.Service(), Removed: true})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tb := &errorsTB{TB: t}
			tc.calls(NewRecorder(tb))
			if len(tb.errs) != tc.errs {
				t.Errorf("errors %q, want %d", tb.errs, tc.errs)
			}
		})
	}
}

func TestRecorderEventually(t *testing.T) {
	rec := NewRecorder(t)
	go func() {
		time.Sleep(50 * time.Millisecond)
		rec.Snapshot(registries.Snapshot{Service: registries.Service{Name: "web",
			Instances: []registries.Instance{instance("a", "10.0.0.1", 80)}}})
		rec.Synced("r")
	}()
	rec.Eventually(t, "Synced with web", func(st State) bool {
		return st.Synced == 1 && slices.Equal(st.IDs("web"), []string{"a"})
	})
}

// fakeRegistry delivers one service, syncs, and returns nil when cancelled.
type fakeRegistry struct{}

func (fakeRegistry) Name() string { return "fake" }

func (fakeRegistry) Run(ctx context.Context, sink registries.Sink) error {
	sink.Snapshot(registries.Snapshot{Registry: "fake", Service: registries.Service{Name: "web",
		Instances: []registries.Instance{instance("a", "10.0.0.1", 80)}}})
	sink.Synced("fake")
	<-ctx.Done()
	return nil
}

func TestRun(t *testing.T) {
	rec := Run(t, fakeRegistry{}, 5*time.Second)
	rec.Eventually(t, "Synced with web", func(st State) bool {
		return st.Synced == 1 && slices.Equal(st.Addrs("web"), []string{"10.0.0.1:80"})
	})
}

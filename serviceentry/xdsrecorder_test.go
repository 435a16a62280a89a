package serviceentry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/model"
)

// recordingUpdater is an XDSUpdater that records every call as a short
// string, like Istio's util/xdsfake updater: "eds a.ns 2", "edscache a.ns 2",
// "svc a.ns add", "full a.ns,b.ns service". It never drops an event.
type recordingUpdater struct {
	mu     sync.Mutex
	events []string
	// starts are the Start of every push requested (EDSUpdate and
	// ConfigUpdate), in order.
	starts []time.Time
}

var _ XDSUpdater = (*recordingUpdater)(nil)

func (r *recordingUpdater) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recordingUpdater) EDSUpdate(_, host, ns string, eps []*model.Endpoint, start time.Time) {
	r.addStart(start)
	r.add(fmt.Sprintf("eds %s.%s %d", host, ns, len(eps)))
}

func (r *recordingUpdater) addStart(t time.Time) {
	r.mu.Lock()
	r.starts = append(r.starts, t)
	r.mu.Unlock()
}

// takeStarts returns and clears the recorded starts.
func (r *recordingUpdater) takeStarts() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.starts
	r.starts = nil
	return out
}

func (r *recordingUpdater) EDSCacheUpdate(_, host, ns string, eps []*model.Endpoint) {
	r.add(fmt.Sprintf("edscache %s.%s %d", host, ns, len(eps)))
}

func (r *recordingUpdater) SvcUpdate(_, host, ns string, ev model.Event) {
	r.add(fmt.Sprintf("svc %s.%s %s", host, ns, ev))
}

func (r *recordingUpdater) ConfigUpdate(req *model.PushRequest) {
	r.addStart(req.Start)
	var keys []string
	for k := range req.ConfigsUpdated {
		keys = append(keys, k.Name+"."+k.Namespace)
	}
	slices.Sort(keys)
	var reasons []string
	for k := range req.Reason {
		reasons = append(reasons, string(k))
	}
	slices.Sort(reasons)
	kind := "eds"
	if req.Full {
		kind = "full"
	}
	r.add(fmt.Sprintf("%s %s %s", kind, strings.Join(keys, ","), strings.Join(reasons, ",")))
}

// take returns and clears the recorded events.
func (r *recordingUpdater) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// strictMatch fails unless the recorded events are exactly want, in order
// (Istio xdsfake StrictMatchOrFail).
func (r *recordingUpdater) strictMatch(t *testing.T, want ...string) {
	t.Helper()
	got := r.take()
	if !slices.Equal(got, want) {
		t.Fatalf("XDSUpdater calls:\n got  %q\n want %q", got, want)
	}
}

// Package registrytest provides a registries.Sink for the tests of registry
// watchers: Recorder records what a Registry delivers, checks the Sink
// contract, and waits for a state. Like net/http/httptest it is a normal
// package that only tests import.
package registrytest

import (
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/test/harness"
)

// DefaultTimeout is how long Recorder.Eventually waits unless
// Recorder.Timeout says otherwise.
const DefaultTimeout = 45 * time.Second

// dumpServices is how many services a State's String lists.
const dumpServices = 20

// Recorder is a registries.Sink that records every call and checks the Sink
// contract: Synced is called once at most; a Listing's removals are in its
// scope and not among its keys; the Removed snapshots after a Listing are
// exactly those it names, in its order (registries.Sink). A breach is an
// error the test that made the Recorder reports. It holds nothing as a run
// starts (Serving). It is safe for concurrent use.
type Recorder struct {
	// Timeout bounds Eventually; NewRecorder sets DefaultTimeout.
	Timeout time.Duration

	t  testing.TB
	mu sync.Mutex
	st State
	// named are the removals the last Listing named that are still to come.
	named []registries.ServiceKey
}

var _ registries.Sink = (*Recorder)(nil)

// State is what a Recorder has recorded. Services are keyed by their
// registries.ServiceKey's String, so that a test names them as written
// ("web", "public/DEFAULT_GROUP//web"). A State returned by a Recorder is a copy: it does
// not change as more is recorded.
type State struct {
	// All is every snapshot in arrival order, registry-wide errors (an empty
	// Service.Name) included.
	All []registries.Snapshot
	// Last is the last snapshot per service; a Removed service is deleted and
	// a registry-wide error is not a service.
	Last map[string]registries.Snapshot
	// Good is the last authoritative instance list per service (a snapshot
	// neither Removed nor with Err); a Removed service is deleted.
	Good map[string][]registries.Instance
	// Synced is how many times Synced was called.
	Synced int
	// Listings are every Listing call, in arrival order.
	Listings []Listing
}

// Listing is one Listing call.
type Listing struct {
	Registry string
	Scope    registries.Scope
	Keys     []registries.ServiceKey
	Removed  []registries.ServiceKey
}

// NewRecorder returns an empty Recorder whose contract errors fail t.
func NewRecorder(t testing.TB) *Recorder {
	return &Recorder{
		Timeout: DefaultTimeout,
		t:       t,
		st:      State{Last: map[string]registries.Snapshot{}, Good: map[string][]registries.Instance{}},
	}
}

// Snapshot implements registries.Sink.
func (r *Recorder) Snapshot(s registries.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.All = append(r.st.All, s)
	key := s.Service.Key()
	k := key.String()
	switch {
	case s.Service.Name == "":
	case s.Removed:
		if len(r.named) == 0 || r.named[0] != key {
			r.t.Errorf("Removed %q, but the Listing before it names %v next (registries.Sink)", k, r.named)
		} else {
			r.named = r.named[1:]
		}
		delete(r.st.Last, k)
		delete(r.st.Good, k)
	case s.Err != nil:
		r.st.Last[k] = s
	default:
		r.st.Last[k] = s
		r.st.Good[k] = s.Service.Instances
	}
}

// Synced implements registries.Sink.
func (r *Recorder) Synced(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Synced++
	if r.st.Synced > 1 {
		r.t.Errorf("Synced called %d times, want once", r.st.Synced)
	}
}

// Listing implements registries.Sink.
func (r *Recorder) Listing(registry string, scope registries.Scope, keys, removed []registries.ServiceKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Listings = append(r.st.Listings, Listing{Registry: registry, Scope: scope,
		Keys: slices.Clone(keys), Removed: slices.Clone(removed)})
	if len(r.named) > 0 {
		r.t.Errorf("Listing of %v, but the removals the one before named never came: %v (registries.Sink)", scope, r.named)
	}
	for _, k := range removed {
		if !scope.Holds(k) || slices.Contains(keys, k) {
			r.t.Errorf("Listing of %v names %q removed, which it lists or does not cover (registries.Sink)", scope, k)
		}
	}
	r.named = slices.Clone(removed)
}

// Serving implements registries.Sink: a Recorder holds nothing as a run
// starts.
func (r *Recorder) Serving(string) []registries.ServiceKey { return nil }

// State returns a copy of what has been recorded so far.
func (r *Recorder) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return State{
		All:      slices.Clone(r.st.All),
		Last:     maps.Clone(r.st.Last),
		Good:     maps.Clone(r.st.Good),
		Synced:   r.st.Synced,
		Listings: slices.Clone(r.st.Listings),
	}
}

// Snapshots returns a copy of every snapshot so far, in arrival order.
func (r *Recorder) Snapshots() []registries.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.st.All)
}

// Eventually waits up to r.Timeout until cond holds for the recorded State,
// and otherwise fails t with the last State and writes every goroutine's
// stack to stderr.
func (r *Recorder) Eventually(t testing.TB, what string, cond func(State) bool) {
	t.Helper()
	met := false
	defer func() {
		if !met {
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
	}()
	harness.Eventually(t, r.Timeout, what, func() error {
		st := r.State()
		if cond(st) {
			return nil
		}
		return fmt.Errorf("not yet; state:\n%s", st)
	})
	met = true
}

// IDs returns the sorted IDs of service key's last authoritative instances;
// nil when none is recorded.
func (s State) IDs(key string) []string {
	list, ok := s.Good[key]
	if !ok {
		return nil
	}
	out := []string{}
	for _, in := range list {
		out = append(out, in.ID)
	}
	slices.Sort(out)
	return out
}

// ByAddr returns service key's last authoritative instances by "ip:port";
// nil when none is recorded.
func (s State) ByAddr(key string) map[string]registries.Instance {
	list, ok := s.Good[key]
	if !ok {
		return nil
	}
	out := map[string]registries.Instance{}
	for _, in := range list {
		out[in.Address+":"+strconv.FormatUint(uint64(in.Port), 10)] = in
	}
	return out
}

// Addrs returns the sorted "ip:port" of service key's last authoritative
// instances; nil when none is recorded.
func (s State) Addrs(key string) []string {
	m := s.ByAddr(key)
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// String summarizes the state: counts, then the first services by key with
// their last error and authoritative instances.
func (s State) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "synced=%d snapshots=%d services=%d\n", s.Synced, len(s.All), len(s.Last))
	for i, k := range slices.Sorted(maps.Keys(s.Last)) {
		if i == dumpServices {
			fmt.Fprintf(&b, "  ... %d more\n", len(s.Last)-i)
			break
		}
		fmt.Fprintf(&b, "  %s err=%v ids=%v addrs=%v\n", k, s.Last[k].Err, s.IDs(k), s.Addrs(k))
	}
	return b.String()
}

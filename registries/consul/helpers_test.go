package consul

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/test/harness"
)

const waitTimeout = 45 * time.Second

// recorder is a Sink that records every call and checks the Sink contract:
// no list after a Removed without a new listing, Synced once.
type recorder struct {
	t  testing.TB
	mu sync.Mutex
	// all is every snapshot in arrival order.
	all []registries.Snapshot
	// last is the last snapshot per service; removed services are deleted.
	last map[string]registries.Snapshot
	// good is the last authoritative list per service.
	good   map[string][]registries.Instance
	synced int
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, last: map[string]registries.Snapshot{}, good: map[string][]registries.Instance{}}
}

func (r *recorder) Snapshot(s registries.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
	name := s.Service.Name
	switch {
	case s.Removed:
		delete(r.last, name)
		delete(r.good, name)
	case s.Err != nil:
		r.last[name] = s
	default:
		r.last[name] = s
		r.good[name] = s.Service.Instances
	}
}

func (r *recorder) Synced(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced++
	if r.synced > 1 {
		r.t.Errorf("Synced called %d times, want once", r.synced)
	}
}

// eventually polls cond under the recorder's lock until it holds or the
// deadline passes.
func (r *recorder) eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Fatalf("timed out after %s waiting until %s; state:\n%s", waitTimeout, what, r.dump())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ids returns the IDs of a service's last authoritative instances, sorted;
// nil when the service has none recorded.
func (r *recorder) ids(name string) []string {
	list, ok := r.good[name]
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

func (r *recorder) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "synced=%d snapshots=%d services=%d\n", r.synced, len(r.all), len(r.last))
	for i, name := range slices.Sorted(maps.Keys(r.last)) {
		if i == 20 {
			b.WriteString("...\n")
			break
		}
		s := r.last[name]
		fmt.Fprintf(&b, "  %s err=%v ids=%v\n", name, s.Err, r.ids(name))
	}
	return b.String()
}

// snapshots returns a copy of every snapshot so far.
func (r *recorder) snapshots() []registries.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// runRegistry runs a registry on cfg until the test ends.
func runRegistry(t *testing.T, cfg Config) (*Registry, *recorder) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "consul-test"
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := newRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	return reg, rec
}

// waitFor is harness.EventuallyTrue with the package's timeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	harness.EventuallyTrue(t, waitTimeout, what, cond)
}

// counted is meshbridge_registry_errors_total{registry,reason}.
func counted(registry, reason string) float64 {
	return testutil.ToFloat64(errorsTotal.WithLabelValues(registry, reason))
}

func registerPassing(t *testing.T, c *harness.Consul, name, id, addr string, port int) {
	t.Helper()
	c.RegisterInstance(t, name, id, addr, port, nil, nil, "passing")
}

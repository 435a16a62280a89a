package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// Registry is a scripted registry: a registries.Registry whose watcher
// reports to the pipeline's Sink exactly the calls the test makes, and
// nothing while no watcher runs. The pipeline runs it like any registry:
// Run starts a watcher, a restart (Harness.RestartRegistry) stops it and
// starts a new one, a removal stops it.
//
// Each method makes one Sink call (List a listing's worth) and returns once
// the Syncer took it; the objects it writes then reach the Store's handlers
// asynchronously (Harness.Settle waits for them).
type Registry struct {
	name string

	mu   sync.Mutex
	sink registries.Sink // of the running watcher; nil when none runs
	// changed is closed and replaced when a watcher starts or stops.
	changed chan struct{}
}

// NewRegistry returns a scripted registry called name.
func NewRegistry(name string) *Registry {
	return &Registry{name: name, changed: make(chan struct{})}
}

var _ registries.Registry = (*Registry)(nil)

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.name }

// Run implements registries.Registry: the watcher runs until ctx is done.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	r.setSink(sink)
	<-ctx.Done()
	r.setSink(nil)
	return nil
}

func (r *Registry) setSink(sink registries.Sink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = sink
	close(r.changed)
	r.changed = make(chan struct{})
}

// watcherTimeout bounds the wait for a watcher to run: the pipeline starts
// it on its own goroutine.
const watcherTimeout = 10 * time.Second

// errNoWatcher is the error of a call made while no watcher runs.
var errNoWatcher = errors.New("no watcher of the registry runs")

// running returns the running watcher's Sink, waiting up to watcherTimeout
// for one to start.
func (r *Registry) running() (registries.Sink, error) {
	deadline := time.NewTimer(watcherTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		sink, changed := r.sink, r.changed
		r.mu.Unlock()
		if sink != nil {
			return sink, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return nil, fmt.Errorf("registry %s: %w within %s", r.name, errNoWatcher, watcherTimeout)
		}
	}
}

// Running reports whether a watcher of the registry runs now.
func (r *Registry) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sink != nil
}

// Call is one Sink call of a scripted registry, as the generator of the
// differential and the named scenarios write them.
type Call struct {
	// Op is the call: OpSnapshot (Service, Relist), OpRemove (Service's
	// name, Relist), OpFail (Service's name, "" for the whole registry),
	// OpListing (Keys), OpSynced.
	Op      Op
	Service registries.Service
	Relist  bool
	Keys    []string
}

// Op names a Sink call.
type Op int

// The Sink calls a Call makes.
const (
	OpSnapshot Op = iota
	OpRemove
	OpFail
	OpListing
	OpSynced
)

// Do makes c on the running watcher's Sink, waiting for a watcher to run.
func (r *Registry) Do(c Call) error {
	sink, err := r.running()
	if err != nil {
		return err
	}
	now := time.Now()
	switch c.Op {
	case OpSnapshot:
		sink.Snapshot(registries.Snapshot{Registry: r.name, Service: c.Service, Relist: c.Relist, Observed: now})
	case OpRemove:
		sink.Snapshot(registries.Snapshot{Registry: r.name, Service: registries.Service{Name: c.Service.Name,
			Namespace: c.Service.Namespace, Group: c.Service.Group, Datacenter: c.Service.Datacenter},
			Removed: true, Relist: c.Relist, Observed: now})
	case OpFail:
		sink.Snapshot(registries.Snapshot{Registry: r.name, Service: registries.Service{Name: c.Service.Name,
			Namespace: c.Service.Namespace, Group: c.Service.Group, Datacenter: c.Service.Datacenter},
			Err: errors.New("scripted read error"), Observed: now})
	case OpListing:
		sink.Listing(r.name, "", slices.Clone(c.Keys))
	case OpSynced:
		sink.Synced(r.name)
	default:
		return fmt.Errorf("unknown op %d", c.Op)
	}
	return nil
}

// ListCalls are the calls of one complete read of services, as a watcher
// makes them on its first read or a relist: the Listing of every key, then
// a Snapshot of each service (relist: read right after a (re)connection),
// the removal of each of gone, and Synced.
func ListCalls(services, gone []registries.Service, relist bool) []Call {
	keys := make([]string, 0, len(services))
	for _, s := range services {
		keys = append(keys, s.Key())
	}
	slices.Sort(keys)
	calls := []Call{{Op: OpListing, Keys: keys}}
	for _, s := range services {
		calls = append(calls, Call{Op: OpSnapshot, Service: s, Relist: relist})
	}
	for _, s := range gone {
		calls = append(calls, Call{Op: OpRemove, Service: s, Relist: relist})
	}
	return append(calls, Call{Op: OpSynced})
}

package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// Registry is a scripted registry: a registries.Registry whose watcher
// reports what the test scripts through a registries.Reporter, as every
// real watcher does, and nothing while no watcher runs. The pipeline runs it
// like any registry: Run starts a watcher with a Reporter of its own, a
// restart (Harness.RestartRegistry) stops it and starts a new one with a new
// Reporter, a removal stops it. The Sink hears what the Reporter decides
// (its rules 1-8): a listing brings the removals of the services it omits,
// a read no listing covers is dropped, Synced is the Reporter's.
//
// Each call (Do) makes one or a few Reporter calls and returns once the
// Syncer took what they sent; the objects it writes then reach the Store's
// handlers asynchronously (Harness.Settle waits for them).
type Registry struct {
	name string
	// log is the Reporters'; NewRegistry discards, the harness gives its
	// pipeline's logger.
	log *slog.Logger

	mu  sync.Mutex
	run *watcherRun // the running watcher's; nil when none runs
	// changed is closed and replaced when a watcher starts or stops.
	changed chan struct{}
}

// watcherRun is one run of a scripted registry's watcher: its Reporter and
// what its listings hold (the Reporter's services: no ReconnectGrace, so
// it keeps nothing a listing omits).
type watcherRun struct {
	rep *registries.Reporter

	mu sync.Mutex // serializes the run's calls (Do)
	// keys are the services the run's listings hold; listed tells that it
	// had a listing.
	keys   map[registries.ServiceKey]bool
	listed bool
}

// NewRegistry returns a scripted registry called name.
func NewRegistry(name string) *Registry {
	return &Registry{name: name, log: slog.New(slog.NewTextHandler(io.Discard, nil)), changed: make(chan struct{})}
}

var _ registries.Registry = (*Registry)(nil)

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.name }

// Run implements registries.Registry: the watcher runs until ctx is done,
// reporting through a Reporter of its own.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	rep := registries.NewReporter(registries.ReporterConfig{Registry: r.name, Sink: sink, Logger: r.log})
	r.setRun(&watcherRun{rep: rep, keys: map[registries.ServiceKey]bool{}})
	<-ctx.Done()
	r.setRun(nil)
	return nil
}

func (r *Registry) setRun(run *watcherRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.run = run
	close(r.changed)
	r.changed = make(chan struct{})
}

// watcherTimeout bounds the wait for a watcher to run: the pipeline starts
// it on its own goroutine.
const watcherTimeout = 10 * time.Second

// errNoWatcher is the error of a call made while no watcher runs.
var errNoWatcher = errors.New("no watcher of the registry runs")

// running returns the running watcher's run, waiting up to watcherTimeout
// for one to start.
func (r *Registry) running() (*watcherRun, error) {
	deadline := time.NewTimer(watcherTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		run, changed := r.run, r.changed
		r.mu.Unlock()
		if run != nil {
			return run, nil
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
	return r.run != nil
}

// Listed reports whether the running watcher had a listing, waiting for a
// watcher to run.
func (r *Registry) Listed() (bool, error) {
	run, err := r.running()
	if err != nil {
		return false, err
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.listed, nil
}

// Call is one observation of a scripted registry's watcher, reported to its
// Reporter, as the generator of the differential and the named scenarios
// write them.
type Call struct {
	// Op is the observation: OpListing (Keys), OpSnapshot (Service,
	// Relist), OpRemove (Service's key, Relist), OpFail (Service's key, ""
	// for the whole registry's listing), OpDown, OpSynced.
	Op      Op
	Service registries.Service
	Relist  bool
	Keys    []registries.ServiceKey
}

// Op names an observation of a watcher and the Reporter calls it makes.
type Op int

// The observations a Call reports.
const (
	// OpSnapshot is a read of Service: Reporter.Read, after MarkRelist when
	// Relist (its own query's index went backwards, as Consul's watcher
	// marks it). A service the run's listings do not hold is first listed
	// (Reporter.Listing of the run's services and it), as a catalog change
	// brings a new service before its read.
	OpSnapshot Op = iota
	// OpRemove is the registry leaving out Service: Reporter.Remove (the
	// listing without it, then its removal); when Relist, Reconnected and
	// the listing of the run's services without it (its removal marked
	// Relist).
	OpRemove
	// OpFail is a failed read of Service: Reporter.Fail; of the whole
	// registry (Service.Name ""), a failed listing: Reporter.FailListing.
	OpFail
	// OpListing is a complete listing of Keys: Reporter.Listing, which
	// sends it and the removals of the run's services it omits; when
	// Relist, Reconnected first.
	OpListing
	// OpSynced makes no call: Synced is the Reporter's (its rule 7); it
	// fails unless the Reporter called it (every service of the run's first
	// listing read or removed).
	OpSynced
	// OpDown is an outage of the whole registry: Reporter.Down (a failed
	// listing and a failed read of each listed service).
	OpDown
)

// Errors the scripted observations report.
var (
	errScriptedRead    = errors.New("scripted read error")
	errScriptedListing = errors.New("scripted listing error")
	errScriptedOutage  = errors.New("scripted outage")
)

// Do reports c to the running watcher's Reporter, waiting for a watcher to
// run.
func (r *Registry) Do(c Call) error {
	run, err := r.running()
	if err != nil {
		return err
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	now := time.Now()
	rep := run.rep
	key := c.Service.Key()
	switch c.Op {
	case OpSnapshot:
		if !run.keys[key] {
			run.listing(append(slices.Collect(maps.Keys(run.keys)), key), now)
		}
		if c.Relist {
			rep.MarkRelist(key)
		}
		if rep.Read(c.Service, now) == registries.ReadDropped {
			return fmt.Errorf("registry %s: the Reporter dropped the read of %s, which its listing holds", r.name, key)
		}
	case OpRemove:
		if !c.Relist {
			rep.Remove(key, now)
			delete(run.keys, key)
			break
		}
		rep.Reconnected(registries.Scope{}, now)
		keys := slices.Collect(maps.Keys(run.keys))
		run.listing(slices.DeleteFunc(keys, func(k registries.ServiceKey) bool { return k == key }), now)
	case OpFail:
		if c.Service.Name == "" {
			rep.FailListing(registries.Scope{}, errScriptedListing, now)
		} else {
			rep.Fail(c.Service, errScriptedRead, now)
		}
	case OpListing:
		if c.Relist {
			rep.Reconnected(registries.Scope{}, now)
		}
		run.listing(slices.Clone(c.Keys), now)
	case OpSynced:
		if !rep.Synced() {
			return fmt.Errorf("registry %s: the Reporter has not synced: a service of the watcher's first listing was not read", r.name)
		}
	case OpDown:
		rep.Down(registries.Scope{}, errScriptedOutage, now)
	default:
		return fmt.Errorf("unknown op %d", c.Op)
	}
	return nil
}

// listing reports a complete listing of keys to the run's Reporter, which
// sends it and the removals of the services it omits. run.mu is held.
func (run *watcherRun) listing(keys []registries.ServiceKey, now time.Time) {
	slices.SortFunc(keys, registries.ServiceKey.Compare)
	keys = slices.Compact(keys)
	run.rep.Listing(registries.Scope{}, keys, now)
	run.keys = make(map[registries.ServiceKey]bool, len(keys))
	for _, k := range keys {
		run.keys[k] = true
	}
	run.listed = true
}

// ListCalls are the calls of one complete read of services, as a watcher
// makes them on its first read or a relist: the listing of every key (which
// the Reporter sends with the removals of the services it omits), a read of
// each service, and the check that the Reporter synced. relist: read right
// after a (re)connection (Reporter.Reconnected before the listing), which
// marks the removals and the reads Relist. The services the read no longer
// finds make no call of their own: the Reporter removes every service it
// holds that the listing omits.
func ListCalls(services []registries.Service, relist bool) []Call {
	keys := make([]registries.ServiceKey, 0, len(services))
	for _, s := range services {
		keys = append(keys, s.Key())
	}
	slices.SortFunc(keys, registries.ServiceKey.Compare)
	calls := []Call{{Op: OpListing, Keys: keys, Relist: relist}}
	for _, s := range services {
		calls = append(calls, Call{Op: OpSnapshot, Service: s})
	}
	return append(calls, Call{Op: OpSynced})
}

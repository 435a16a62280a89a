package syncer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/meshbridge/meshbridge/registries"
)

// OutagePolicy decides when a registry's disappearances take effect
// (config keys outage.*; README "Outages"). The zero value turns both
// safeguards off.
type OutagePolicy struct {
	// HoldDown delays a disappearance read right after a (re)connection, a
	// registry restart or an index reset (registries.Snapshot.Relist): an
	// empty instance list or a service's removal takes effect after
	// HoldDown if nothing undid it meanwhile; a service that comes back
	// within it causes no push at all. 0 turns hold-down off. A
	// disappearance of a registry that is up and stable (a deregistration,
	// an instance turning unhealthy) takes effect at once.
	HoldDown time.Duration
	// MaxDeleteRatio and DeleteGuardFloor engage the delete guard: a listing
	// (registries.Sink.Listing) whose absent services hold more than
	// MaxDeleteRatio of the registry's instances, and more than
	// DeleteGuardFloor of them, is held: its removals wait until an operator
	// confirms them (Syncer.ConfirmDeletes) or DeleteGuardTimeout passes, and
	// are dropped for each service a later listing has again. A ratio of 1
	// or more, or 0 (the zero value), turns the guard off.
	MaxDeleteRatio     float64
	DeleteGuardFloor   int
	DeleteGuardTimeout time.Duration
}

// DefaultOutagePolicy is the policy of a registry that sets none.
var DefaultOutagePolicy = OutagePolicy{
	HoldDown:           10 * time.Second,
	MaxDeleteRatio:     0.5,
	DeleteGuardFloor:   10,
	DeleteGuardTimeout: 5 * time.Minute,
}

// guard is a registry's engaged delete guard.
type guard struct {
	since time.Time
	// keys are the services the held listings removed, by key.
	keys map[registries.ServiceKey]bool
	// instances is what they held when the guard engaged.
	instances int
	timer     clock.Timer
}

// heldDown is a disappearance waiting for its hold-down.
type heldDown struct {
	snap  registries.Snapshot
	timer clock.Timer
}

// Listing implements registries.Sink: the delete guard judges the services
// a complete read removes (removed, as the registry's Reporter computed
// them) together, before the removals come (rules 5-6).
// A complete listing of a scope is also that scope's listing answering
// again: it ends the scope's failed-listing error (Snapshot.Scope), whether
// or not a service's read follows (none does when nothing changed); a
// listing of the whole registry (the zero Scope) ends them all.
func (s *Syncer) Listing(registry string, scope registries.Scope, keys, removed []registries.ServiceKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs.byName[registry]
	if r == nil || r.removed {
		return
	}
	now := s.clock.Now()
	r.status.LastListing = now
	registryLastSync.WithLabelValues(registry).Set(float64(now.UnixNano()) / 1e9)
	listed := make(map[registries.ServiceKey]bool, len(keys))
	for _, k := range keys {
		listed[k] = true
	}
	s.judge(r, scope, listed, removed, now, false)
	if len(r.down) > 0 {
		if scope == (registries.Scope{}) {
			clear(r.down)
		} else {
			delete(r.down, scope)
		}
		s.noteRegistry(r)
	}
}

// judge applies the delete guard's judgement of a complete read of r's
// services within scope that found listed and removes removed
// (judgeListing); removal tells that it is the registry's removal from the
// configuration. s.mu is held.
func (s *Syncer) judge(r *registryState, scope registries.Scope, listed map[registries.ServiceKey]bool,
	removed []registries.ServiceKey, now time.Time, removal bool) {
	served := make(map[registries.ServiceKey]int, len(removed))
	for _, k := range removed {
		if st := s.services[serviceID{registry: r.cfg.Name, key: k}]; st != nil {
			served[k] = st.instances
		}
	}
	var held map[registries.ServiceKey]bool
	if r.guard != nil {
		held = r.guard.keys
	}
	judged := r.status.Synced || r.status.FromDisk || r.restarted
	j := judgeListing(r.cfg.Policy, judged, scope, listed, served, held, r.status.Instances)
	for _, k := range j.back {
		s.unguard(r, k, "every held service is listed again")
	}
	if len(j.hold) == 0 {
		return
	}
	p := r.cfg.Policy
	if r.guard == nil {
		r.guard = &guard{since: now, keys: make(map[registries.ServiceKey]bool, len(j.hold))}
		name := r.cfg.Name
		if p.DeleteGuardTimeout > 0 {
			// Timers fire on their own goroutine: a fake clock calls them
			// under its own lock.
			r.guard.timer = s.clock.AfterFunc(p.DeleteGuardTimeout, func() { go s.guardTimeout(name) })
		}
		deleteGuardHeld.WithLabelValues(name).Set(1)
		deleteGuardEngaged.WithLabelValues(name).Inc()
	}
	r.guard.instances += j.lost
	for _, k := range j.hold {
		r.guard.keys[k] = true
	}
	r.status.DeleteGuard = r.guard.status()
	what := "a listing that would remove most of the registry"
	if removal {
		what = "the removal of the registry from the configuration"
	}
	s.log.Warn("Delete guard holds "+what+"; "+
		"confirm with POST /debug/registryz/"+r.cfg.Name+"/confirm, or it applies after outage.deleteGuardTimeout",
		"registry", r.cfg.Name, "services", len(j.hold), "instances", j.lost, "registryInstances", r.status.Instances,
		"maxDeleteRatio", p.MaxDeleteRatio, "timeout", p.DeleteGuardTimeout, "first", j.hold[0])
}

// status is the guard as /debug/registryz shows it.
func (g *guard) status() *DeleteGuardStatus {
	if g == nil {
		return nil
	}
	return &DeleteGuardStatus{Since: g.since, Services: len(g.keys), Instances: g.instances}
}

// guardTimeout applies a guard's removals once DeleteGuardTimeout passed.
func (s *Syncer) guardTimeout(registry string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.regs.byName[registry]; r != nil && r.guard != nil {
		s.applyGuard(r, "outage.deleteGuardTimeout passed")
	}
}

// Errors of ConfirmDeletes.
var (
	ErrUnknownRegistry = errors.New("no such registry")
	ErrNothingHeld     = errors.New("the delete guard holds nothing")
)

// ConfirmDeletes applies the removals the registry's delete guard holds and
// releases it; it returns how many services were removed, and an error
// wrapping ErrUnknownRegistry when no registry has that name, or
// ErrNothingHeld when its guard holds nothing.
func (s *Syncer) ConfirmDeletes(registry string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs.byName[registry]
	switch {
	case r == nil:
		return 0, fmt.Errorf("registry %q: %w", registry, ErrUnknownRegistry)
	case r.guard == nil:
		return 0, fmt.Errorf("registry %q: %w", registry, ErrNothingHeld)
	}
	n := len(r.guard.keys)
	s.applyGuard(r, "confirmed by an operator")
	return n, nil
}

// applyGuard removes every service the guard holds and releases it. s.mu is
// held.
func (s *Syncer) applyGuard(r *registryState, why string) {
	keys := slices.SortedFunc(maps.Keys(r.guard.keys), registries.ServiceKey.Compare)
	s.releaseGuard(r, why)
	for _, k := range keys {
		s.cancelHoldDown(r, k)
		delete(r.stale, k)
		s.remove(r, serviceID{registry: r.cfg.Name, key: k})
	}
	s.markDirty(r)
	s.noteRegistry(r)
	if r.removed {
		s.forget(r)
	}
}

// unguard drops key from r's guard, releasing the guard when it held
// nothing else. s.mu is held.
func (s *Syncer) unguard(r *registryState, key registries.ServiceKey, why string) {
	if !r.guarded(key) {
		return
	}
	delete(r.guard.keys, key)
	r.status.DeleteGuard = r.guard.status()
	if len(r.guard.keys) == 0 {
		s.releaseGuard(r, why)
	}
}

// releaseGuard drops the guard without applying anything. s.mu is held.
func (s *Syncer) releaseGuard(r *registryState, why string) {
	g := r.guard
	if g == nil {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	r.guard = nil
	r.status.DeleteGuard = nil
	deleteGuardHeld.WithLabelValues(r.cfg.Name).Set(0)
	s.log.Info("Delete guard released", "registry", r.cfg.Name, "why", why, "held", s.clock.Since(g.since).Round(time.Millisecond))
}

// guarded reports whether the guard holds the removal of key.
func (r *registryState) guarded(key registries.ServiceKey) bool {
	return r.guard != nil && r.guard.keys[key]
}

// holdDown delays a disappearance (rule 6): the first one starts the clock,
// a later one replaces what will be applied. s.mu is held.
func (s *Syncer) holdDown(r *registryState, id serviceID, snap registries.Snapshot) {
	if h := r.holding[id.key]; h != nil {
		h.snap = snap
		return
	}
	name := r.cfg.Name
	r.holding[id.key] = &heldDown{snap: snap, timer: s.clock.AfterFunc(r.cfg.Policy.HoldDown, func() {
		go s.holdDownDone(name, id)
	})}
	r.status.HeldDown = len(r.holding)
	s.log.Debug("Holding down a disappearance read after a reconnection", "registry", name, "service", snap.Service.Name,
		"removed", snap.Removed, "holdDown", r.cfg.Policy.HoldDown)
}

// holdDownDone applies a disappearance still true after its hold-down.
func (s *Syncer) holdDownDone(registry string, id serviceID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs.byName[registry]
	if r == nil {
		return
	}
	h := r.holding[id.key]
	if h == nil {
		return
	}
	delete(r.holding, id.key)
	r.status.HeldDown = len(r.holding)
	if r.guarded(id.key) {
		return // the guard decides
	}
	s.log.Info("Applied a disappearance after its hold-down", "registry", registry, "service", h.snap.Service.Name,
		"removed", h.snap.Removed)
	s.applySnapshot(r, id, h.snap)
	s.noteRegistry(r)
}

// cancelHoldDown drops a held disappearance of key. s.mu is held.
func (s *Syncer) cancelHoldDown(r *registryState, key registries.ServiceKey) {
	if h := r.holding[key]; h != nil {
		h.timer.Stop()
		delete(r.holding, key)
		r.status.HeldDown = len(r.holding)
	}
}

package syncer

import (
	"fmt"
	"slices"
	"strings"
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
	keys map[string]bool
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
// a complete read removes together, before the removals come (rules 5-6).
func (s *Syncer) Listing(registry, scope string, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs[registry]
	if r == nil || r.removed {
		return
	}
	now := s.clock.Now()
	r.status.LastListing = now
	registryLastSync.WithLabelValues(registry).Set(float64(now.UnixNano()) / 1e9)
	s.listing(r, scope, keys, now, false)
}

// listing judges a complete read of r's services within scope that found
// keys; removal tells that it is the registry's removal from the
// configuration. s.mu is held.
func (s *Syncer) listing(r *registryState, scope string, keys []string, now time.Time, removal bool) {
	registry := r.cfg.Name
	listed := make(map[string]bool, len(keys))
	for _, k := range keys {
		listed[k] = true
	}
	if g := r.guard; g != nil {
		for k := range g.keys {
			if strings.HasPrefix(k, scope) && listed[k] {
				delete(g.keys, k)
			}
		}
		if len(g.keys) == 0 {
			s.releaseGuard(r, "every held service is listed again")
		}
	}
	p := r.cfg.Policy
	if p.MaxDeleteRatio <= 0 || p.MaxDeleteRatio >= 1 || (!r.status.Synced && !r.status.FromDisk && r.relisting == nil) {
		return
	}
	var gone []string
	lost := 0
	for id, st := range s.services {
		if id.registry == registry && strings.HasPrefix(id.name, scope) && !listed[id.name] {
			if r.guard != nil && r.guard.keys[id.name] {
				continue
			}
			gone = append(gone, id.name)
			lost += st.instances
		}
	}
	if lost <= p.DeleteGuardFloor || float64(lost) <= p.MaxDeleteRatio*float64(r.status.Instances) {
		return
	}
	slices.Sort(gone)
	if r.guard == nil {
		r.guard = &guard{since: now, keys: make(map[string]bool, len(gone)), instances: lost}
		name := r.cfg.Name
		if p.DeleteGuardTimeout > 0 {
			r.guard.timer = s.clock.AfterFunc(p.DeleteGuardTimeout, func() { go s.guardTimeout(name) })
		}
		deleteGuardHeld.WithLabelValues(registry).Set(1)
		deleteGuardEngaged.WithLabelValues(registry).Inc()
	} else {
		r.guard.instances += lost
	}
	for _, k := range gone {
		r.guard.keys[k] = true
	}
	r.status.DeleteGuard = r.guard.status()
	what := "a listing that would remove most of the registry"
	if removal {
		what = "the removal of the registry from the configuration"
	}
	s.log.Warn("Delete guard holds "+what+"; "+
		"confirm with POST /debug/registryz/"+registry+"/confirm, or it applies after outage.deleteGuardTimeout",
		"registry", registry, "services", len(gone), "instances", lost, "registryInstances", r.status.Instances,
		"maxDeleteRatio", p.MaxDeleteRatio, "timeout", p.DeleteGuardTimeout, "first", gone[0])
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
	if r := s.regs[registry]; r != nil && r.guard != nil {
		s.applyGuard(r, "outage.deleteGuardTimeout passed")
	}
}

// ConfirmDeletes applies the removals the registry's delete guard holds and
// releases it; it returns how many services were removed, and an error when
// the registry is unknown or its guard holds nothing.
func (s *Syncer) ConfirmDeletes(registry string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs[registry]
	switch {
	case r == nil:
		return 0, fmt.Errorf("no registry %q", registry)
	case r.guard == nil:
		return 0, fmt.Errorf("registry %q: the delete guard holds nothing", registry)
	}
	n := len(r.guard.keys)
	s.applyGuard(r, "confirmed by an operator")
	return n, nil
}

// applyGuard removes every service the guard holds and releases it. s.mu is
// held.
func (s *Syncer) applyGuard(r *registryState, why string) {
	g := r.guard
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range g.keys {
			if !yield(k) {
				return
			}
		}
	})
	s.releaseGuard(r, why)
	for _, k := range keys {
		id := serviceID{order: r.order, registry: r.cfg.Name, name: k}
		s.cancelHoldDown(r, k)
		delete(r.stale, k)
		s.remove(r, id)
	}
	s.markDirty(r)
	s.noteRegistry(r)
	if r.removed {
		s.forget(r)
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
func (r *registryState) guarded(key string) bool { return r.guard != nil && r.guard.keys[key] }

// holdDown delays a disappearance (rule 6): the first one starts the clock,
// a later one replaces what will be applied. s.mu is held.
func (s *Syncer) holdDown(r *registryState, id serviceID, snap registries.Snapshot) {
	if h := r.holding[id.name]; h != nil {
		h.snap = snap
		return
	}
	name := r.cfg.Name
	r.holding[id.name] = &heldDown{snap: snap, timer: s.clock.AfterFunc(r.cfg.Policy.HoldDown, func() {
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
	r := s.regs[registry]
	if r == nil {
		return
	}
	h := r.holding[id.name]
	if h == nil {
		return
	}
	delete(r.holding, id.name)
	r.status.HeldDown = len(r.holding)
	if r.guarded(id.name) {
		return // the guard decides
	}
	s.log.Info("Applied a disappearance after its hold-down", "registry", registry, "service", h.snap.Service.Name,
		"removed", h.snap.Removed)
	s.applySnapshot(r, id, h.snap)
	s.noteRegistry(r)
}

// cancelHoldDown drops a held disappearance of key. s.mu is held.
func (s *Syncer) cancelHoldDown(r *registryState, key string) {
	if h := r.holding[key]; h != nil {
		h.timer.Stop()
		delete(r.holding, key)
		r.status.HeldDown = len(r.holding)
	}
}

// disappears reports whether snap takes instances away from a service that
// serves some: it is Removed or lists none.
func (s *Syncer) disappears(id serviceID, snap registries.Snapshot) bool {
	st := s.services[id]
	return st != nil && st.instances > 0 && (snap.Removed || len(snap.Service.Instances) == 0)
}

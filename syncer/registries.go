package syncer

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/meshbridge/meshbridge/registries"
)

// registrySet is the Syncer's registries and their configuration order
// (rule 1). Guarded by Syncer.mu.
type registrySet struct {
	byName map[string]*registryState
	// rank is each configured registry's position in the configuration;
	// a registry that is not configured (removed, its services held by the
	// delete guard) ranks after every configured one.
	rank map[string]int
	// gone are registries removed with nothing of them left.
	gone map[string]bool
}

func newRegistrySet() registrySet {
	return registrySet{byName: map[string]*registryState{}, rank: map[string]int{}, gone: map[string]bool{}}
}

// rankOf is name's position in the configuration order.
func (rs *registrySet) rankOf(name string) int {
	if i, ok := rs.rank[name]; ok {
		return i
	}
	return len(rs.rank)
}

// setOrder makes names the configuration order.
func (rs *registrySet) setOrder(names []string) {
	clear(rs.rank)
	for i, n := range names {
		rs.rank[n] = i
	}
}

// ordered returns the registries in configuration order, those not
// configured last, by name.
func (rs *registrySet) ordered() []*registryState {
	out := slices.Collect(maps.Values(rs.byName))
	slices.SortFunc(out, func(a, b *registryState) int {
		return compareClaimants(claimant{rank: rs.rankOf(a.cfg.Name), registry: a.cfg.Name},
			claimant{rank: rs.rankOf(b.cfg.Name), registry: b.cfg.Name})
	})
	return out
}

type registryState struct {
	cfg    Registry
	status RegistryStatus
	stale  map[registries.ServiceKey]bool // services whose last read failed: served from last-known-good
	// down are the listing scopes whose last listing failed (a
	// registry-wide read error, Snapshot.Scope; the zero Scope the whole
	// registry): a scope's next listing ends its error, a listing of the
	// whole registry or any successful read of a service ends them all.
	down map[registries.Scope]bool
	// guard is the engaged delete guard, nil when none; holding the
	// disappearances waiting for their hold-down, by service key.
	guard   *guard
	holding map[registries.ServiceKey]*heldDown
	// disk is the persisted listing read at start, by key, until served or
	// synced, less what the registry removed meanwhile; fromDisk the
	// services served from it and not read since; dirty whether the
	// listing changed since it was last persisted.
	disk     map[registries.ServiceKey]registries.Service
	fromDisk map[registries.ServiceKey]bool
	dirty    bool
	// pending: counted in Syncer.pending until Synced. removed: removed
	// from the configuration, kept while the delete guard holds its
	// services. restarted: restarted with a new configuration and not
	// synced since; it serves what the previous run listed.
	pending   bool
	removed   bool
	restarted bool
}

func newRegistryState(cfg Registry) *registryState {
	// Its counter exists from the start at 0, so that an alert on its
	// increase sees the first engagement.
	deleteGuardEngaged.WithLabelValues(cfg.Name)
	return &registryState{cfg: cfg, status: RegistryStatus{Name: cfg.Name, Type: cfg.Type},
		stale: make(map[registries.ServiceKey]bool), holding: make(map[registries.ServiceKey]*heldDown)}
}

// SetOrder makes names the configuration order of the registries (rule 1),
// those added later included; a registry it does not name ranks after
// every one it does. Hosts whose claimants it reorders are re-decided at
// once. The pipeline calls it on a reload before adding registries.
func (s *Syncer) SetOrder(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs.setOrder(names)
	s.reorder()
}

// AddRegistry adds a registry while the Syncer runs (configuration reload),
// or, when one of that name is there, restarts it with reg's configuration.
// Its place in rule 1's order is the one SetOrder gave its name (a name it
// did not give ranks last).
//
// Added before HasSynced, it is waited for like the configured ones; added
// after, it is not: the mesh is already served, and its services join as
// they are read.
//
// A restart keeps the registry's services and their sticky ports: the new
// watcher's Reporter starts from them (Serving, registries.Reporter rule
// 8), its snapshots replace them, and its listings remove those it no
// longer lists, through the delete guard (rule 5). Until it reports Synced
// RegistrySynced is false, so no consumer takes an absence for a removal.
// The caller stops the old watcher before and starts the new one after
// AddRegistry.
func (s *Syncer) AddRegistry(reg Registry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.regs.byName[reg.Name]; r != nil {
		s.restart(r, reg)
		return
	}
	delete(s.regs.gone, reg.Name)
	r := newRegistryState(reg)
	s.regs.byName[reg.Name] = r
	if !s.HasSynced() {
		r.pending = true
		s.pending++
	}
	s.noteRegistry(r)
	s.log.Info("Registry added", "registry", reg.Name, "type", reg.Type)
}

// restart replaces r's configuration; the new run starts from what r serves (Serving). s.mu is held.
func (s *Syncer) restart(r *registryState, reg Registry) {
	was := r.removed
	r.cfg, r.removed = reg, false
	r.status.Type, r.status.Removed = reg.Type, false
	for k := range r.holding {
		s.cancelHoldDown(r, k) // read by the old watcher
	}
	r.restarted = true
	r.status.Synced = false
	if !s.HasSynced() && !r.pending {
		r.pending = true
		s.pending++
	}
	s.noteRegistry(r)
	if was {
		s.log.Info("Registry added back while the delete guard held its removal", "registry", reg.Name,
			"services", r.status.Services)
		return
	}
	s.log.Info("Registry restarted with a new configuration", "registry", reg.Name, "type", reg.Type,
		"services", r.status.Services)
}

// RemoveRegistry removes a registry while the Syncer runs (configuration
// reload); the caller has stopped its watcher. Its services leave the store
// as a listing that lists nothing would remove them: at once, unless that
// engages the delete guard (rule 5), which then holds them until an
// operator confirms (ConfirmDeletes) or outage.deleteGuardTimeout passes;
// the registry is shown (Status, Removed) until they are gone. Hosts it
// shared with other registries are re-decided (rule 1); nothing of another
// registry is removed. Once gone, RegistrySynced reports true for its name:
// its absence from the store is authoritative. Unknown names are ignored.
func (s *Syncer) RemoveRegistry(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs.byName[name]
	if r == nil {
		return
	}
	for k := range r.holding {
		s.cancelHoldDown(r, k)
	}
	if r.pending {
		r.pending = false
		s.pending--
		if s.pending == 0 {
			s.markReady()
		}
	}
	r.removed, r.status.Removed = true, true
	r.restarted = false
	// Judged like a complete listing of nothing: the guard's ratio and
	// floor apply to the whole registry.
	s.judge(r, registries.Scope{}, nil, s.servedKeys(name), s.clock.Now(), true)
	var keys []registries.ServiceKey
	for _, k := range s.servedKeys(name) {
		if !r.guarded(k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		delete(r.stale, k)
		s.remove(r, serviceID{registry: name, key: k})
	}
	s.log.Info("Registry removed", "registry", name, "services", len(keys), "held", r.guard != nil)
	if r.guard == nil {
		s.forget(r)
		return
	}
	s.noteRegistry(r)
}

// forget drops a removed registry once nothing of it is left. s.mu is held.
func (s *Syncer) forget(r *registryState) {
	name := r.cfg.Name
	delete(s.regs.byName, name)
	s.regs.gone[name] = true
	for _, g := range []interface{ DeleteLabelValues(...string) bool }{registryServices, registryInstances,
		registryServedInstances, registryLastSync, registryStale, deleteGuardHeld} {
		g.DeleteLabelValues(name)
	}
	if s.stateDir != "" {
		if err := os.Remove(s.statePath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("Could not remove a removed registry's persisted listing", "registry", name, "err", err)
		}
	}
	s.log.Info("Registry gone: nothing of it is served", "registry", name)
}

// servedKeys returns the keys of the registry's services the Syncer holds,
// sorted. s.mu is held.
func (s *Syncer) servedKeys(registry string) []registries.ServiceKey {
	var keys []registries.ServiceKey
	for id := range s.services {
		if id.registry == registry {
			keys = append(keys, id.key)
		}
	}
	slices.SortFunc(keys, registries.ServiceKey.Compare)
	return keys
}

// Serving implements registries.Sink: the services the Syncer serves for
// the registry and those of its persisted listing not served yet, which
// the registry's new run starts from (registries.Reporter rule 8).
func (s *Syncer) Serving(registry string) []registries.ServiceKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.servedKeys(registry)
	if r := s.regs.byName[registry]; r != nil {
		for k := range r.disk {
			if s.services[serviceID{registry: registry, key: k}] == nil {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, registries.ServiceKey.Compare)
	return keys
}

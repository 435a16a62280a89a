package syncer

import "time"

// RegistryStatus is one registry's state as the sync step sees it, shown on
// /debug/registryz.
type RegistryStatus struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Synced: the registry delivered its first complete listing.
	Synced    bool      `json:"synced"`
	LastEvent time.Time `json:"lastEvent,omitzero"`
	// Services and Instances are what the registry lists (instances before
	// translation rejects any); ServedInstances what the store holds of them.
	Services        int `json:"services"`
	Instances       int `json:"instances"`
	ServedInstances int `json:"servedInstances"`
	// StaleServices are services whose last read failed: they are served
	// from their last-known-good state.
	StaleServices int `json:"staleServices"`
	// Errors counts snapshots that carried a read error; LastError is the
	// last one's and LastErrorTime when it was observed.
	Errors        int       `json:"errors"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
	// LastListing is when the registry last reported a complete read
	// (registries.Sink.Listing).
	LastListing time.Time `json:"lastListing,omitzero"`
	// Stale is true while anything of the registry is served from
	// last-known-good state or from disk (meshbridge_registry_stale).
	Stale bool `json:"stale"`
	// FromDisk is true while the registry is served from its persisted
	// listing (Config.StateDir), until it answers.
	FromDisk bool `json:"fromDisk,omitempty"`
	// HeldDown counts disappearances waiting for their hold-down;
	// DeleteGuard is the engaged delete guard, nil when none.
	HeldDown    int                `json:"heldDown,omitempty"`
	DeleteGuard *DeleteGuardStatus `json:"deleteGuard,omitempty"`
	// Removed is true for a registry removed from the configuration whose
	// services the delete guard still holds.
	Removed bool `json:"removed,omitempty"`
}

// DeleteGuardStatus is an engaged delete guard: since when, and the
// services (and their instances when it engaged) whose removal it holds.
type DeleteGuardStatus struct {
	Since     time.Time `json:"since"`
	Services  int       `json:"services"`
	Instances int       `json:"instances"`
}

// Status returns every registry's status, in configuration order (removed
// registries whose services the delete guard holds last).
func (s *Syncer) Status() []RegistryStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	regs := s.regs.ordered()
	out := make([]RegistryStatus, 0, len(regs))
	for _, r := range regs {
		st := r.status
		if st.DeleteGuard != nil {
			g := *st.DeleteGuard
			st.DeleteGuard = &g
		}
		out = append(out, st)
	}
	return out
}

// RegistrySynced reports whether the named registry has delivered its first
// complete listing. A consumer that deletes what the store no longer holds
// (the Kubernetes writer's garbage collection) must not act for a registry
// that has not synced: its absence from the store means "not known yet",
// not "gone" (docs/design.md §8). An unknown name reports false, the name of
// a registry removed at run time (RemoveRegistry) with nothing left true.
func (s *Syncer) RegistrySynced(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs.byName[name]
	return (r != nil && r.status.Synced) || (r == nil && s.regs.gone[name])
}

package consul

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
)

// service is the emission state of one listed service. Exactly one reader
// owns it at a time (its own watch goroutine or the state/any loop); owner
// changes on every hand-over, so a reader that lost the service drops what it
// read instead of emitting it after the new owner's fresher read.
type service struct {
	name string

	mu        sync.Mutex // serializes emission: the Sink sees one call at a time per service
	owner     uint64
	removed   bool
	emitted   bool                  // any snapshot sent
	hasLast   bool                  // last holds an authoritative list
	last      []registries.Instance // sorted by ID; read-only once sent
	failing   bool                  // the last snapshot sent was an error
	nodes     map[string]bool       // nodes of the last read, for state/any fingerprints
	checkless bool                  // the last read found no service-level checks
}

// takeOwnership makes a new reader the owner and returns its token.
func (s *service) takeOwnership() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owner++
	return s.owner
}

// readNodes returns the nodes seen by the last successful read.
func (s *service) readNodes() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes
}

// apply emits what owner read unless it equals the last list sent. A read
// following an error is always emitted, so the consumer sees the recovery.
//
// relist marks a read right after an index reset; a read after a failed one
// is marked too (registries.Snapshot.Relist).
func (w *watcher) apply(s *service, owner uint64, entries []*api.ServiceEntry, observed time.Time, relist bool) {
	instances := instancesFrom(entries, w.cfg.HealthyOnly, w.cfg.Datacenter)
	s.mu.Lock()
	if s.owner != owner || s.removed {
		s.mu.Unlock()
		return
	}
	s.nodes = nodesOf(entries)
	s.checkless = !hasServiceChecks(entries)
	unchanged := s.hasLast && !s.failing && sameInstances(s.last, instances)
	if !unchanged {
		dServices, dInstances := 0, len(instances)-len(s.last)
		if !s.hasLast {
			dServices = 1
		}
		relist = relist || s.failing
		// Kept as s.last and by the sync step: equal label maps share one.
		instances = registries.Compact(instances)
		s.last, s.hasLast, s.failing, s.emitted = instances, true, false, true
		w.sink.Snapshot(registries.Snapshot{
			Registry: w.cfg.Name,
			Service:  w.serviceOf(s.name, instances),
			Observed: observed,
			Relist:   relist,
		})
		w.reg.noteCounts(dServices, dInstances)
		w.logger.Debug("Emitted Consul service", "service", s.name, "count", len(instances))
	}
	s.mu.Unlock()
	w.markRead(s.name)
}

func hasServiceChecks(entries []*api.ServiceEntry) bool {
	for _, e := range entries {
		for _, c := range e.Checks {
			if c.ServiceID != "" {
				return true
			}
		}
	}
	return false
}

// failRead records a failed read of s by owner (registry health) and emits
// its error snapshot; nothing when owner no longer owns s.
func (w *watcher) failRead(s *service, owner uint64, err error, observed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != owner || s.removed {
		return
	}
	w.failLocked(s, w.reg.noteFailure(reasonHealth, s.name, err), observed)
}

// fail emits an error snapshot for s after a failed registry-wide read
// (already recorded); nothing when owner no longer owns s.
func (w *watcher) fail(s *service, owner uint64, err error, observed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != owner || s.removed {
		return
	}
	w.failLocked(s, err, observed)
}

// failLocked emits an error snapshot for s, once per run of failures: the
// consumer keeps the last-known-good instances (a failed read is never an
// empty list). s.mu is held.
func (w *watcher) failLocked(s *service, err error, observed time.Time) {
	if s.failing {
		return
	}
	s.failing, s.emitted = true, true
	w.sink.Snapshot(registries.Snapshot{
		Registry: w.cfg.Name,
		Service:  w.serviceOf(s.name, nil),
		Err:      fmt.Errorf("read Consul service %q: %w", s.name, err),
		Observed: observed,
	})
}

// remove emits the authoritative deletion of s, if anything was sent for it,
// and stops every reader from emitting it again; relist marks a deletion
// found by a listing right after an index reset or a failed listing.
func (w *watcher) remove(s *service, observed time.Time, relist bool) {
	s.mu.Lock()
	s.removed = true
	s.owner++
	if s.emitted {
		w.sink.Snapshot(registries.Snapshot{
			Registry: w.cfg.Name,
			Service:  w.serviceOf(s.name, nil),
			Removed:  true,
			Observed: observed,
			Relist:   relist,
		})
	}
	if s.hasLast {
		w.reg.noteCounts(-1, -len(s.last))
	}
	w.reg.forgetReader(serviceReader(s.name))
	s.mu.Unlock()
	w.logger.Debug("Removed Consul service", "service", s.name)
	w.markRead(s.name)
}

func (w *watcher) serviceOf(name string, instances []registries.Instance) registries.Service {
	return registries.Service{Name: name, Datacenter: w.remoteDC, Instances: instances}
}

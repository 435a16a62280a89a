package consul

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
)

// service is one listed service. Exactly one reader owns it at a time (its
// own watch goroutine or the poll loops); owner changes on every hand-over,
// so a reader that lost the service drops what it read instead of reporting
// it after the new owner's fresher read. What is sent is the Reporter's
// (registries.Reporter); a service the listing dropped is dropped there too.
type service struct {
	name string

	mu      sync.Mutex // orders a reader's report with the owner changes
	owner   uint64
	stopped bool
	// readMu serializes the poll loops' reads of the service (read, then
	// report), so that the last reported is the newest.
	readMu sync.Mutex
}

// takeOwnership makes a new reader the owner and returns its token.
func (s *service) takeOwnership() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owner++
	return s.owner
}

// stop ends every reader's reports: the service left the listing.
func (s *service) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.owner++
}

// apply reports what owner read, unless owner no longer owns s. relist
// marks a read right after its own query's index went backwards
// (registries.Snapshot.Relist).
func (w *watcher) apply(s *service, owner uint64, entries []*api.ServiceEntry, observed time.Time, relist bool) {
	instances := instancesFrom(entries, w.cfg.HealthyOnly, w.cfg.Datacenter)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != owner || s.stopped {
		return
	}
	svc := w.serviceOf(s.name, instances)
	if relist {
		w.session.MarkRelist(svc.Key())
	}
	w.session.Read(svc, observed)
}

// failRead records a failed read of s by owner (registry health) and
// reports it; nothing when owner no longer owns s.
func (w *watcher) failRead(s *service, owner uint64, err error, observed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != owner || s.stopped {
		return
	}
	w.failLocked(s, w.noteFailure(reasonHealth, s.name, err), observed)
}

// fail reports a failed read of s after a failed registry-wide read
// (already recorded); nothing when owner no longer owns s.
func (w *watcher) fail(s *service, owner uint64, err error, observed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != owner || s.stopped {
		return
	}
	w.failLocked(s, err, observed)
}

// failLocked reports a failed read of s; the Reporter sends one error
// snapshot per run of failures, and the consumer keeps the last-known-good
// instances (a failed read is never an empty list). s.mu is held.
func (w *watcher) failLocked(s *service, err error, observed time.Time) {
	w.session.Fail(w.serviceOf(s.name, nil), fmt.Errorf("read Consul service %q: %w", s.name, err), observed)
}

func (w *watcher) serviceOf(name string, instances []registries.Instance) registries.Service {
	return registries.Service{Name: name, Datacenter: w.remoteDC, Instances: instances}
}

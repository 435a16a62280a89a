package registries

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Session is a registry's one contract with the bridge for one run of its
// watcher: what the watcher observes of services and listings goes to the
// Sink through the embedded Reporter (its rules), and how its reads fare goes
// to the registry's Health, through the Session only. A watcher never calls
// Health; it names the reader whose read failed or succeeded, and the
// Session applies the per-reader rule:
//
//  1. A failed read (ReadFailed) takes the registry down at once (Health
//     logs it once per outage and counts every failure).
//  2. The registry is up again (Health.OK) only when no reader's last read
//     failed: a read that succeeds says nothing about the others, and a
//     stopping server answers some requests while it fails others, so
//     reporting every success would log the registry up and down several
//     times in one outage.
//  3. A reader that stopped for good (its service left the listing) is
//     forgotten (ForgetReader): it cannot keep the registry down.
//  4. A failing reader that gets through closes the channel Recovery
//     returned, and a new one replaces it: the other failing readers, which
//     wait on it with their backoff, retry at once, so the registry catches
//     up within one round trip of the server's return rather than after the
//     longest backoff.
//
// A reader is any stable name of one loop or one service's read ("catalog",
// "service/web"); a registry with one reader names it once.
//
// Concurrency: every method is safe for concurrent use.
type Session struct {
	*Reporter
	health *Health

	mu        sync.Mutex
	failing   map[string]bool // readers whose last read failed
	recovered chan struct{}
}

// NewSession returns the Session of one run of the registry whose Health is
// h: its Reporter is built from cfg, with cfg.Sink tracked by h (Health.track:
// once the run delivered its first complete listing, a failed read serves
// the last-known-good state).
func NewSession(h *Health, cfg ReporterConfig) *Session {
	cfg.Sink = h.track(cfg.Sink)
	return &Session{Reporter: NewReporter(cfg), health: h, failing: map[string]bool{}, recovered: make(chan struct{})}
}

// ReadFailed records that reader's read failed: reason is the
// meshbridge_registry_errors_total label, err the cause, with every secret
// already redacted (Health logs it). It sends nothing to the Sink: the
// caller reports what the failed read means for the services (Reporter.Fail,
// FailListing, Down, or ListingFailed, which does both).
func (s *Session) ReadFailed(reader, reason string, err error) {
	s.ReadFailedSince(reader, reason, err, time.Time{})
}

// ReadFailedSince is ReadFailed for a failure known to have started at since
// (Health.FailSince: a probe left unanswered, Liveness).
func (s *Session) ReadFailedSince(reader, reason string, err error, since time.Time) {
	s.mu.Lock()
	s.failing[reader] = true
	s.mu.Unlock()
	s.health.FailSince(reason, err, since)
}

// ListingFailed records that reader's listing of scope failed (ReadFailed)
// and reports it (Reporter.FailListing): one registry-wide error per run of
// the same error, the last-known-good state kept.
func (s *Session) ListingFailed(reader, reason string, scope Scope, err error, observed time.Time) {
	s.ReadFailed(reader, reason, err)
	s.FailListing(scope, err, observed)
}

// ReadOK records that reader's read succeeded (rules 2 and 4).
func (s *Session) ReadOK(reader string) {
	s.mu.Lock()
	recovered := s.failing[reader]
	delete(s.failing, reader)
	up := len(s.failing) == 0
	if recovered && !up {
		close(s.recovered)
		s.recovered = make(chan struct{})
	}
	s.mu.Unlock()
	if up {
		s.health.OK()
	}
}

// ForgetReader drops a reader that stopped for good from the failing ones
// (rule 3). It does not bring the registry up: the next successful read
// does.
func (s *Session) ForgetReader(reader string) {
	s.mu.Lock()
	delete(s.failing, reader)
	s.mu.Unlock()
}

// Health returns the registry's read health with the readers failing now
// (HealthStatus.Failing); a nil Session (a registry not running yet) has
// none to add to h's.
func (s *Session) Health(h *Health) HealthStatus {
	st := h.Status()
	if s == nil {
		return st
	}
	s.mu.Lock()
	st.Failing = slices.Sorted(maps.Keys(s.failing))
	s.mu.Unlock()
	return st
}

// Recovery returns a channel closed when a failing reader next gets through
// (rule 4). A reader takes it before each read and waits on it with its
// backoff after a failure.
func (s *Session) Recovery() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recovered
}

package registries

import (
	"cmp"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrEmptyAfterReconnect is the error a Reporter sends instead of an empty
// instance list read within its ReconnectGrace of an outage or a
// reconnection, for a service that had instances (rule 6 of Reporter).
var ErrEmptyAfterReconnect = errors.New("the registry answered an empty instance list right after an outage or a reconnection; " +
	"keeping the last-known-good instances while clients re-register")

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	// Registry is the registry's name, set on every Snapshot.
	Registry string
	// Sink receives what the Reporter decides to send.
	Sink Sink
	// Scopes are the listing scopes (Sink.Listing) whose first listing
	// Synced waits for; nil means the zero Scope (the whole registry).
	Scopes []Scope
	// ReconnectGrace, when positive, is how long after an outage or a
	// reconnection of a scope an empty read, or a listing that omits a
	// service, is not trusted for a service that had instances (rule 6).
	// For registries whose server forgets ephemeral instances until their
	// clients re-register (Nacos); 0 turns the rule off.
	ReconnectGrace time.Duration
	// Logger gets one debug line per snapshot sent; nil is slog.Default.
	Logger *slog.Logger
}

// ReadOutcome is what a Reporter made of a read (Reporter.Read).
type ReadOutcome int

const (
	// ReadDropped: no listing covers the service (never listed, or removed
	// by a listing since): nothing was sent.
	ReadDropped ReadOutcome = iota
	// ReadUnchanged: the list equals the last one sent; nothing was sent.
	ReadUnchanged
	// ReadSent: the service's first list, or the first after an error, was
	// sent.
	ReadSent
	// ReadChanged: a list that differs from the last one sent, which was
	// still current, was sent.
	ReadChanged
	// ReadHeld: an empty list within ReconnectGrace of trouble was sent as
	// an ErrEmptyAfterReconnect error instead (rule 6).
	ReadHeld
)

// Reporter is the one caller of a registry's Sink. A registry's watchers
// feed it what they observe — a service read or not read, a listing of the
// services or a failed one, a reconnection — and it decides what the Sink
// hears, so that the Sink contract holds by construction, the same way for
// every registry (registries rules 1-3; registrytest.Recorder checks it):
//
//  1. A read (Read) is sent when it is the service's first, follows an
//     error, or differs from the last list sent (instances in any order;
//     the service's own fields too); otherwise nothing is sent. Consul's
//     api/watch/plan.go likewise skips deep-equal results.
//  2. A failed read (Fail) is sent once per run of failures of its service:
//     the consumer keeps the last-known-good list; a failure is never an
//     empty list. A failed listing (FailListing, Down) sends one
//     registry-wide error (empty Service.Name) per run of failures of the
//     same text within its scope; a different error is sent again.
//  3. A complete listing (Listing) goes to the Sink before the removals it
//     brings: every service the Reporter holds within its scope and the
//     listing omits is removed (Removed, when anything was sent for it), in
//     the same call, and the Listing names those removals. This is the one
//     place a registry's removals are computed. A partial listing
//     (PartialListing) removes nothing.
//  4. Only listed services are read: a read of a service no listing has
//     covered, or one a listing removed since, is dropped, so a reader that
//     lost a race with its service's removal cannot bring it back.
//  5. Re-list marks (Snapshot.Relist): after Reconnected or a failure of a
//     scope, the next read of each of its services and the removals of its
//     next listing are marked; after a service's failed read (Fail) or
//     MarkRelist, its next read.
//  6. With ReconnectGrace set: within ReconnectGrace of a scope's last
//     trouble (Down, FailListing or Reconnected), a service whose last list
//     had instances keeps them: an empty read is sent as
//     ErrEmptyAfterReconnect, and a listing that omits the service keeps
//     it (listed to the Sink as present). This covers every read, whichever
//     path it came by (a server push, a subscription's answer, a query), and
//     counts from the last sign of trouble, so a push that arrives right
//     after a hung server answers again is not trusted either.
//  7. Synced is called once, when every scope (ReporterConfig.Scopes) has
//     had its first listing and each service of those first listings has
//     been read (Read, not held) or removed.
//  8. The Reporter owns what the registry lists, including what an earlier
//     run listed: it starts from the services the Sink holds for the
//     registry (Sink.Serving: a previous run's, a persisted listing's).
//     Such a service counts as listed for removals only: a listing of its
//     scope that omits it removes it (rule 3); one that holds it makes it
//     this run's; a read, Down or Reconnected does not touch it before.
//     Those of a scope no configured scope holds (the configuration no
//     longer reads it) are removed just before Synced, by a listing of
//     their scope that holds nothing of them.
//
// Concurrency: every method is safe for concurrent use. Sink calls are
// serialized and made in the order of the calls that cause them; the Sink
// must not call the Reporter.
type Reporter struct {
	cfg ReporterConfig
	log *slog.Logger

	mu       sync.Mutex
	services map[ServiceKey]*reported // the listed services
	scopes   map[Scope]*scopeState
	// pendingScopes and pendingReads count what Synced still waits for;
	// synced is set once it was called.
	pendingScopes, pendingReads int
	synced                      bool
	instances                   int // over every service's last list
	sent                        int // services with a list sent
}

// reported is what the Reporter holds of one listed service.
type reported struct {
	scope *scopeState
	id    Service // the service as last read (or failed), Instances nil
	last  []Instance
	// hasLast: last is the authoritative list sent; failing: the last
	// snapshot sent was an error; emitted: anything was sent.
	hasLast, failing, emitted bool
	relist                    bool // the next read or removal is marked Relist
	held                      bool // the last read was an empty one held back (rule 6)
	pending                   bool // Synced waits for its first read
	// carried: an earlier run listed it and no listing of this run has yet
	// (rule 8).
	carried bool
}

// scopeState is one listing scope.
type scopeState struct {
	scope   Scope
	listed  bool   // its first listing came
	failing string // the registry-wide error sent in the current run; "" none
	relist  bool   // its next listing's removals are marked Relist
	trouble time.Time
}

// NewReporter returns the Reporter of one registry run.
func NewReporter(cfg ReporterConfig) *Reporter {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []Scope{{}}
	}
	r := &Reporter{cfg: cfg, log: cfg.Logger, services: map[ServiceKey]*reported{}, scopes: map[Scope]*scopeState{}}
	for _, s := range cfg.Scopes {
		if _, ok := r.scopes[s]; !ok {
			r.scopes[s] = &scopeState{scope: s}
			r.pendingScopes++
		}
	}
	for _, k := range cfg.Sink.Serving(cfg.Registry) {
		if r.services[k] == nil {
			r.services[k] = &reported{scope: r.scopeOfLocked(k), emitted: true, carried: true}
		}
	}
	return r
}

// scopeOfLocked returns the configured scope that holds k, or else k's own
// namespace and group as a scope of its own (rule 8). r.mu is held or r
// not shared yet.
func (r *Reporter) scopeOfLocked(k ServiceKey) *scopeState {
	for _, s := range r.cfg.Scopes {
		if s.Holds(k) {
			return r.scopes[s]
		}
	}
	return r.scopeLocked(ScopeOf(k.Namespace, k.Group))
}

// scopeLocked returns the scope called name, adding one Synced does not
// wait for when it is not configured. r.mu is held.
func (r *Reporter) scopeLocked(scope Scope) *scopeState {
	sc := r.scopes[scope]
	if sc == nil {
		sc = &scopeState{scope: scope, listed: true}
		r.scopes[scope] = sc
	}
	return sc
}

// Read reports an authoritative read of svc (its Instances, in any order)
// observed at observed, and sends it by rules 1, 4, 5 and 6.
func (r *Reporter) Read(svc Service, observed time.Time) ReadOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := svc.Key()
	s := r.services[key]
	if s == nil || s.carried {
		r.log.Debug("Dropped a read of a service no listing holds", "service", key)
		return ReadDropped
	}
	if len(svc.Instances) == 0 && r.untrustedLocked(s, observed) {
		s.held = true
		r.failLocked(s, svc, ErrEmptyAfterReconnect, observed)
		return ReadHeld
	}
	s.held = false
	outcome := ReadUnchanged
	switch {
	case !s.hasLast || s.failing:
		outcome = ReadSent
	case !SameService(s.id, svc) || !SameInstances(s.last, svc.Instances):
		outcome = ReadChanged
	}
	if outcome != ReadUnchanged {
		// Kept as last and by the sync step: equal label maps share one.
		svc.Instances = Compact(svc.Instances)
		if !s.hasLast {
			r.sent++
		}
		r.instances += len(svc.Instances) - len(s.last)
		s.last, s.hasLast, s.failing, s.emitted = svc.Instances, true, false, true
		s.id = svc
		s.id.Instances = nil
		r.cfg.Sink.Snapshot(Snapshot{Registry: r.cfg.Registry, Service: svc, Observed: observed, Relist: s.relist})
		r.log.Debug("Sent service", "service", key, "count", len(svc.Instances), "relist", s.relist)
	}
	s.relist = false
	r.readLocked(s)
	return outcome
}

// untrustedLocked reports whether an empty read of s at observed falls
// under rule 6. r.mu is held.
func (r *Reporter) untrustedLocked(s *reported, observed time.Time) bool {
	return r.cfg.ReconnectGrace > 0 && s.hasLast && len(s.last) > 0 && !s.scope.trouble.IsZero() &&
		observed.Before(s.scope.trouble.Add(r.cfg.ReconnectGrace))
}

// Fail reports a failed read of svc (its identity; Instances are ignored),
// sent by rule 2 and marking its next read (rule 5).
func (r *Reporter) Fail(svc Service, err error, observed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.services[svc.Key()]
	if s == nil || s.carried {
		return
	}
	s.held = false
	r.failLocked(s, svc, err, observed)
}

// failLocked sends s's error snapshot unless its last snapshot was one.
// r.mu is held.
func (r *Reporter) failLocked(s *reported, svc Service, err error, observed time.Time) {
	s.relist = true
	if s.failing {
		return
	}
	if !s.hasLast {
		s.id = svc
		s.id.Instances = nil
	}
	s.failing, s.emitted = true, true
	r.cfg.Sink.Snapshot(Snapshot{Registry: r.cfg.Registry, Service: s.id, Err: err, Observed: observed})
	r.log.Debug("Sent a failed read", "service", s.id.Key(), "err", err)
}

// Listing reports a complete listing of scope (as for Sink.Listing): the
// Sink gets it, then the removal of every service of the scope the listing
// omits (rules 3, 5, 6, 8). It returns the keys removed that this run had
// listed, which the registry stops following.
func (r *Reporter) Listing(scope Scope, keys []ServiceKey, observed time.Time) (removed []ServiceKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.scopeLocked(scope)
	keys = slices.Clip(keys) // the services kept by rule 6 are appended: never into the caller's array
	listed := make(map[ServiceKey]bool, len(keys))
	for _, k := range keys {
		listed[k] = true
	}
	var goneKeys []ServiceKey
	for k, s := range r.services {
		if s.scope != sc || listed[k] {
			continue
		}
		if r.untrustedLocked(s, observed) {
			keys = append(keys, k)
			continue
		}
		goneKeys = append(goneKeys, k)
	}
	r.addLocked(sc, keys)
	removed = r.removeAllLocked(sc, keys, goneKeys, observed, true)
	sc.relist = false
	sc.failing = ""
	r.checkSyncedLocked()
	return removed
}

// removeAllLocked sends the listing of sc that holds keys and removes
// gone, the services of sc it omits (rule 3): the Listing names those
// removed that anything was sent for, then each is sent, in key order. It
// returns the removed keys this run had listed (not carried, rule 8).
// marked: the removals carry the re-list marks (rule 5). r.mu is held.
func (r *Reporter) removeAllLocked(sc *scopeState, keys, gone []ServiceKey, observed time.Time, marked bool) []ServiceKey {
	slices.SortFunc(gone, ServiceKey.Compare)
	var named, followed []ServiceKey
	for _, k := range gone {
		s := r.services[k]
		if s.emitted {
			named = append(named, k)
		}
		if !s.carried {
			followed = append(followed, k)
		}
	}
	r.cfg.Sink.Listing(r.cfg.Registry, sc.scope, keys, named)
	for _, k := range gone {
		s := r.services[k]
		r.removeLocked(k, s, observed, marked && (sc.relist || s.relist))
	}
	return followed
}

// PartialListing reports a listing of scope known to be incomplete: it
// adds the services it holds and removes none; the Sink does not get it
// (Sink.Listing is for complete reads).
func (r *Reporter) PartialListing(scope Scope, keys []ServiceKey, observed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.scopeLocked(scope)
	r.addLocked(sc, keys)
	sc.failing = ""
	r.checkSyncedLocked()
}

// addLocked adds the services of a listing of sc; the scope's first
// listing makes Synced wait for them. r.mu is held.
func (r *Reporter) addLocked(sc *scopeState, keys []ServiceKey) {
	first := !sc.listed
	if first {
		sc.listed = true
		r.pendingScopes--
	}
	for _, k := range keys {
		if !sc.scope.Holds(k) {
			r.log.Error("Ignored a listed service outside its listing's scope", "service", k, "scope", sc.scope)
			continue
		}
		s := r.services[k]
		if s == nil {
			s = &reported{scope: sc, relist: sc.relist}
			r.services[k] = s
		}
		if s.carried {
			// This run lists it: from now on it is this run's (rule 8),
			// its first read sent whatever was sent before.
			*s = reported{scope: sc, relist: sc.relist, emitted: true}
		}
		if first && !r.synced && !s.pending && !s.hasLast {
			s.pending = true
			r.pendingReads++
		}
	}
}

// Remove reports that the registry leaves out one listed service by a rule
// of its own (not a listing): the Sink gets the listing of its scope
// without it, then its removal (rule 3).
func (r *Reporter) Remove(key ServiceKey, observed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.services[key]
	if s == nil || s.carried {
		return
	}
	var keys []ServiceKey
	for k, o := range r.services {
		if o.scope == s.scope && k != key && !o.carried {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, ServiceKey.Compare)
	r.removeAllLocked(s.scope, keys, []ServiceKey{key}, observed, false)
	r.checkSyncedLocked()
}

// removeLocked forgets s, sending its removal when anything was sent for
// it. r.mu is held.
func (r *Reporter) removeLocked(key ServiceKey, s *reported, observed time.Time, relist bool) {
	delete(r.services, key)
	if s.hasLast {
		r.sent--
		r.instances -= len(s.last)
	}
	if s.pending {
		s.pending = false
		r.pendingReads--
	}
	if !s.emitted {
		return
	}
	id := s.id
	if id.Name == "" {
		id = key.Service()
	}
	r.cfg.Sink.Snapshot(Snapshot{Registry: r.cfg.Registry, Service: id, Removed: true, Observed: observed, Relist: relist})
	r.log.Debug("Sent a removal", "service", key, "relist", relist)
}

// FailListing reports a failed listing of scope: one registry-wide error
// per run of the same failure (rule 2); the scope's next listing's removals
// are marked Relist, and it counts as trouble for rule 6. The services
// keep their state: their own reads are separate.
func (r *Reporter) FailListing(scope Scope, err error, observed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failListingLocked(r.scopeLocked(scope), err, observed)
}

func (r *Reporter) failListingLocked(sc *scopeState, err error, observed time.Time) {
	sc.relist = true
	if observed.After(sc.trouble) {
		sc.trouble = observed
	}
	if msg := err.Error(); msg != sc.failing {
		sc.failing = msg
		r.cfg.Sink.Snapshot(Snapshot{Registry: r.cfg.Registry, Err: err, Scope: sc.scope, Observed: observed})
		r.log.Debug("Sent a failed listing", "scope", sc.scope, "err", err)
	}
}

// Down reports that scope cannot be read at all (its connection is lost,
// its server does not answer): FailListing, and a failed read of each of
// its services (rule 2).
func (r *Reporter) Down(scope Scope, err error, observed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.scopeLocked(scope)
	r.failListingLocked(sc, err, observed)
	for _, k := range r.keysLocked(sc) {
		s := r.services[k]
		s.held = false
		r.failLocked(s, k.Service(), err, observed)
	}
}

// Reconnected reports that scope was read again after a (re)connection, a
// registry restart or an index reset, when the registry may still be
// filling in: the next read of each of its services and its next listing's
// removals are marked Relist (rule 5), and it counts as trouble for rule 6.
func (r *Reporter) Reconnected(scope Scope, observed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.scopeLocked(scope)
	sc.relist = true
	if observed.After(sc.trouble) {
		sc.trouble = observed
	}
	for _, s := range r.services {
		if s.scope == sc && !s.carried {
			s.relist = true
		}
	}
}

// MarkRelist marks the next read of one service Relist (rule 5): its own
// query's index went backwards.
func (r *Reporter) MarkRelist(key ServiceKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.services[key]; s != nil && !s.carried {
		s.relist = true
	}
}

// Held reports whether the service's last read was an empty one held back
// by rule 6: the registry should read it again soon.
func (r *Reporter) Held(key ServiceKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.services[key]
	return s != nil && s.held
}

// Listed reports whether a listing holds the service.
func (r *Reporter) Listed(key ServiceKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.services[key]
	return s != nil && !s.carried
}

// Counts returns how many services have a list sent and how many instances
// those lists hold.
func (r *Reporter) Counts() (services, instances int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent, r.instances
}

// keysLocked returns the keys of sc's services this run listed, sorted.
// r.mu is held.
func (r *Reporter) keysLocked(sc *scopeState) []ServiceKey {
	var keys []ServiceKey
	for k, s := range r.services {
		if s.scope == sc && !s.carried {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, ServiceKey.Compare)
	return keys
}

// readLocked notes a service's first read for Synced (rule 7). r.mu is
// held.
func (r *Reporter) readLocked(s *reported) {
	if s.pending {
		s.pending = false
		r.pendingReads--
	}
	r.checkSyncedLocked()
}

// checkSyncedLocked calls Synced once rule 7 holds. r.mu is held.
func (r *Reporter) checkSyncedLocked() {
	if r.synced || r.pendingScopes > 0 || r.pendingReads > 0 {
		return
	}
	r.synced = true
	r.removeCarriedLocked()
	r.cfg.Sink.Synced(r.cfg.Registry)
	r.log.Info("Synced registry services", "count", len(r.services))
}

// removeCarriedLocked removes, scope by scope, the services an earlier run
// listed that no listing of this run covered: their scopes are no longer
// read (rule 8). r.mu is held.
func (r *Reporter) removeCarriedLocked() {
	byScope := map[*scopeState][]ServiceKey{}
	for k, s := range r.services {
		if s.carried {
			byScope[s.scope] = append(byScope[s.scope], k)
		}
	}
	for _, sc := range slices.SortedFunc(maps.Keys(byScope), func(a, b *scopeState) int {
		return cmp.Or(strings.Compare(a.scope.Namespace, b.scope.Namespace), strings.Compare(a.scope.Group, b.scope.Group))
	}) {
		r.log.Info("Removing what an earlier run listed in a scope this run does not read",
			"scope", sc.scope, "services", len(byScope[sc]))
		r.removeAllLocked(sc, r.keysLocked(sc), byScope[sc], time.Now(), false)
	}
}

// Synced reports whether Synced was called.
func (r *Reporter) Synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

package syncer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// Registry is one configured registry as the Syncer sees it.
type Registry struct {
	Name       string
	Type       string
	Translator *translate.Translator
	// Policy is the registry's outage policy (hold-down, delete guard).
	Policy OutagePolicy
}

// Config configures a Syncer.
type Config struct {
	// Registries in configuration order: on a host collision the service of
	// the earlier registry wins.
	Registries []Registry
	// Timeout bounds the wait for every registry's first listing; after it,
	// HasSynced is true anyway (config key sync.timeout). 0 waits forever.
	Timeout time.Duration
	// StateDir, when set, is where each registry's last complete listing is
	// persisted and read back at start (rule 7; config key state.dir).
	StateDir string
	// ConflictPolicy decides a host several registries produce (rule 1):
	// ConflictMerge (the default when "") or ConflictFirst.
	ConflictPolicy string
	Logger         *slog.Logger
	// Clock times the hold-downs, delete guards, the sync timeout and state
	// writes; nil is the real clock (tests pass a fake one).
	Clock clock.WithDelayedExecution
}

// Syncer is the sync step between the registries and the aggregate store. It
// implements registries.Sink: every Snapshot is translated and written to the
// Store as the Creates, Updates and Deletes that make the store equal to the
// translation, skipping objects whose content hash is unchanged.
//
// Rules:
//  1. One ServiceEntry per host (docs/design.md §3, istio#37981). Its
//     claimants are ordered by (registry order, service name); the first is
//     the winner, re-decided whenever a claimant comes or goes. Two
//     services of one registry: the later is rejected (host-collision).
//     Services of several registries (ConflictPolicy): under ConflictMerge
//     the winner's ServiceEntry (labelled with its registry) serves the
//     instances of every registry, each in its own WorkloadEntries (or
//     inline endpoints) translated against the winner's ports, and a
//     registry whose protocol differs is rejected (protocol-conflict);
//     under ConflictFirst the later registries are rejected
//     (host-collision). No registry's outage removes another's instances.
//  2. A Snapshot with Err keeps the service's last-known-good objects
//     (docs/design.md §8); only Removed deletes them.
//  3. Ports stick per service for the life of the process (translate.Sticky).
//  4. Within a host, creates and updates write WorkloadEntries before the
//     ServiceEntry and deletes remove the ServiceEntry first, so the first
//     push for a new service already carries its endpoints and a removed
//     service causes no EDS pushes on its way out. A service that changes
//     form (inline ↔ WorkloadEntries) keeps its old objects until the new
//     ones are written.
//  5. Delete guard (OutagePolicy, policy.go): a listing that would remove
//     most of a registry is held until confirmed or timed out.
//  6. Hold-down (OutagePolicy, policy.go): a disappearance read right after
//     a reconnection waits before it applies.
//  7. Persisted listings (Config.StateDir, state.go): a registry that
//     cannot be read at start is served from its last complete listing.
//
// Cost: a Snapshot is translated against the service's last Result
// (translate.TranslateReusing), so unchanged instances keep their objects and
// hashes, and only changed objects reach the store: a single-instance change
// costs one WorkloadEntry's hash and write (BenchmarkSyncInstanceChange).
//
// Concurrency: Snapshot and Synced may be called from any goroutine.
type Syncer struct {
	merge     bool
	clock     clock.WithDelayedExecution
	store     *serviceentry.Store
	log       *slog.Logger
	timeout   time.Duration
	ready     chan struct{}
	stateDir  string
	stateKick chan struct{}

	mu       sync.Mutex
	regs     map[string]*registryState
	services map[serviceID]*serviceState
	claims   map[string][]serviceID // host → claimants, winner first
	// written: host → the store's objects we wrote for it, as the store
	// holds them: a slice of shared objects costs 8 bytes per instance
	// (a ConfigKey would take 48, a map per host ~300 per instance).
	written map[string][]*model.Config
	served  map[string][]servedBy // host → whose instances its objects hold
	pending int                   // registries not yet synced, counted before HasSynced
	// nextOrder is the collision order of the next registry added;
	// gone are registries removed with nothing of them left.
	nextOrder int
	gone      map[string]bool
	obs       observation // the Snapshot being applied (sync_apply.go)
}

// Conflict policies (Config.ConflictPolicy).
const (
	ConflictMerge = "merge"
	ConflictFirst = "first"
)

// servedBy is a registry whose instances a host's objects hold, and how
// many of them survived translation.
type servedBy struct {
	registry  string
	instances int
}

type serviceID struct {
	order    int // the registry's position in the configuration
	registry string
	name     string // registries.Service.Key: the name, scoped by namespace, group, datacenter
}

func (a serviceID) compare(b serviceID) int {
	return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.name, b.name))
}

type serviceState struct {
	svc  registries.Service // the last snapshot's (shares the registry's slices)
	host string
	// merge is the service translated against the host winner's ports
	// (conflictPolicy merge), nil until it first is; conflict says why it
	// cannot be merged ("" when it can).
	merge    *mergedState
	conflict string
	// result is the last translation; its Sticky goes into the next.
	result    translate.Result
	instances int
	rejected  map[string]string // instance ID → reason, to log changes only
}

// mergedState is a service's translation for a merge: result was
// translated against the ports of forPorts, and is current when ok (a new
// listing clears ok and keeps result to reuse).
type mergedState struct {
	result   translate.Result
	forPorts translate.Sticky
	ok       bool
}

type registryState struct {
	order  int
	cfg    Registry
	status RegistryStatus
	stale  map[string]bool // services whose last read failed: served from last-known-good
	// down is set by a registry-wide read error and cleared by the next
	// successful read.
	down bool
	// guard is the engaged delete guard, nil when none; holding the
	// disappearances waiting for their hold-down, by service key.
	guard   *guard
	holding map[string]*heldDown
	// disk is the persisted listing read at start, until served or
	// synced; fromDisk the services served from it and not read since;
	// dirty whether the listing changed since it was last persisted.
	disk     []registries.Service
	fromDisk map[string]bool
	dirty    bool
	// pending: counted in Syncer.pending until Synced. removed: removed
	// from the configuration, kept while the delete guard holds its
	// services. relisting: after a restart, the services the new watcher
	// has not read yet (nil when not restarting).
	pending   bool
	removed   bool
	relisting map[string]bool
}

func newRegistryState(order int, cfg Registry) *registryState {
	return &registryState{order: order, cfg: cfg, status: RegistryStatus{Name: cfg.Name, Type: cfg.Type},
		stale: make(map[string]bool), holding: make(map[string]*heldDown)}
}

// New returns a Syncer writing to store.
func New(store *serviceentry.Store, cfg Config) *Syncer {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Syncer{
		clock:     cmp.Or[clock.WithDelayedExecution](cfg.Clock, clock.RealClock{}),
		store:     store,
		log:       log.With("component", "sync"),
		timeout:   cfg.Timeout,
		ready:     make(chan struct{}),
		stateDir:  cfg.StateDir,
		stateKick: make(chan struct{}, 1),
		merge:     cfg.ConflictPolicy != ConflictFirst,
		regs:      make(map[string]*registryState, len(cfg.Registries)),
		services:  make(map[serviceID]*serviceState),
		claims:    make(map[string][]serviceID),
		written:   make(map[string][]*model.Config),
		served:    make(map[string][]servedBy),
		pending:   len(cfg.Registries),
		nextOrder: len(cfg.Registries),
		gone:      make(map[string]bool),
	}
	for i, r := range cfg.Registries {
		st := newRegistryState(i, r)
		st.pending = true
		s.regs[r.Name] = st
	}
	if s.pending == 0 {
		close(s.ready)
	}
	if s.stateDir != "" {
		s.loadState()
	}
	return s
}

var _ registries.Sink = (*Syncer)(nil)

// Run enforces the sync timeout: once it passes, HasSynced turns true even if
// some registry has not delivered its first listing (it is logged), after
// such a registry's persisted listing, if any, is served (rule 7). With a
// state dir it also persists the listings until ctx is done; without one it
// returns once the store is synced.
func (s *Syncer) Run(ctx context.Context) {
	if s.stateDir != "" {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() { defer close(done); s.runState(ctx) }()
		defer func() { <-ctx.Done() }()
	}
	if s.timeout <= 0 {
		return
	}
	t := s.clock.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-s.ready:
	case <-t.C():
		s.mu.Lock()
		var missing []string
		for name, r := range s.regs {
			if !r.status.Synced {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		s.serveFromDisk()
		s.markReady()
		s.mu.Unlock()
		s.log.Warn("Sync timeout passed before every registry listed its services; serving what is known",
			"duration", s.timeout, "registries", missing)
	}
}

// HasSynced reports whether every registry delivered its first listing, or
// the sync timeout passed.
func (s *Syncer) HasSynced() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// Ready is closed when HasSynced turns true.
func (s *Syncer) Ready() <-chan struct{} { return s.ready }

// markReady closes ready once; s.mu must be held.
func (s *Syncer) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

// Synced implements registries.Sink.
func (s *Syncer) Synced(registry string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs[registry]
	if r == nil || r.removed || r.status.Synced {
		return
	}
	r.status.Synced = true
	registryLastSync.WithLabelValues(registry).Set(float64(s.clock.Now().UnixNano()) / 1e9)
	s.leaveDisk(r)
	if r.relisting != nil {
		s.endRelisting(r)
	}
	s.markDirty(r)
	s.noteRegistry(r)
	s.log.Info("Registry synced", "registry", registry, "count", r.status.Services)
	if r.pending {
		r.pending = false
		if s.pending--; s.pending == 0 {
			s.markReady()
		}
	}
}

// Snapshot implements registries.Sink.
func (s *Syncer) Snapshot(snap registries.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs[snap.Registry]
	if r == nil || r.removed {
		s.log.Error("Dropped snapshot of an unknown registry", "registry", snap.Registry, "service", snap.Service.Name)
		return
	}
	r.status.LastEvent = snap.Observed
	defer s.observing(snap.Observed)()
	id := serviceID{order: r.order, registry: snap.Registry, name: snap.Service.Key()}
	r.relisted(id.name)
	switch {
	case snap.Err != nil:
		// The registry logs its outage once (registries.Health); here each
		// failed read is a debug line.
		r.status.Errors++
		r.status.LastError, r.status.LastErrorTime = snap.Err.Error(), snap.Observed
		if snap.Service.Name == "" {
			r.down = true
		}
		if snap.Service.Name != "" && s.services[id] != nil {
			r.stale[id.name] = true
			s.log.Debug("Kept last-known-good state after a registry read failed", "registry", snap.Registry,
				"service", snap.Service.Name, "err", snap.Err)
		} else {
			s.log.Debug("Registry read failed; nothing known to keep", "registry", snap.Registry,
				"service", snap.Service.Name, "err", snap.Err)
		}
	case s.disappears(id, snap) && r.guarded(id.name):
		// Held by the delete guard: it applies or drops it (rule 5).
		r.down = false
	case s.disappears(id, snap) && snap.Relist && r.cfg.Policy.HoldDown > 0:
		r.down = false
		s.holdDown(r, id, snap)
	default:
		r.down = false
		s.cancelHoldDown(r, id.name)
		if !snap.Removed && r.guard != nil && r.guard.keys[id.name] {
			delete(r.guard.keys, id.name)
			if len(r.guard.keys) == 0 {
				s.releaseGuard(r, "every held service is back")
			}
		}
		s.applySnapshot(r, id, snap)
	}
	s.noteRegistry(r)
}

// applySnapshot applies an authoritative snapshot (not an error). s.mu is
// held.
func (s *Syncer) applySnapshot(r *registryState, id serviceID, snap registries.Snapshot) {
	delete(r.stale, id.name)
	delete(r.fromDisk, id.name)
	s.markDirty(r)
	if snap.Removed {
		s.remove(r, id)
	} else {
		s.upsert(r, id, snap.Service)
	}
}

// noteRegistry brings the registry's status counts and gauges up to date.
// s.mu is held.
func (s *Syncer) noteRegistry(r *registryState) {
	r.status.StaleServices = len(r.stale)
	r.status.Stale = r.down || len(r.stale) > 0 || r.status.FromDisk
	registryServices.WithLabelValues(r.cfg.Name).Set(float64(r.status.Services))
	registryInstances.WithLabelValues(r.cfg.Name).Set(float64(r.status.Instances))
	stale := 0.0
	if r.status.Stale {
		stale = 1
	}
	registryStale.WithLabelValues(r.cfg.Name).Set(stale)
}

func (s *Syncer) remove(r *registryState, id serviceID) {
	st := s.services[id]
	if st == nil {
		return
	}
	delete(s.services, id)
	r.status.Services--
	r.status.Instances -= st.instances
	s.release(id, st.host)
}

func (s *Syncer) upsert(r *registryState, id serviceID, svc registries.Service) {
	st := s.services[id]
	if st == nil {
		st = &serviceState{}
		r.status.Services++
	}
	r.status.Instances += len(svc.Instances) - st.instances
	st.instances = len(svc.Instances)
	// The listing is kept while the service lives (re-translation for a
	// merge, the persisted state): equal label maps share one.
	svc.Instances = registries.Compact(svc.Instances)
	st.svc = svc
	if st.merge != nil {
		st.merge.ok = false
	}
	s.services[id] = st
	// Reusing the last Result re-hashes only the instances that changed.
	res, err := r.cfg.Translator.TranslateReusing(svc, st.result.Sticky, st.result)
	if err != nil {
		// The service cannot be represented (e.g. its name makes no valid
		// host): count it like its instances and keep what we had.
		s.reject(r.cfg.Name, svc.Name, "invalid-host", max(1, len(svc.Instances)), err)
		return
	}
	if st.host != "" && st.host != res.Host {
		s.release(id, st.host)
	}
	// Log changes of form only: an inline service past the CRD's endpoint
	// or etcd's size limit is written as WorkloadEntries (translate: see
	// translate/limits.go).
	if was := st.result.Fallback != ""; res.Fallback != "" && !was {
		s.log.Warn("Service written in WorkloadEntry form", "registry", r.cfg.Name, "service", svc.Name,
			"reason", res.Fallback)
	} else if res.Fallback == "" && was {
		s.log.Info("Service written inline again", "registry", r.cfg.Name, "service", svc.Name)
	}
	st.host, st.result = res.Host, res
	s.logRejections(r.cfg.Name, svc.Name, st, res)
	s.claim(id, res.Host)
	s.apply(res.Host)
}

// claim adds id to the claimants of host and rejects whichever claimant
// stops or fails to be the winner (rule 1).
func (s *Syncer) claim(id serviceID, host string) {
	ids := s.claims[host]
	i, found := slices.BinarySearchFunc(ids, id, serviceID.compare)
	if found {
		return
	}
	ids = slices.Insert(ids, i, id)
	s.claims[host] = ids
	if len(ids) == 1 {
		return
	}
	// The claimant that is not first of its registry (merge) or not first
	// at all (first) loses.
	var winner serviceID
	for j, other := range ids {
		if j == i {
			continue
		}
		if s.merge && other.registry != id.registry {
			continue
		}
		winner = other
		break
	}
	if winner.registry == "" {
		return
	}
	loser := id
	if winner.compare(id) > 0 {
		winner, loser = id, winner
	}
	s.reject(loser.registry, loser.name, "host-collision", max(1, s.services[loser].instances),
		fmt.Errorf("host %q is produced by service %q of registry %q, which comes first", host, winner.name, winner.registry))
}

func (s *Syncer) release(id serviceID, host string) {
	ids := s.claims[host]
	if i, found := slices.BinarySearchFunc(ids, id, serviceID.compare); found {
		ids = slices.Delete(ids, i, i+1)
	}
	if len(ids) == 0 {
		delete(s.claims, host)
	} else {
		s.claims[host] = ids
	}
	s.apply(host)
}

func (s *Syncer) reject(registry, service, reason string, count int, err error) {
	rejectedInstances.WithLabelValues(registry, reason).Add(float64(count))
	s.log.Warn("Rejected service", "registry", registry, "service", service, "reason", reason, "err", err)
}

func (s *Syncer) logRejections(registry, service string, st *serviceState, res translate.Result) {
	seen := make(map[string]string, len(res.Rejected))
	for _, rj := range res.Rejected {
		seen[rj.InstanceID] = rj.Reason
		rejectedInstances.WithLabelValues(registry, rj.Reason).Inc()
		if st.rejected[rj.InstanceID] != rj.Reason {
			s.log.Warn("Skipped invalid instance", "registry", registry, "service", service,
				"instance", rj.InstanceID, "reason", rj.Reason, "err", rj.Detail)
		}
	}
	st.rejected = seen
	// Label changes: each counted once per instance (translate.LabelChange.Repeated),
	// logged once per service when its set of (raw key, reason) changes.
	perReason := make(map[string]int)
	for _, c := range res.LabelChanges {
		if !c.Repeated {
			perReason[c.Reason]++
		}
	}
	for reason, n := range perReason {
		labelsChanged.WithLabelValues(registry, reason).Add(float64(n))
	}
	if !res.LabelSetChanged {
		return
	}
	if len(res.LabelChanges) == 0 {
		s.log.Info("Registry labels all kept as written", "registry", registry, "service", service)
		return
	}
	// Per reason: the distinct raw keys, and one example each.
	keys := make(map[string]int)
	var examples []string
	instances, seenKey := 0, make(map[[2]string]bool)
	for i, c := range res.LabelChanges {
		if i == 0 || c.InstanceID != res.LabelChanges[i-1].InstanceID {
			instances++
		}
		if k := [2]string{c.Reason, c.Key}; !seenKey[k] {
			seenKey[k] = true
			if keys[c.Reason]++; keys[c.Reason] == 1 && len(examples) < 5 {
				examples = append(examples, c.String())
			}
		}
	}
	s.log.Info("Registry labels changed or dropped", "registry", registry, "service", service,
		"instances", instances, "keys", keys, "examples", examples)
}

package syncer

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

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
	// the earlier registry wins (rule 1).
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
	// KeptPorts are the ports a previous run kept for its hosts
	// (Syncer.KeptPorts): a host first claimed before the Syncer is ready
	// keeps them (rule 3) instead of deciding anew; those of hosts nobody
	// claims by then are forgotten.
	KeptPorts KeptPorts
	Logger    *slog.Logger
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
//     claimants are ordered by the configuration order of their registries,
//     then by service key; the first is the winner (planHost). The order is
//     the configuration's as it is now: a reload that reorders the
//     registries re-decides the hosts they share, so that a running bridge
//     serves what a bridge started on that configuration serves. Services
//     of the winner's registry (names that differ in case, or in "_" and
//     "-") are merged into the host whatever the ConflictPolicy: a
//     newcomer never takes a host from the services already serving it,
//     and a fresh bridge serves the same union. Services of several
//     registries (ConflictPolicy): under ConflictMerge the winner's
//     ServiceEntry (labelled with its registry) serves the instances of
//     every service of every registry; under ConflictFirst the later
//     registries are rejected (host-collision). A merged service's
//     instances are in its own WorkloadEntries (or inline endpoints)
//     translated against the host's ports (rule 3), and one whose protocol
//     differs on a port both have is rejected (protocol-conflict,
//     mergeConflict). No registry's outage removes another's instances. A
//     rejection is logged when it starts.
//  2. A Snapshot with Err keeps the service's last-known-good objects
//     (docs/design.md §8); only Removed deletes them.
//  3. A host's ports are the host's, not a service's (hostPorts): declared
//     ports (the registry's servicePort, ports the registry declares) of
//     the first service that has ports; otherwise the lowest instance port
//     of that service when the host is first decided, then kept while any
//     service claims the host, whichever service wins it and whatever
//     instances join or leave, so that the cluster clients dial
//     (outbound|<port>||<host>) never moves under them. Instances on other
//     ports are served through their target ports. Decisions made before
//     the Syncer is ready follow the listings (a fresh bridge decides from
//     what the registries list, not from the order they list it); a
//     bridge given the kept ports of a previous run (Config.KeptPorts,
//     the state dir) keeps them. The protocol follows the instances
//     (translate.Sticky). The host's resolution is DNS when a service of
//     the host serves an instance registered by name (translate's
//     HostResolution).
//  4. Within a host, creates and updates write WorkloadEntries before the
//     ServiceEntry and deletes remove the ServiceEntry first, so the first
//     push for a new service already carries its endpoints and a removed
//     service causes no EDS pushes on its way out. A service that changes
//     form (inline ↔ WorkloadEntries) keeps its old objects until the new
//     ones are written.
//  5. Delete guard (OutagePolicy, outage.go): a listing that would remove
//     most of a registry is held until confirmed or timed out.
//  6. Hold-down (OutagePolicy, outage.go): a disappearance read right after
//     a reconnection waits before it applies.
//  7. Persisted listings (Config.StateDir, state.go): a registry that
//     cannot be read at start is served from its last complete listing.
//
// Decisions are pure functions (decide.go); the Syncer keeps the state
// they read and applies what they decide: hosts.go writes the objects a
// host's claimants produce, outage.go runs the timers and the guard.
//
// Cost: a Snapshot is translated against the service's last Result
// (translate.TranslateReusing), so unchanged instances keep their objects and
// hashes, and only changed objects reach the store: a single-instance change
// costs one WorkloadEntry's hash and write (BenchmarkSyncInstanceChange).
//
// Concurrency: every exported method is safe for concurrent use; timers
// fire on their own goroutines.
type Syncer struct {
	merge     bool
	clock     clock.WithDelayedExecution
	store     *serviceentry.Store
	log       *slog.Logger
	timeout   time.Duration
	ready     chan struct{}
	stateDir  string
	stateKick chan struct{}

	mu sync.Mutex
	// regs is the registry set and its order; services what each
	// registry lists; hosts who claims each host and what the Store holds
	// for it.
	regs     registrySet
	services map[serviceID]*serviceState
	hosts    map[string]*hostState
	pending  int         // registries not yet synced, counted before HasSynced
	obs      observation // the Snapshot being applied (hosts.go)
	// seeds are Config.KeptPorts (and those the state dir holds) until the
	// Syncer is ready; portsDirty: the kept ports changed since they were
	// last persisted.
	seeds      KeptPorts
	portsDirty bool
}

// Conflict policies (Config.ConflictPolicy).
const (
	ConflictMerge = "merge"
	ConflictFirst = "first"
)

// serviceID names a service: its registry and its key within it.
type serviceID struct {
	registry string
	key      registries.ServiceKey
}

type serviceState struct {
	svc registries.Service // the last snapshot's (shares the registry's slices)
	// merge is the service translated against the host winner's ports
	// (conflictPolicy merge), nil until it first is.
	merge *mergedState
	// rejection is why the service is not served ("" when it is), to log
	// changes only.
	rejection string
	// result is the last translation (its Host is the service's host):
	// its Sticky goes into the next.
	result    translate.Result
	instances int
	rejected  map[string]string // instance ID → reason, to log changes only
}

// mergedState is a service's translation for a merge: result was
// translated against the ports of forPorts, and is current when ok (a new
// listing clears ok and keeps result to reuse).
//
// A service is translated for its host (hosts.go translationFor) when the
// host's ports or resolution differ from those of its own translation:
// merged into another's host, or the host's kept ports not its own.
type mergedState struct {
	result   translate.Result
	forPorts translate.Sticky
	ok       bool
}

// New returns a Syncer writing to store.
func New(store *serviceentry.Store, cfg Config) *Syncer {
	log := cmp.Or(cfg.Logger, slog.Default())
	s := &Syncer{
		clock:     cmp.Or[clock.WithDelayedExecution](cfg.Clock, clock.RealClock{}),
		store:     store,
		log:       log.With("component", "sync"),
		timeout:   cfg.Timeout,
		ready:     make(chan struct{}),
		stateDir:  cfg.StateDir,
		stateKick: make(chan struct{}, 1),
		merge:     cfg.ConflictPolicy != ConflictFirst,
		regs:      newRegistrySet(),
		services:  make(map[serviceID]*serviceState),
		hosts:     make(map[string]*hostState),
		pending:   len(cfg.Registries),
		seeds:     maps.Clone(cfg.KeptPorts),
	}
	names := make([]string, len(cfg.Registries))
	for i, r := range cfg.Registries {
		names[i] = r.Name
		st := newRegistryState(r)
		st.pending = true
		s.regs.byName[r.Name] = st
	}
	s.regs.setOrder(names)
	if s.pending == 0 {
		s.markReady()
	}
	if s.stateDir != "" {
		s.loadState()
		s.loadPorts()
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
		for name, r := range s.regs.byName {
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
func (s *Syncer) HasSynced() bool { return s.isReady() }

// KeptPorts are hosts' kept ports (rule 3), by host, as the port fields of
// a translate.Sticky (Port, Protocol, ProtocolPorts).
type KeptPorts map[string]translate.Sticky

// KeptPorts returns the ports the Syncer keeps for its hosts (rule 3): what
// a bridge started after this one must be given (Config.KeptPorts) to serve
// its hosts on the same ports.
func (s *Syncer) KeptPorts() KeptPorts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(KeptPorts, len(s.hosts))
	for host, h := range s.hosts {
		if h.kept {
			out[host] = h.ports
		}
	}
	return out
}

// Ready is closed when HasSynced turns true.
func (s *Syncer) Ready() <-chan struct{} { return s.ready }

// markReady closes ready once, and keeps every host's ports from then on
// (rule 3, hostPorts); s.mu must be held.
func (s *Syncer) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
		for _, h := range s.hosts {
			h.kept = h.kept || h.ports.Port != 0
		}
		s.seeds = nil
		s.markPortsDirty()
	}
}

// isReady reports whether ready is closed.
func (s *Syncer) isReady() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// Synced implements registries.Sink.
func (s *Syncer) Synced(registry string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs.byName[registry]
	if r == nil || r.removed || r.status.Synced {
		return
	}
	r.status.Synced = true
	registryLastSync.WithLabelValues(registry).Set(float64(s.clock.Now().UnixNano()) / 1e9)
	s.leaveDisk(r)
	r.restarted = false
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
	r := s.regs.byName[snap.Registry]
	if r == nil || r.removed {
		s.log.Error("Dropped snapshot of an unknown registry", "registry", snap.Registry, "service", snap.Service.Name)
		return
	}
	r.status.LastEvent = snap.Observed
	defer s.observing(snap.Observed)()
	id := serviceID{registry: snap.Registry, key: snap.Service.Key()}
	st := s.services[id]
	switch decideSnapshot(snap, st != nil && st.instances > 0, r.guarded(id.key), r.cfg.Policy.HoldDown > 0) {
	case actReadError:
		// The registry logs its outage once (registries.Health); here each
		// failed read is a debug line.
		r.status.Errors++
		r.status.LastError, r.status.LastErrorTime = snap.Err.Error(), snap.Observed
		if snap.Service.Name == "" {
			if r.down == nil {
				r.down = map[registries.Scope]bool{}
			}
			r.down[snap.Scope] = true
		}
		if snap.Service.Name != "" && st != nil {
			r.stale[id.key] = true
			s.log.Debug("Kept last-known-good state after a registry read failed", "registry", snap.Registry,
				"service", snap.Service.Name, "err", snap.Err)
		} else {
			s.log.Debug("Registry read failed; nothing known to keep", "registry", snap.Registry,
				"service", snap.Service.Name, "err", snap.Err)
		}
	case actGuarded:
		clear(r.down) // the delete guard applies or drops it (rule 5)
	case actHoldDown:
		clear(r.down)
		s.holdDown(r, id, snap)
	default:
		clear(r.down)
		s.cancelHoldDown(r, id.key)
		if !snap.Removed && r.guarded(id.key) {
			s.unguard(r, id.key, "every held service is back")
		}
		s.applySnapshot(r, id, snap)
	}
	s.noteRegistry(r)
}

// applySnapshot applies an authoritative snapshot (not an error). s.mu is
// held.
func (s *Syncer) applySnapshot(r *registryState, id serviceID, snap registries.Snapshot) {
	delete(r.stale, id.key)
	delete(r.fromDisk, id.key)
	s.markDirty(r)
	if snap.Removed {
		delete(r.disk, id.key) // not to be served from disk later
		s.remove(r, id)
	} else {
		s.upsert(r, id, snap.Service)
	}
}

// noteRegistry brings the registry's status counts and gauges up to date.
// s.mu is held.
func (s *Syncer) noteRegistry(r *registryState) {
	r.status.StaleServices = len(r.stale)
	r.status.Stale = len(r.down) > 0 || len(r.stale) > 0 || r.status.FromDisk
	registryServices.WithLabelValues(r.cfg.Name).Set(float64(r.status.Services))
	registryInstances.WithLabelValues(r.cfg.Name).Set(float64(r.status.Instances))
	stale := 0.0
	if r.status.Stale {
		stale = 1
	}
	registryStale.WithLabelValues(r.cfg.Name).Set(stale)
}

// remove forgets a service and re-decides its host. s.mu is held.
func (s *Syncer) remove(r *registryState, id serviceID) {
	st := s.services[id]
	if st == nil {
		return
	}
	delete(s.services, id)
	r.status.Services--
	r.status.Instances -= st.instances
	s.release(id, st.result.Host)
}

// upsert records a service's new listing, translates it and re-decides its
// host. s.mu is held.
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
	if host := st.result.Host; host != "" && host != res.Host {
		s.release(id, host)
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
	st.result = res
	s.logRejections(r.cfg.Name, svc.Name, st, res)
	s.claim(id, res.Host)
}

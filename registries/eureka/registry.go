package eureka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// Registry follows one Eureka registry (a server or a set of peers). Create
// it with New; Run it once.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	health *registries.Health
	client *client

	mu      sync.Mutex
	status  Status
	session *registries.Session

	// beforePoll, when set (the package's tests), is called before each
	// read: a test that blocks in it pauses the bridge.
	beforePoll func(ctx context.Context)
	// polls carries Poll's requests to the running watcher.
	polls chan pollRequest
}

// pollRequest is a Poll: full asks for the whole registry; done is closed
// once the read's snapshots were sent.
type pollRequest struct {
	full bool
	done chan struct{}
}

// Poll makes the running watcher read now, as its interval would: the
// delta, or the whole registry when one is due or full is set (as the
// relistInterval timer does). It returns once the read's snapshots were
// sent, or with ctx's error. Tests and the pipeline's differential drive a
// watcher with it instead of waiting for its interval.
func (r *Registry) Poll(ctx context.Context, full bool) error {
	req := pollRequest{full: full, done: make(chan struct{})}
	select {
	case r.polls <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-req.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var (
	_ registries.Registry       = (*Registry)(nil)
	_ registries.HealthReporter = (*Registry)(nil)
	_ registries.StatusReporter = (*Registry)(nil)
)

// readerRegistry is the Session reader of the one read loop.
const readerRegistry = "registry"

// Status is what /debug/registryz shows for a Eureka registry. It never
// holds the password.
type Status struct {
	Registry string   `json:"registry"`
	Servers  []string `json:"servers"`
	// Server is the server that answered last ("" before any did).
	Server string `json:"server,omitempty"`
	Synced bool   `json:"synced"`
	// Services and Instances count what the registry serves (the
	// allow-list's applications, UP instances); Applications and
	// AllInstances what the server lists, every status.
	Services     int `json:"services"`
	Instances    int `json:"instances"`
	Applications int `json:"applications"`
	AllInstances int `json:"allInstances"`
	// Hashcode is the reconcile hashcode of the registry as held.
	Hashcode string `json:"hashcode"`
	// LastFull is when the whole registry was last read.
	LastFull time.Time `json:"lastFull,omitzero"`
	registries.HealthStatus
}

// New validates cfg, applies defaults, reads the password and CA files and
// returns a Registry. Errors name the invalid fields
// ("servers[0]: credentials in the URL are refused: ...").
func New(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("eureka registry %q: %w", cfg.Name, err)
	}
	tlsCfg, err := clientTLS(cfg)
	if err != nil {
		return nil, fmt.Errorf("eureka registry %q: %w", cfg.Name, err)
	}
	password, err := readPassword(cfg)
	if err != nil {
		return nil, fmt.Errorf("eureka registry %q: %w", cfg.Name, err)
	}
	log := cfg.Logger.With("component", "eureka", "registry", cfg.Name)
	c := newClient(cfg, tlsCfg, password)
	servers := make([]string, len(c.servers))
	for i, u := range c.servers {
		servers[i] = u.String()
	}
	return &Registry{
		cfg: cfg, log: log, client: c,
		health: registries.NewHealth(cfg.Name, log),
		status: Status{Registry: cfg.Name, Servers: servers},
		polls:  make(chan pollRequest),
	}, nil
}

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.cfg.Name }

// Run implements registries.Registry: it reads Eureka until ctx is done
// and returns nil then.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	initMetrics(r.cfg.Name)
	s := registries.NewSession(r.health, registries.ReporterConfig{
		Registry: r.cfg.Name, Sink: sink, ReconnectGrace: r.cfg.ReconnectGrace, Logger: r.log,
	})
	r.mu.Lock()
	r.session = s
	r.mu.Unlock()
	for _, u := range r.client.servers {
		if u.Scheme == "http" && r.cfg.Username != "" {
			r.log.Warn("The Eureka password is sent over plain HTTP: use https:// servers", "server", u.String())
		}
	}
	r.log.Info("Started watching Eureka", "servers", r.status.Servers, "interval", r.cfg.Interval)
	w := &watcher{r: r, s: s, c: r.client, apps: map[string]map[string]*instance{}, counts: map[string]int{},
		relist: relistStart, server: -1, failing: map[int]bool{}}
	w.run(ctx)
	r.log.Info("Stopped watching Eureka")
	return nil
}

// Status returns a copy of the registry's current status.
func (r *Registry) Status() Status {
	r.mu.Lock()
	st := r.status
	s := r.session
	r.mu.Unlock()
	st.Servers = slices.Clone(st.Servers)
	if s != nil {
		st.Services, st.Instances = s.Counts()
		st.Synced = s.Synced()
	}
	st.HealthStatus = r.Health()
	return st
}

// Health implements registries.HealthReporter.
func (r *Registry) Health() registries.HealthStatus {
	r.mu.Lock()
	s := r.session
	r.mu.Unlock()
	return s.Health(r.health)
}

// WatcherStatus implements registries.StatusReporter: Status.
func (r *Registry) WatcherStatus() any { return r.Status() }

// watcher is one run's read loop (doc.go rules 1-4, 6, 7). Only run's
// goroutine uses it.
type watcher struct {
	r *Registry
	s *registries.Session
	c *client

	// apps holds every instance the server lists, of every application
	// and status (the hashcode counts them all): application → instance
	// ID → instance.
	apps map[string]map[string]*instance
	// counts is the number of instances per status, over apps.
	counts map[string]int
	total  int
	// relist, when set, is why the next read is a full one.
	relist string
	// nextRelist is when the timer's full read is due; graceEnd, when set,
	// when reconnectGrace ends after trouble (a full read then).
	nextRelist, graceEnd time.Time
	// server is the server that answered last (-1 none yet); failing the
	// servers whose last request failed; down is set from a round no
	// server answered until one does.
	server  int
	failing map[int]bool
	down    bool
}

func (w *watcher) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var req *pollRequest
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case r := <-w.r.polls:
			req = &r
			if r.full && w.relist == "" {
				w.relist = relistTimer
			}
		}
		if w.r.beforePoll != nil {
			w.r.beforePoll(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		w.poll(ctx)
		if req != nil {
			close(req.done)
		}
		if w.down {
			// As registries.Liveness retries: a server that answers again
			// is seen at once, not an interval later.
			timer.Reset(min(w.r.cfg.Interval, registries.DefaultLivenessRetry))
		} else {
			timer.Reset(w.r.cfg.Interval)
		}
	}
}

// poll is one round: a read of the delta, or of the whole registry when
// one is due (doc.go rules 2-4).
func (w *watcher) poll(ctx context.Context) {
	start := time.Now()
	reason := w.relist
	switch {
	case reason != "":
	case !start.Before(w.nextRelist):
		reason = relistTimer
	case !w.graceEnd.IsZero() && !start.Before(w.graceEnd):
		reason = relistGrace
	}
	if reason == "" {
		body, ok := w.fetch(ctx, pathDelta, "delta", start)
		if !ok {
			return
		}
		if w.c.current != w.server {
			reason = relistFailover
		} else {
			d, err := decodeApplications(body)
			if err != nil {
				w.fail(fmt.Errorf("%w: %w", errDecode, err), start)
				return
			}
			touched, listing := w.applyDelta(d)
			if d.Hashcode == "" || d.Hashcode == w.hashcode() {
				w.report(touched, listing, start)
				w.ok(start)
				return
			}
			w.r.log.Info("The registry's hashcode after the delta differs from the server's; reading the whole registry",
				"held", w.hashcode(), "server", d.Hashcode)
			reason = relistHashcode
		}
	}
	w.relist = reason // kept until a full read succeeds
	body, ok := w.fetch(ctx, pathApps, "full", start)
	if !ok {
		return
	}
	all, err := decodeApplications(body)
	if err != nil {
		w.fail(fmt.Errorf("%w: %w", errDecode, err), start)
		return
	}
	if failover := w.server >= 0 && w.c.current != w.server; w.down || failover {
		// After an outage or on another server, the registry may still be
		// filling in (rule 7).
		w.s.Reconnected(registries.Scope{}, start)
		if w.r.cfg.ReconnectGrace > 0 {
			w.graceEnd = start.Add(w.r.cfg.ReconnectGrace)
		}
		if failover {
			reason = relistFailover
		}
	} else if reason == relistGrace {
		w.graceEnd = time.Time{}
	}
	relists.WithLabelValues(w.r.cfg.Name, reason).Inc()
	w.replace(all)
	w.relist, w.nextRelist = "", start.Add(w.r.cfg.RelistInterval)
	w.report(w.apps, true, start)
	w.r.mu.Lock()
	w.r.status.LastFull = start
	w.r.mu.Unlock()
	w.ok(start)
}

// fetch reads rel from the servers; on a failed round it reports the
// failure and returns false.
func (w *watcher) fetch(ctx context.Context, rel, kind string, start time.Time) ([]byte, bool) {
	body, server, failed, err := w.c.get(ctx, rel)
	sent := len(failed)
	if err == nil {
		sent++
	}
	fetches.WithLabelValues(w.r.cfg.Name, kind).Add(float64(sent))
	for _, e := range failed {
		var se *serverError
		if !errors.As(e, &se) || w.failing[se.index] {
			continue
		}
		w.failing[se.index] = true
		if err == nil {
			w.r.log.Warn("A Eureka server failed; read another", "server", se.server, "error", se.err)
		}
	}
	if ctx.Err() != nil {
		return nil, false
	}
	if err != nil {
		w.fail(err, start)
		return nil, false
	}
	if w.failing[server] {
		delete(w.failing, server)
		w.r.log.Info("A Eureka server answers again", "server", w.c.servers[server].String())
	}
	return body, true
}

// fail reports a round no server answered (or an answer that could not be
// read): the registry is down, its services keep their last-known-good
// instances, and the next read is a full one.
func (w *watcher) fail(err error, start time.Time) {
	w.down = true
	w.relist = relistReconnect
	w.s.ReadFailedSince(readerRegistry, errorReason(err), err, start)
	w.s.Down(registries.Scope{}, err, start)
}

// ok records a round that succeeded.
func (w *watcher) ok(start time.Time) {
	w.down = false
	w.server = w.c.current
	w.s.ReadOK(readerRegistry)
	w.r.mu.Lock()
	w.r.status.Server = w.c.servers[w.server].String()
	w.r.status.Applications, w.r.status.AllInstances = len(w.apps), w.total
	w.r.status.Hashcode = w.hashcode()
	w.r.mu.Unlock()
}

// put adds or replaces an instance.
func (w *watcher) put(in instance) {
	insts := w.apps[in.App]
	if insts == nil {
		insts = map[string]*instance{}
		w.apps[in.App] = insts
	}
	if old := insts[in.ID]; old != nil {
		w.counts[old.Status]--
		w.total--
	}
	insts[in.ID] = &in
	w.counts[in.Status]++
	w.total++
}

// del removes an instance, and its application with its last one.
func (w *watcher) del(app, id string) {
	insts := w.apps[app]
	old := insts[id]
	if old == nil {
		return
	}
	w.counts[old.Status]--
	w.total--
	delete(insts, id)
	if len(insts) == 0 {
		delete(w.apps, app)
	}
}

// replace makes a full read the registry held.
func (w *watcher) replace(all applications) {
	clear(w.apps)
	clear(w.counts)
	w.total = 0
	for _, a := range all.Apps {
		for _, in := range a.Instances {
			w.put(in)
		}
	}
}

// applyDelta applies a delta's instances by their action type, as Eureka's
// client does (DiscoveryClient.updateDelta): ADDED and MODIFIED add or
// replace, DELETED removes. It returns the applications it touched, and
// whether the set of applications changed (a new listing is due).
func (w *watcher) applyDelta(d applications) (touched map[string]map[string]*instance, listing bool) {
	touched = map[string]map[string]*instance{}
	for _, a := range d.Apps {
		for _, in := range a.Instances {
			_, had := w.apps[in.App]
			if in.ActionType == actionDeleted {
				w.del(in.App, in.ID)
			} else {
				w.put(in)
			}
			touched[in.App] = nil
			listing = listing || had != (w.apps[in.App] != nil)
		}
	}
	for app := range touched {
		touched[app] = w.apps[app]
	}
	return touched, listing
}

// hashcode is the reconcile hashcode of the registry as held.
func (w *watcher) hashcode() string { return reconcileHashcode(w.counts) }

// report sends what a read found: with listing, the listing of every
// application the allow-list lets through, then a read of each of apps
// that is still listed (nil values are applications gone, which the
// listing removed).
func (w *watcher) report(apps map[string]map[string]*instance, listing bool, observed time.Time) {
	if listing {
		keys := make([]registries.ServiceKey, 0, len(w.apps))
		for app := range w.apps {
			if allowed(w.r.cfg.Services, app) {
				keys = append(keys, registries.ServiceKey{Name: app})
			}
		}
		slices.SortFunc(keys, registries.ServiceKey.Compare)
		w.s.Listing(registries.Scope{}, keys, observed)
	}
	for _, app := range slices.Sorted(maps.Keys(apps)) {
		if insts := apps[app]; insts != nil && allowed(w.r.cfg.Services, app) {
			w.s.Read(readApp(app, insts), observed)
		}
	}
}

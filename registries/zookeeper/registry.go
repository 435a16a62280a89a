package zookeeper

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// Registry follows Dubbo providers, or Spring Cloud Zookeeper instances, in
// one ZooKeeper ensemble (doc.go).
type Registry struct {
	name    string
	cfg     Block
	creds   string
	log     *slog.Logger
	health  *registries.Health
	builder *dubbo.Builder // nil with layout spring-cloud
	root    string         // "/<root>"
	// appsRoot holds one child per application, each holding its
	// instances: /services with layout dubbo, the root with spring-cloud.
	appsRoot string

	mu     sync.Mutex
	status Status
}

// Status is the registry's state on /debug/registryz (no secret).
type Status struct {
	registries.HealthStatus
	Servers []string `json:"servers"`
	Root    string   `json:"root"`
	Layout  string   `json:"layout"`
	// Mode is the dubbo block's mode (layout dubbo).
	Mode string `json:"mode,omitempty"`
	// HasSession is true while a ZooKeeper session is established.
	HasSession bool `json:"hasSession"`
	// Sessions counts sessions established (a reconnect within the session
	// timeout keeps the session; an expiry makes a new one).
	Sessions int `json:"sessions"`
	// Relists counts full re-lists: one per established connection, and
	// one per retry after a failed read.
	Relists int `json:"relists"`
	// Interfaces and Applications are the interfaces under the root and
	// the applications under /services (layout spring-cloud: under the
	// root); Services the services emitted.
	Interfaces   int `json:"interfaces"`
	Applications int `json:"applications"`
	Services     int `json:"services"`
	// Watches is the number of watches set.
	Watches int `json:"watches"`
}

var (
	_ registries.Registry       = (*Registry)(nil)
	_ registries.HealthReporter = (*Registry)(nil)
	_ registries.StatusReporter = (*Registry)(nil)
)

func newRegistry(name string, cfg Block, creds string, builder *dubbo.Builder, log *slog.Logger) *Registry {
	root := "/" + strings.Trim(cfg.Root, "/")
	appsRoot := ServicesRoot
	if cfg.springCloud() {
		appsRoot = root
	}
	return &Registry{
		name: name, cfg: cfg, creds: creds, log: log, root: root, appsRoot: appsRoot,
		health:  registries.NewHealth(name, log),
		builder: builder,
		status:  Status{Servers: slices.Clone(cfg.Servers), Root: root, Layout: cfg.Layout, Mode: string(cfg.Dubbo.Mode)},
	}
}

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.name }

// Health implements registries.HealthReporter.
func (r *Registry) Health() registries.HealthStatus { return r.health.Status() }

// WatcherStatus implements registries.StatusReporter.
func (r *Registry) WatcherStatus() any {
	r.mu.Lock()
	st := r.status
	st.Servers = slices.Clone(st.Servers)
	r.mu.Unlock()
	st.HealthStatus = r.health.Status()
	return st
}

func (r *Registry) setStatus(f func(*Status)) {
	r.mu.Lock()
	f(&r.status)
	r.mu.Unlock()
}

// Run implements registries.Registry: it connects to the ensemble and
// watches until ctx is done (doc.go). It returns an error only when the
// client cannot be created (an invalid server list).
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	w := newWatcher(r, sink)
	if err := w.connect(); err != nil {
		return err
	}
	r.log.Info("Watching ZooKeeper", "servers", r.cfg.Servers, "root", r.root, "layout", r.cfg.Layout, "mode", r.cfg.Dubbo.Mode)
	w.run(ctx)
	w.conn.Close()
	r.log.Info("Stopped watching ZooKeeper")
	return nil
}

// connect creates a new client (doc.go rule 3): at the start, and when no
// session could be had for reconnectAfter. The watches of the previous
// client are forgotten; its late events are ignored.
func (w *watcher) connect() error {
	gen := w.gen.Add(1)
	w.dialErr.Store(nil)
	conn, _, err := zk.Connect(w.r.cfg.Servers, w.r.cfg.SessionTimeout.Duration,
		zk.WithLogger(zkLogger{w.log}), zk.WithLogInfo(false), zk.WithHostProvider(newBackoffHostProvider()),
		zk.WithEventCallback(func(ev zk.Event) { w.sessionEvent(gen, ev) }),
		zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			return w.dial(gen, network, address, timeout)
		}))
	if err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	w.conn = conn
	w.current.Store(conn)
	w.armed = make(map[watchKey]bool)
	return nil
}

// zkLogger sends the client library's messages to slog at debug level: the
// registry logs what matters (session up and down) itself.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug("zookeeper client: " + fmt.Sprintf(format, args...))
}

// Watch kinds: what a watched path is.
type watchKind uint8

const (
	watchRoot           watchKind = iota // children of /<root>: interfaces
	watchRootExists                      // /<root> appearing
	watchProviders                       // children of /<root>/<interface>/providers
	watchProvidersExist                  // /<root>/<interface>/providers appearing
	watchApps                            // children of the apps root (/services): applications
	watchAppsExist                       // the apps root appearing
	watchAppInstances                    // children of <apps root>/<app>
	watchInstance                        // data of <apps root>/<app>/<instance>
)

// watchKey is one watch of ours: a kind and a path.
type watchKey struct {
	kind watchKind
	path string
}

// fire is a watch that fired, passed to the loop; gen is the client that
// set it.
type fire struct {
	key watchKey
	ev  zk.Event
	gen int64
}

// readerEnsemble is the watcher's one reader (registries.Session): every
// read, watch and probe goes through the one ZooKeeper session, so any
// success brings the registry up.
const readerEnsemble = "ensemble"

// watcher is Run's state. Everything but sessionEvent and the watch
// goroutines runs on the loop goroutine.
type watcher struct {
	r       *Registry
	session *registries.Session // the one caller of the Sink and of Health
	conn    *zk.Conn
	log     *slog.Logger
	// current is conn, for the liveness probe's goroutine.
	current atomic.Pointer[zk.Conn]

	// kick wakes the loop after a session event; sessions counts
	// established sessions (StateHasSession events), state the last state
	// of the current client, whose generation is gen.
	kick     chan struct{}
	sessions atomic.Int64
	state    atomic.Int32
	gen      atomic.Int64
	fired    chan fire
	// dialErr is the current client's last failed connection to a server
	// (nil once one succeeds): the cause the loop reports while there is
	// no session, with the server's address.
	dialErr atomic.Pointer[error]
	// lost is set by a session event that loses the connection
	// (Disconnected, Expired, AuthFailed): the loop may see the state only
	// after the client is Connecting again, which is no outage by itself.
	lost atomic.Bool
	// relistNow wakes the loop to re-list: the liveness probe got an
	// answer after the server hung.
	relistNow chan struct{}

	// armed holds the watches set and not yet fired: a path is never
	// watched twice, and a re-list reads armed paths without a watch.
	armed  map[watchKey]bool
	ifaces map[string]*ifaceState // by interface
	apps   map[string]*appState   // by application
	// producedBy is the keys of the services each interface or
	// application produced; listed the keys of the last Listing, nil
	// before it.
	producedBy map[string][]registries.ServiceKey
	listed     map[registries.ServiceKey]bool
	dirty      map[string]bool // "i/<interface>" or "a/<application>" to publish
	// relisted is the session count of the last complete re-list; failed
	// is set by a read error since then.
	relisted int64
	failed   bool
	// relisting is set while a re-list publishes (registries.Snapshot.Relist).
	relisting bool
	retry     *backoff.ExponentialBackOff
	observed  time.Time
	ctx       context.Context
}

type ifaceState struct {
	// parsed caches each provider child's parse, by child name.
	parsed map[string]parsedProvider
}

type parsedProvider struct {
	p   dubbo.Provider
	err error // nil, dubbo.ErrNotProvider or why it is malformed
}

type appState struct {
	instances map[string]parsedInstance // by child name (ip:port)
	// metadata is the MetadataInfo of each revision its instances name,
	// read (watcher.appMetadata).
	metadata map[string]dubbo.RevisionMetadata
}

// parsedInstance is one instance node as read: a Dubbo AppInstance (or
// why it is malformed) with layout dubbo, a Spring one with spring-cloud.
type parsedInstance struct {
	a      dubbo.AppInstance
	err    error
	spring springResult
}

func newWatcher(r *Registry, sink registries.Sink) *watcher {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 500*time.Millisecond, 30*time.Second, 0
	session := registries.NewSession(r.health, registries.ReporterConfig{Registry: r.name, Sink: sink, Logger: r.log})
	return &watcher{
		r: r, session: session, log: r.log,
		kick:       make(chan struct{}, 1),
		relistNow:  make(chan struct{}, 1),
		fired:      make(chan fire, 256),
		armed:      make(map[watchKey]bool),
		ifaces:     make(map[string]*ifaceState),
		apps:       make(map[string]*appState),
		producedBy: make(map[string][]registries.ServiceKey),
		dirty:      make(map[string]bool),
		retry:      b,
	}
}

// dial is the client's dialer: net.DialTimeout, recording a failure (with
// the server's address, which the client's session events lack) for the
// loop, which reports it as an outage at once instead of after
// reconnectAfter.
func (w *watcher) dial(gen int64, network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if gen != w.gen.Load() {
		return c, err
	}
	if err != nil {
		err = fmt.Errorf("zookeeper: %w", err)
		w.dialErr.Store(&err)
	} else {
		w.dialErr.Store(nil)
	}
	w.wake()
	return c, err
}

// wake wakes the loop without blocking.
func (w *watcher) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// sessionEvent is the client's event callback: it runs on the client's
// goroutine and must not block. The client drops events its own channel
// cannot hold; this one records what the loop needs and wakes it.
func (w *watcher) sessionEvent(gen int64, ev zk.Event) {
	if ev.Type != zk.EventSession || gen != w.gen.Load() {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		w.sessions.Add(1)
	case zk.StateDisconnected, zk.StateExpired, zk.StateAuthFailed:
		w.lost.Store(true)
	}
	w.state.Store(int32(ev.State))
	w.wake()
}

func (w *watcher) hasSession() bool { return zk.State(w.state.Load()) == zk.StateHasSession }

// reconnectAfter is how long the loop waits for a session before it
// replaces the client: twice the session timeout, by when the session is
// gone anyway. A new client also gets past a server that refuses the old
// one (a ZooKeeper restarted empty refuses a client that has seen a later
// transaction: "client must try another server").
func (w *watcher) reconnectAfter() time.Duration { return 2 * w.r.cfg.SessionTimeout.Duration }

// run is the loop: session changes, fired watches and retries, until ctx is
// done.
func (w *watcher) run(ctx context.Context) {
	w.ctx = ctx
	var live sync.WaitGroup
	live.Go(func() { w.runLiveness(ctx) })
	defer live.Wait()
	var retry, reconnect <-chan time.Time
	down := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
			if !w.hasSession() {
				// Connecting and Connected (no session yet) are steps
				// towards a session, not an outage, unless a server
				// refused the connection; but the client may have lost its
				// connection and be connecting again by the time the loop
				// looks (lost).
				st := zk.State(w.state.Load())
				lost := w.lost.Swap(false)
				switch {
				case down:
				case lost || st == zk.StateDisconnected || st == zk.StateExpired || st == zk.StateAuthFailed:
					down = true
					w.outage(fmt.Errorf("zookeeper %s: no session (lost its connection; now %s)", strings.Join(w.r.cfg.Servers, ","), st))
				default:
					if err := w.dialErr.Load(); err != nil {
						down = true
						w.outage(*err)
					}
				}
				if reconnect == nil {
					reconnect = time.After(w.reconnectAfter())
				}
				w.r.setStatus(func(s *Status) { s.HasSession = false })
				continue
			}
			down, reconnect = false, nil
			w.lost.Store(false)
			if n := w.sessions.Load(); n != w.relisted {
				w.authenticate()
				retry = w.relist(n)
			}
		case <-reconnect:
			reconnect = nil
			if w.hasSession() {
				continue
			}
			w.log.Warn("No ZooKeeper session: connecting with a new client", "after", w.reconnectAfter())
			w.conn.Close()
			if err := w.connect(); err != nil {
				w.log.Error("Cannot create a ZooKeeper client", "err", err)
			}
			reconnect = time.After(w.reconnectAfter())
		case f := <-w.fired:
			w.observed = time.Now()
			w.handle(f)
			// Drain what else fired before publishing once.
			for more := true; more; {
				select {
				case f := <-w.fired:
					w.handle(f)
				default:
					more = false
				}
			}
			if w.failed && retry == nil && w.hasSession() {
				retry = time.After(w.retry.NextBackOff())
			}
			w.publish()
		case <-retry:
			retry = nil
			if w.hasSession() {
				retry = w.relist(w.sessions.Load())
			}
		case <-w.relistNow:
			if w.hasSession() && retry == nil {
				retry = w.relist(w.sessions.Load())
			}
		}
	}
}

// authenticate adds the digest credentials once per session (the client
// re-sends them on a reconnect within the session).
func (w *watcher) authenticate() {
	if w.r.creds == "" {
		return
	}
	if err := w.conn.AddAuth("digest", []byte(w.r.creds)); err != nil {
		w.fail("auth", fmt.Errorf("zookeeper: digest authentication: %w", err))
	}
}

// relist reads everything again (doc.go rule 3): on every established
// connection and after a failed read. It returns a retry timer when a read
// failed.
func (w *watcher) relist(session int64) <-chan time.Time {
	w.failed = false
	w.observed = time.Now()
	switch {
	case w.r.builder == nil: // layout spring-cloud
		w.readApps(true)
	default:
		if w.r.builder.Mode().Interface() {
			w.readRoot(true)
		}
		if w.r.builder.Mode().Application() {
			w.readApps(true)
		}
	}
	w.r.setStatus(func(s *Status) {
		s.HasSession = true
		s.Relists++
		s.Sessions = int(session)
	})
	if w.failed {
		return time.After(w.retry.NextBackOff())
	}
	w.relisted = session
	w.retry.Reset()
	w.session.ReadOK(readerEnsemble)
	// The first session's listing is the start, not a re-list.
	w.relisting = w.listed != nil
	if w.relisting {
		w.session.Reconnected(registries.Scope{}, w.observed)
	}
	w.publish()
	w.relisting = false
	return nil
}

// handle re-reads what a fired watch covers and re-arms it. A watch the
// client dropped (EventNotWatching: the session expired or the client
// closed) is re-read only while a session is established; otherwise the
// next re-list sets it again.
func (w *watcher) handle(f fire) {
	if f.gen != w.gen.Load() {
		return // set by a client since replaced
	}
	delete(w.armed, f.key)
	if f.ev.Type == zk.EventNotWatching && !w.hasSession() {
		return
	}
	switch f.key.kind {
	case watchRoot, watchRootExists:
		w.readRoot(false)
	case watchProviders, watchProvidersExist:
		iface := strings.TrimSuffix(strings.TrimPrefix(f.key.path, w.r.root+"/"), "/providers")
		if _, ok := w.ifaces[iface]; ok {
			w.readProviders(iface)
		}
	case watchApps, watchAppsExist:
		w.readApps(false)
	case watchAppInstances:
		app := strings.TrimPrefix(f.key.path, w.r.appsRoot+"/")
		if _, ok := w.apps[app]; ok {
			w.readAppInstances(app, false)
		}
	case watchInstance:
		app, child, _ := strings.Cut(strings.TrimPrefix(f.key.path, w.r.appsRoot+"/"), "/")
		if st, ok := w.apps[app]; ok {
			if _, ok := st.instances[child]; ok {
				w.readInstance(app, child)
			}
		}
	}
}

package nacos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"
	"golang.org/x/time/rate"

	"github.com/meshbridge/meshbridge/registries"
)

// Pacing of the requests a namespace sends besides its listings: subscribes
// (every service at start and after a reconnection), at most
// subscribeWorkers at once and subscribeRate per second, so that a cold
// start of 10,000 services subscribes in about 10 s, well within the default
// sync.timeout, without a burst the server has to queue; and reconcile
// queries, slower, since they only catch lost pushes.
const (
	subscribeRate    = rate.Limit(1000)
	subscribeBurst   = 100
	subscribeWorkers = 16
	reconcileRate    = rate.Limit(20)
	reconcileBurst   = 5
)

// minReconnectGrace is the shortest time after an outage or a
// reconnection during which an empty read or a listing without a known
// service is not trusted (doc.go rule 7; registries.Reporter rule 6):
// Nacos clients re-register their ephemeral instances when they reconnect,
// nacos-sdk-go after up to 5 s of backoff (rpc.RpcClient.reconnect).
const minReconnectGrace = 30 * time.Second

// reconnectGrace is Registry's registries.ReporterConfig.ReconnectGrace:
// max(minReconnectGrace, 2 × RelistInterval).
func reconnectGrace(cfg Config) time.Duration { return max(minReconnectGrace, 2*cfg.RelistInterval) }

// nsWatcher follows one namespace: the list loop (connection, listings,
// subscribes), the emitter (the only caller of the Sink for its services)
// and the reconcile loop.
type nsWatcher struct {
	reg     *Registry
	cfg     Config
	log     *slog.Logger
	session *registries.Session // the one caller of the Sink and of Health, shared by the namespaces
	ns      string

	connMu sync.Mutex
	conn   *conn
	closed bool // Run is ending: no new connection

	connections atomic.Uint64 // connections made, over every conn of the namespace
	reconnected atomic.Bool   // a reconnection happened since the list loop last looked
	// wasDown: the liveness probe found the namespace down since the list
	// loop last looked; its next good listing is a recovery.
	wasDown   atomic.Bool
	relistNow chan struct{} // wakes the list loop early

	mu       sync.Mutex
	services map[string]*service // by svcKey
	skipped  map[string]bool     // listed services skipped as Dubbo (dubbo.enabled false), by svcKey
	ignored  map[string]bool     // listed services dubbo.mode leaves out, by svcKey
	queue    []*service          // services with pending ops, for the emitter
	wake     chan struct{}
	// unsubscribeLater are services left out by the emitter whose
	// subscription the list loop ends.
	unsubscribeLater []*service

	// List loop only.
	listFailing map[string]bool // group → its listing's error snapshot was sent
}

func newNSWatcher(reg *Registry, session *registries.Session, ns string) *nsWatcher {
	return &nsWatcher{
		reg:         reg,
		cfg:         reg.cfg,
		log:         reg.logger.With("namespace", ns),
		session:     session,
		ns:          ns,
		relistNow:   make(chan struct{}, 1),
		services:    map[string]*service{},
		skipped:     map[string]bool{},
		ignored:     map[string]bool{},
		wake:        make(chan struct{}, 1),
		listFailing: map[string]bool{},
	}
}

func (w *nsWatcher) getConn() *conn {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	return w.conn
}

// setConn installs c; false (and c closed) when Run is ending.
func (w *nsWatcher) setConn(c *conn) bool {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	if w.closed {
		c.close()
		return false
	}
	w.conn = c
	return true
}

// closeConn closes the connection; with final, no new one is installed.
func (w *nsWatcher) closeConn(final bool) {
	w.connMu.Lock()
	c := w.conn
	w.conn = nil
	w.closed = w.closed || final
	w.connMu.Unlock()
	if c != nil {
		c.close()
	}
}

// run runs the namespace's goroutines until ctx is done.
func (w *nsWatcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.runEmitter(ctx) })
	wg.Go(func() { w.runReconcile(ctx) })
	wg.Go(func() { w.runList(ctx) })
	wg.Go(func() { w.runWatchdog(ctx) })
	wg.Go(func() { w.runLiveness(ctx) })
	<-ctx.Done()
	// In-flight requests fail at once on a closed connection.
	w.closeConn(true)
	wg.Wait()
}

// hooks are the connection's callbacks (SDK goroutines: they never block).
func (w *nsWatcher) hooks() connHooks {
	return connHooks{push: w.onPush, connected: w.onConnected}
}

// onConnected: every connection after the namespace's first is a
// reconnection, after which the server may have lost the subscriptions.
func (w *nsWatcher) onConnected() {
	if w.connections.Add(1) > 1 {
		w.reconnected.Store(true)
		w.reg.noteReconnect(w.ns)
	}
	w.wakeList()
}

func (w *nsWatcher) wakeList() {
	select {
	case w.relistNow <- struct{}{}:
	default:
	}
}

// watchdogInterval is how often runWatchdog looks at the connection.
const watchdogInterval = 100 * time.Millisecond

// runWatchdog replaces a connection that went down with a new one (dialled
// by the list loop) instead of letting the SDK reconnect it: nacos-sdk-go
// v2.3.5's reconnect of a client that had a connection writes its current
// connection while other goroutines read it unsynchronized (a data race in
// rpc.RpcClient), and a new client, which never had one, reconnects
// without it.
func (w *nsWatcher) runWatchdog(ctx context.Context) {
	t := time.NewTicker(watchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c := w.getConn()
		switch {
		case c == nil:
		case c.connected():
			c.up.Store(true)
		case c.up.Load():
			w.connMu.Lock()
			if w.conn == c {
				w.conn = nil
			}
			w.connMu.Unlock()
			c.close()
			w.log.Debug("Nacos connection lost; replacing it")
			w.wakeList()
		}
	}
}

// onPush queues a pushed service list for the emitter: an authoritative
// snapshot of every instance (doc.go rule 4).
func (w *nsWatcher) onPush(info nacosmodel.Service) {
	group, name := info.GroupName, info.Name
	if g, n := splitServiceName(name); g != "" {
		group, name = g, n
	}
	if group == "" {
		group = DefaultGroup
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.services[svcKey(group, name)]
	if s == nil {
		return
	}
	s.gen++
	w.enqueueLocked(s, op{kind: opRead, info: info, from: fromPush, observed: now})
}

// runEmitter hands queued ops to the Sink, one service at a time.
func (w *nsWatcher) runEmitter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for ctx.Err() == nil {
			s, ops := w.next()
			if s == nil {
				break
			}
			for _, o := range ops {
				w.process(s, o)
			}
		}
	}
}

// runList is the list loop: every RelistInterval, and at once after a
// (re)connection, it lists every group and brings subscriptions in line.
func (w *nsWatcher) runList(ctx context.Context) {
	lim := rate.NewLimiter(subscribeRate, subscribeBurst)
	t := time.NewTicker(w.cfg.RelistInterval)
	defer t.Stop()
	for {
		w.cycle(ctx, lim)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.relistNow:
		}
	}
}

// cycle is one round of the list loop.
func (w *nsWatcher) cycle(ctx context.Context, lim *rate.Limiter) {
	c := w.getConn()
	if c == nil {
		var ok bool
		if c, ok = w.connect(ctx); !ok {
			return
		}
	}
	w.checkLogin()
	if !c.connected() {
		// The listings below fail; their error says why.
		c.setWhy(w.reg.probeGRPCPorts(ctx))
	} else {
		c.setWhy(nil)
	}
	now := time.Now()
	w.unsubscribeSkipped(c)

	listings := map[string][]string{}
	partial := map[string]bool{}
	recovered := false
	for _, g := range w.cfg.Groups {
		names, part, err := c.listServices(g)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.failListing(g, w.noteFailure(listReader(w.ns, g), reasonList, err), now)
			continue
		}
		w.session.ReadOK(listReader(w.ns, g))
		listings[g], partial[g] = names, part
		recovered = recovered || w.listFailing[g]
	}
	// A listing that succeeds after failures, or after the liveness probe
	// found the server down, follows a reconnection as surely as the SDK's
	// connection event, which may come later or never (a hung server's
	// connection may survive): the grace starts with whichever is seen
	// first.
	if w.reconnected.Swap(false) || w.wasDown.Swap(false) || recovered {
		w.afterReconnect(now)
	}
	held := w.dropAliases(c, listings)
	for _, g := range w.cfg.Groups {
		if names, ok := listings[g]; ok {
			w.applyListing(c, g, names, partial[g] || held[g], now)
		}
	}
	w.subscribePending(ctx, c, lim)
	w.recheckUnconfirmed(ctx, c, lim)
}

// settleTries bounds how often connect dials again a connection the server
// had not registered yet (conn.settle).
const settleTries = 5

// connect dials the namespace's connection, up to settleTries times while
// the server answers that it has not registered it (conn.settle). When it
// does not come up, a
// server that is Nacos 1.x is a permanent error and the connection is
// closed (dialled again next cycle, not retried by the SDK meanwhile); any
// other server keeps the connection, which the SDK keeps reconnecting.
func (w *nsWatcher) connect(ctx context.Context) (*conn, bool) {
	var c *conn
	var err error
	for try := 1; ; try++ {
		if c, err = dial(w.reg, w.ns, w.hooks()); err != nil || c.settle(ctx) || try == settleTries || ctx.Err() != nil {
			break
		}
		// The server was too slow to register the connection (conn.settle).
		c.close()
		w.log.Debug("Nacos had not registered the new connection; dialling again", "namespace", w.ns, "try", try)
	}
	now := time.Now()
	if err != nil {
		w.failAll(w.noteFailure(connectReader(w.ns), reasonConnect, err), now)
		return nil, false
	}
	if !c.connected() {
		if err := w.reg.diagnose(ctx); errors.Is(err, errNacos1) {
			c.close()
			w.failAll(w.noteFailure(connectReader(w.ns), reasonConnect, err), now)
			return nil, false
		}
	}
	if !w.setConn(c) {
		return nil, false
	}
	w.session.ReadOK(connectReader(w.ns))
	return c, true
}

// failAll reports a failure of the whole namespace (it cannot connect) to
// every group's listing.
func (w *nsWatcher) failAll(err error, now time.Time) {
	for _, g := range w.cfg.Groups {
		w.failListing(g, err, now)
	}
}

// failListing reports a failed listing of group: the group's
// registry-wide error snapshot and an error snapshot for each of its
// services (registries.Reporter.Down: once per run); their last-known-good
// state stays (an error is never an empty listing). The group's services
// are read again when a listing succeeds.
func (w *nsWatcher) failListing(group string, err error, now time.Time) {
	w.listFailing[group] = true
	w.session.Down(w.scope(group), fmt.Errorf("list Nacos services (namespace %q, group %q): %w", w.ns, group, err), now)
}

// afterReconnect: the server may have lost every subscription (a restarted
// server, another server of the cluster, a hung one that dropped the
// connection), and a restarted server may not know instances whose clients
// have not re-registered yet. Every service is subscribed again, and the
// Reporter distrusts, for the grace period, an empty read of a service that
// had instances and its absence from a listing (doc.go rule 7).
func (w *nsWatcher) afterReconnect(now time.Time) {
	w.mu.Lock()
	n := 0
	for _, s := range w.services {
		if s.subscribed {
			s.subscribed = false
			n++
		}
	}
	w.reg.noteCounts(-n, 0, 0)
	total := len(w.services)
	w.mu.Unlock()
	for _, g := range w.cfg.Groups {
		w.session.Reconnected(w.scope(g), now)
	}
	w.log.Debug("Reconnected to Nacos; subscribing again", "services", total, "grace", reconnectGrace(w.cfg))
}

// dropAliases removes Polaris's aliases from the listings: Polaris lists
// every group's services in DEFAULT_GROUP's listing, those of another group
// as "<group>__<service>". A name "X__Y" of group G's listing (X ≠ G) is an
// alias when group X lists Y; it is dropped. When group X cannot be listed
// the name is undecided: the group's listing is then treated as partial
// (doc.go rule 3). held reports those groups.
func (w *nsWatcher) dropAliases(c *conn, listings map[string][]string) (held map[string]bool) {
	held = map[string]bool{}
	other := map[string]map[string]bool{} // group → its names; nil when it cannot be listed
	namesOf := func(g string) map[string]bool {
		if m, ok := other[g]; ok {
			return m
		}
		var m map[string]bool
		names, ok := listings[g]
		if !ok && !slices.Contains(w.cfg.Groups, g) && c != nil {
			var err error
			names, _, err = c.listServices(g)
			ok = err == nil
		}
		if ok {
			m = map[string]bool{}
			for _, n := range names {
				m[n] = true
			}
		}
		other[g] = m
		return m
	}
	for g, names := range listings {
		kept := names[:0:0]
		for _, n := range names {
			x, y, found := strings.Cut(n, "__")
			if !found || x == "" || y == "" || x == g {
				kept = append(kept, n)
				continue
			}
			switch m := namesOf(x); {
			case m == nil:
				held[g] = true
			case m[y]:
				// an alias of group x's service y
			default:
				kept = append(kept, n)
			}
		}
		listings[g] = kept
	}
	return held
}

// applyListing brings the group's services in line with a successful
// listing: new services that pass the filters are created (and subscribed
// by subscribePending); services the Reporter removes for missing from it
// (not when it is partial, nor within a reconnection's grace) are
// unsubscribed and forgotten.
func (w *nsWatcher) applyListing(c *conn, group string, names []string, partial bool, now time.Time) {
	recovered := w.listFailing[group]
	w.listFailing[group] = false
	var keys []registries.ServiceKey
	var unsubscribe []*service
	w.mu.Lock()
	listed := map[string]bool{}
	for _, n := range names {
		key := svcKey(group, n)
		listed[key] = true
		providers := strings.HasPrefix(n, providersPrefix)
		switch {
		case isDubboName(n) && !w.cfg.Dubbo.IsEnabled():
			if !w.skipped[key] {
				w.skipped[key] = true
				w.countSkippedLocked(group, n, "a Dubbo interface-level service name")
			}
			continue
		case isDubboName(n) && !providers:
			continue // consumers, routers, configurators: registrations, not services
		case providers && !w.reg.dubbo.Mode().Interface():
			if !w.ignored[key] {
				w.ignored[key] = true
				w.log.Debug("Left out a Dubbo interface-level service (dubbo.mode)", "group", group, "service", n,
					"mode", string(w.reg.dubbo.Mode()))
			}
			continue
		case w.skipped[key], w.ignored[key], !allowed(w.cfg.Services, n):
			continue
		}
		s := w.services[key]
		if s == nil {
			s = &service{group: group, name: n, providers: providers}
			w.services[key] = s
		} else if recovered && s.subscribed {
			// Read it again: its error snapshot went out with the
			// listing's failure.
			s.subscribed = false
			w.reg.noteCounts(-1, 0, 0)
		}
		keys = append(keys, w.keyOf(s))
	}
	w.mu.Unlock()
	var removed []registries.ServiceKey
	if partial {
		w.session.PartialListing(w.scope(group), keys, now)
	} else {
		removed = w.session.Listing(w.scope(group), keys, now)
	}
	w.mu.Lock()
	for _, key := range removed {
		s := w.services[svcKey(key.Group, key.Name)]
		if s == nil {
			continue
		}
		delete(w.services, svcKey(key.Group, key.Name))
		s.gone, s.ops = true, nil
		w.forgetProtectionLocked(s)
		if s.subscribed {
			unsubscribe = append(unsubscribe, s)
			s.subscribed = false
			w.reg.noteCounts(-1, 0, 0)
		}
		w.session.ForgetReader(serviceReader(w.ns, s.group, s.name))
	}
	for key := range w.skipped {
		if strings.HasPrefix(key, group+"@@") && !listed[key] && !partial {
			delete(w.skipped, key)
			w.reg.noteCounts(0, -1, 0)
		}
	}
	for key := range w.ignored {
		if strings.HasPrefix(key, group+"@@") && !listed[key] && !partial {
			delete(w.ignored, key)
		}
	}
	w.mu.Unlock()
	for _, s := range unsubscribe {
		if err := c.unsubscribe(s.group, s.name); err != nil {
			w.log.Debug("Unsubscribe failed; its pushes are ignored", "group", s.group, "service", s.name, "err", w.reg.redact(err))
		}
	}
}

// countSkipped counts a service skipped as Dubbo while dubbo.enabled is
// false (doc.go rule 8).
func (w *nsWatcher) countSkipped(group, name, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.countSkippedLocked(group, name, why)
}

func (w *nsWatcher) countSkippedLocked(group, name, why string) {
	registries.RegistrySkipped.WithLabelValues(w.cfg.Name, "dubbo").Inc()
	w.reg.noteCounts(0, 1, 0)
	w.log.Debug("Skipped a Dubbo service (dubbo.enabled is false)", "group", group, "service", name, "why", why)
}

// unsubscribeSkipped ends the subscriptions of services the emitter left
// out.
func (w *nsWatcher) unsubscribeSkipped(c *conn) {
	w.mu.Lock()
	list := w.unsubscribeLater
	w.unsubscribeLater = nil
	for _, s := range list {
		if s.subscribed {
			s.subscribed = false
			w.reg.noteCounts(-1, 0, 0)
		}
	}
	w.mu.Unlock()
	for _, s := range list {
		_ = c.unsubscribe(s.group, s.name)
	}
}

// subscribePending subscribes every service without a subscription on the
// current connection: new services, services whose subscribe or query
// failed, every service after a reconnection.
func (w *nsWatcher) subscribePending(ctx context.Context, c *conn, lim *rate.Limiter) {
	workers := make(chan struct{}, subscribeWorkers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, s := range w.servicesWhere(func(s *service) bool { return !s.subscribed }) {
		if lim.Wait(ctx) != nil {
			return
		}
		workers <- struct{}{}
		wg.Go(func() {
			defer func() { <-workers }()
			w.read(c, s, fromSubscribe)
		})
	}
}

// recheckUnconfirmed queries every cycle the services whose last read was
// an empty one the Reporter held back (within a reconnection's grace), so
// that one whose group gets no pushes (Polaris pushes DEFAULT_GROUP only)
// recovers within a RelistInterval of its instances' return.
func (w *nsWatcher) recheckUnconfirmed(ctx context.Context, c *conn, lim *rate.Limiter) {
	for _, s := range w.servicesWhere(func(s *service) bool { return s.subscribed && w.session.Held(w.keyOf(s)) }) {
		if lim.Wait(ctx) != nil {
			return
		}
		w.read(c, s, fromReconcile)
	}
}

// servicesWhere returns the live services matching pred.
func (w *nsWatcher) servicesWhere(pred func(*service) bool) []*service {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*service
	for _, s := range w.services {
		if !s.gone && pred(s) {
			out = append(out, s)
		}
	}
	return out
}

// read reads s from the server, by subscribing (from == fromSubscribe) or
// by querying, and queues the answer for the emitter unless a push arrived
// meanwhile (the push is at least as new). A failure queues an error and
// leaves s unsubscribed, so the next cycle reads it again.
func (w *nsWatcher) read(c *conn, s *service, from source) {
	w.mu.Lock()
	gen := s.gen
	w.mu.Unlock()
	var info nacosmodel.Service
	var err error
	if from == fromSubscribe {
		info, err = c.subscribe(s.group, s.name)
	} else {
		info, err = c.query(s.group, s.name)
	}
	now := time.Now()
	reader := serviceReader(w.ns, s.group, s.name)
	if err != nil {
		err = w.noteFailure(reader, reasonRead, err)
		w.mu.Lock()
		if s.subscribed {
			s.subscribed = false
			w.reg.noteCounts(-1, 0, 0)
		}
		w.enqueueLocked(s, op{kind: opErr, err: err, observed: now})
		w.mu.Unlock()
		return
	}
	w.session.ReadOK(reader)
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.gone {
		return
	}
	if from == fromSubscribe && !s.subscribed {
		s.subscribed = true
		w.reg.noteCounts(1, 0, 0)
	}
	if s.gen == gen {
		w.enqueueLocked(s, op{kind: opRead, info: info, from: from, observed: now})
	}
}

// runReconcile queries every subscribed service each ReconcileInterval (±10
// %), paced by a token bucket: pushes can be lost (the SDK drops a push
// older than the one it holds; Polaris pushes DEFAULT_GROUP only), and a
// subscription cache cannot tell.
func (w *nsWatcher) runReconcile(ctx context.Context) {
	lim := rate.NewLimiter(reconcileRate, reconcileBurst)
	for {
		d := time.Duration(float64(w.cfg.ReconcileInterval) * (0.9 + 0.2*rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		c := w.getConn()
		if c == nil || !c.connected() {
			continue // the list loop reports the outage
		}
		for _, s := range w.servicesWhere(func(s *service) bool { return s.subscribed }) {
			if lim.Wait(ctx) != nil {
				return
			}
			w.read(c, s, fromReconcile)
		}
	}
}

// noteFailure records a failed read by reader with the session under reason
// (or "forbidden" when Nacos's auth refused it) and returns err with every
// secret redacted and marked permanent when retrying cannot fix it: the
// error to put in a Snapshot.
func (w *nsWatcher) noteFailure(reader, reason string, err error) error {
	return w.noteFailureSince(reader, reason, err, time.Time{})
}

// noteFailureSince is noteFailure for a failure that started at since
// (registries.Session.ReadFailedSince).
func (w *nsWatcher) noteFailureSince(reader, reason string, err error, since time.Time) error {
	var se *serverError
	if errors.As(err, &se) && se.forbidden() {
		reason = reasonForbidden
		err = registries.Permanent(err)
	}
	err = w.reg.redact(err)
	w.session.ReadFailedSince(reader, reason, err, since)
	return err
}

// checkLogin reports the last login the SDK attempted (httpAgent records
// it): a refused one keeps the registry down with a clear error until a
// login succeeds, even while reads succeed (a server without auth answers
// them anyway).
func (w *nsWatcher) checkLogin() {
	if w.reg.secrets.username == "" {
		return
	}
	err, answered := w.reg.agent.login()
	switch {
	case !answered:
	case err != nil:
		w.noteFailure(readerLogin, reasonLogin, err)
	default:
		w.session.ReadOK(readerLogin)
	}
}

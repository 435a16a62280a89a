package consul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/time/rate"

	"github.com/meshbridge/meshbridge/registries"
)

// watcher is one Run of a Registry: the catalog loop (the run goroutine),
// one goroutine per watched service, the state/any loop and the read loop
// for the rest, and the liveness probe.
type watcher struct {
	reg    *Registry
	cfg    Config
	logger *slog.Logger
	client *api.Client
	// session is the one caller of the Sink (its registries.Reporter) and
	// of the registry's Health.
	session *registries.Session
	// gate holds every read while the agent does not answer (hang.go).
	gate *gate
	// remoteDC is Config.Datacenter when it is not the agent's own; set
	// before any reader starts.
	remoteDC string

	wg      sync.WaitGroup
	polled  *pollSet
	rereads *rate.Limiter       // paces the polled services' reads
	watches map[string]*watch   // catalog loop only
	listed  map[string]*service // catalog loop only
}

// watch is a running per-service blocking query.
type watch struct {
	cancel context.CancelFunc
}

func newWatcher(reg *Registry, client *api.Client, sink registries.Sink) *watcher {
	session := registries.NewSession(reg.health, registries.ReporterConfig{Registry: reg.cfg.Name, Sink: sink, Logger: reg.logger})
	reg.noteSession(session)
	return &watcher{
		reg:     reg,
		cfg:     reg.cfg,
		logger:  reg.logger,
		client:  client,
		session: session,
		gate:    newGate(),
		polled:  newPollSet(),
		rereads: rate.NewLimiter(rereadRate, rereadBurst),
		watches: map[string]*watch{},
		listed:  map[string]*service{},
	}
}

func (w *watcher) limiter() *rate.Limiter { return rate.NewLimiter(w.cfg.RateLimit, w.cfg.Burst) }

// run is the catalog loop; it returns when ctx is done and every reader
// stopped.
func (w *watcher) run(ctx context.Context, probe *api.Client) {
	defer w.wg.Wait()
	w.wg.Go(func() { w.runLiveness(ctx, probe) })
	if !w.resolveDatacenter(ctx) {
		return
	}
	w.wg.Go(func() { w.runState(ctx) })
	w.wg.Go(func() { w.runPollReads(ctx) })

	listed := false
	blockingQuery[map[string][]string]{
		reader: readerCatalog,
		read: func(q *api.QueryOptions) (map[string][]string, *api.QueryMeta, error) {
			q.Filter = typicalKindFilter
			return w.client.Catalog().Services(q)
		},
		failed: func(err error, now time.Time) {
			w.failListing(w.noteFailure(reasonCatalog, "", err), now)
		},
		answered: func(ctx context.Context, names map[string][]string, meta *api.QueryMeta, a answer, now time.Time) {
			w.reg.noteACL(meta, len(names))
			if !a.fresh() {
				return
			}
			if a.reset() {
				w.session.Reconnected(registries.Scope{}, now)
			}
			w.reconcile(ctx, selectServices(names, w.cfg.Services), now)
			if listed {
				// An instance registered without checks changes no check, so
				// state/any cannot see it: re-read check-less polled services.
				w.polled.recheckCheckless()
			}
			listed = true
		},
	}.run(ctx, w)
}

// typicalKindFilter keeps connect proxies and gateways out of the listing.
const typicalKindFilter = `ServiceKind == ""`

// resolveDatacenter sets remoteDC when Config.Datacenter names a datacenter
// other than the agent's own; it retries until ctx is done.
func (w *watcher) resolveDatacenter(ctx context.Context) bool {
	if w.cfg.Datacenter == "" {
		return true
	}
	retry := newRetry()
	for {
		wake := w.session.Recovery()
		rctx, done, ok := w.gate.begin(ctx)
		if !ok {
			return false
		}
		var self map[string]map[string]any
		_, err := w.client.Raw().Query("/v1/agent/self", &self, (&api.QueryOptions{}).WithContext(rctx))
		err = done(err)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			w.session.ReadOK(readerCatalog)
			if dc, _ := self["Config"]["Datacenter"].(string); dc != w.cfg.Datacenter {
				w.remoteDC = w.cfg.Datacenter
			}
			return true
		}
		w.failListing(w.noteFailure(reasonCatalog, "", err), time.Now())
		if !retry.wait(ctx, wake) {
			return false
		}
	}
}

// failListing reports a failed registry-wide read (the catalog listing or
// the datacenter lookup): one registry-wide error snapshot (an empty
// Service.Name) per run of failures; the services' last-known-good state
// stays, and a one-shot reader learns that nothing can be listed
// (permanently so for a refused token or certificate).
func (w *watcher) failListing(err error, observed time.Time) {
	w.session.FailListing(registries.Scope{}, fmt.Errorf("list Consul services: %w", err), observed)
}

// reconcile brings readers in line with the wanted services (sorted by name):
// the listing goes to the Reporter, which removes the services it no longer
// holds; the first MaxWatches get their own watch and the rest go to the
// poll set.
func (w *watcher) reconcile(ctx context.Context, wanted []string, now time.Time) {
	keys := make([]registries.ServiceKey, len(wanted))
	for i, name := range wanted {
		keys[i] = w.serviceOf(name, nil).Key()
	}
	for _, key := range w.session.Listing(registries.Scope{}, keys, now) {
		name := key.Name
		w.stopWatch(name)
		w.polled.remove(name)
		if s := w.listed[name]; s != nil {
			s.stop()
			delete(w.listed, name)
		}
		w.session.ForgetReader(serviceReader(name))
		w.logger.Debug("Removed Consul service", "service", name)
	}
	for i, name := range wanted {
		s := w.listed[name]
		if s == nil {
			s = &service{name: name}
			w.listed[name] = s
		}
		switch {
		case i < w.cfg.MaxWatches && w.watches[name] == nil:
			w.polled.remove(name)
			w.startWatch(ctx, s)
		case i >= w.cfg.MaxWatches && !w.polled.has(name):
			w.stopWatch(name)
			w.polled.add(s, s.takeOwnership())
		}
	}
	w.reg.noteReaders(len(w.watches), len(wanted)-len(w.watches))
	w.logger.Debug("Listed Consul services", "count", len(wanted),
		"watched", len(w.watches), "polled", len(wanted)-len(w.watches))
}

func (w *watcher) startWatch(ctx context.Context, s *service) {
	ctx, cancel := context.WithCancel(ctx)
	w.watches[s.name] = &watch{cancel: cancel}
	owner := s.takeOwnership()
	w.wg.Go(func() { w.watchService(ctx, s, owner) })
}

func (w *watcher) stopWatch(name string) {
	if wt := w.watches[name]; wt != nil {
		wt.cancel()
		delete(w.watches, name)
	}
}

// watchService follows one service with blocking health queries
// (blockingQuery) until ctx is done. After a failure it keeps the index but
// reads without blocking, so a recovered Consul clears the error at its
// first answer.
func (w *watcher) watchService(ctx context.Context, s *service, owner uint64) {
	blockingQuery[[]*api.ServiceEntry]{
		reader: serviceReader(s.name),
		read: func(q *api.QueryOptions) ([]*api.ServiceEntry, *api.QueryMeta, error) {
			return w.client.Health().Service(s.name, "", false, q)
		},
		failed: func(err error, now time.Time) { w.failRead(s, owner, err, now) },
		answered: func(_ context.Context, entries []*api.ServiceEntry, _ *api.QueryMeta, a answer, now time.Time) {
			if a.fresh() {
				w.apply(s, owner, entries, now, a.reset())
			}
		},
	}.run(ctx, w)
}

// noteFailure records a failed read by loop (reasonCatalog, reasonState,
// or reasonHealth for a read of service) with the session, and returns err
// marked permanent when retrying cannot fix it and with the token redacted:
// the error to put in a Snapshot.
func (w *watcher) noteFailure(loop, service string, err error) error {
	reader := loop
	if service != "" {
		reader = serviceReader(service)
	}
	err = w.reg.redact(classify(withoutQuery(err)))
	logged := err
	if service != "" {
		logged = fmt.Errorf("read Consul service %q: %w", service, err)
	}
	w.session.ReadFailed(reader, errorReason(loop, err), logged)
	return err
}

// withoutQuery drops the query string from the URL of a failed request's
// error: it holds the blocking query's index and wait, which change from
// one failed read to the next, and an error's text is what tells one
// failure from another (registries.Reporter sends a registry-wide error
// once per run of the same text).
func withoutQuery(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil || u.RawQuery == "" {
		return err
	}
	u.RawQuery = ""
	return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
}

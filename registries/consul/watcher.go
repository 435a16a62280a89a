package consul

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/time/rate"

	"github.com/meshbridge/meshbridge/registries"
)

// watcher is one Run of a Registry: the catalog loop (the run goroutine),
// one goroutine per watched service, and the state/any loop for the rest.
type watcher struct {
	reg    *Registry
	cfg    Config
	logger *slog.Logger
	client *api.Client
	sink   registries.Sink
	// remoteDC is Config.Datacenter when it is not the agent's own; set
	// before any reader starts.
	remoteDC string

	wg      sync.WaitGroup
	polled  *pollSet
	watches map[string]*watch   // catalog loop only
	listed  map[string]*service // catalog loop only

	// listFailing is true while registry-wide reads (the catalog listing,
	// the datacenter lookup) fail and their error snapshot was sent; catalog
	// loop only.
	listFailing bool

	mu      sync.Mutex      // guards pending
	pending map[string]bool // services whose first read Synced waits for; nil once synced
	listing bool            // the first catalog listing arrived
}

// watch is a running per-service blocking query.
type watch struct {
	cancel context.CancelFunc
}

func newWatcher(reg *Registry, client *api.Client, sink registries.Sink) *watcher {
	return &watcher{
		reg:     reg,
		cfg:     reg.cfg,
		logger:  reg.logger,
		client:  client,
		sink:    sink,
		polled:  newPollSet(),
		watches: map[string]*watch{},
		listed:  map[string]*service{},
		pending: map[string]bool{},
	}
}

func (w *watcher) limiter() *rate.Limiter { return rate.NewLimiter(w.cfg.RateLimit, w.cfg.Burst) }

// run is the catalog loop; it returns when ctx is done and every reader
// stopped.
func (w *watcher) run(ctx context.Context) {
	defer w.wg.Wait()
	if !w.resolveDatacenter(ctx) {
		return
	}
	w.wg.Go(func() { w.runState(ctx) })

	lim, retry := w.limiter(), newRetry()
	var index uint64
	listed := false
	for {
		if lim.Wait(ctx) != nil {
			return
		}
		q := &api.QueryOptions{WaitIndex: index, WaitTime: w.cfg.WaitTime, Filter: typicalKindFilter}
		if w.listFailing {
			q.WaitIndex = 0 // confirm the recovery at once (see watchService)
		}
		wake := w.reg.recovery()
		names, meta, err := w.client.Catalog().Services(q.WithContext(ctx))
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if err != nil {
			w.failListing(w.reg.noteFailure(reasonCatalog, "", err), now)
			if !retry.wait(ctx, wake) {
				return
			}
			continue
		}
		retry.reset()
		w.reg.noteOK(readerCatalog)
		relist := w.listFailing
		w.listFailing = false
		w.reg.noteACL(meta, len(names))
		next, changed := nextIndex(index, meta.LastIndex)
		if next == 0 {
			w.logger.Info("Reset Consul index that went backwards", "index", meta.LastIndex, "prev", index)
			relist = true
		}
		index = next
		if !changed {
			continue
		}
		w.reconcile(ctx, selectServices(names, w.cfg.Services), now, relist)
		if listed {
			// An instance registered without checks changes no check, so
			// state/any cannot see it: re-read check-less polled services.
			w.polled.recheckCheckless()
		}
		listed = true
	}
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
		wake := w.reg.recovery()
		self, err := w.client.Agent().Self()
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			w.reg.noteOK(readerCatalog)
			w.listFailing = false
			if dc, _ := self["Config"]["Datacenter"].(string); dc != w.cfg.Datacenter {
				w.remoteDC = w.cfg.Datacenter
			}
			return true
		}
		w.failListing(w.reg.noteFailure(reasonCatalog, "", err), time.Now())
		if !retry.wait(ctx, wake) {
			return false
		}
	}
}

// failListing emits the registry-wide error snapshot (an empty
// Service.Name, registries.Snapshot), once per run of failures: the
// services' last-known-good state stays, and a one-shot reader learns that
// nothing can be listed (permanently so for a refused token or certificate).
func (w *watcher) failListing(err error, observed time.Time) {
	if w.listFailing {
		return
	}
	w.listFailing = true
	w.sink.Snapshot(registries.Snapshot{
		Registry: w.cfg.Name,
		Err:      fmt.Errorf("list Consul services: %w", err),
		Observed: observed,
	})
}

// reconcile brings readers in line with the wanted services (sorted by name):
// the first MaxWatches get their own watch, the rest go to the state/any loop,
// and services no longer wanted are removed, after the listing is reported
// (registries.Sink.Listing). relist marks a listing right after an index
// reset or a failed listing.
func (w *watcher) reconcile(ctx context.Context, wanted []string, now time.Time, relist bool) {
	keep := make(map[string]bool, len(wanted))
	keys := make([]string, len(wanted))
	for i, name := range wanted {
		keep[name] = true
		keys[i] = w.serviceOf(name, nil).Key()
	}
	w.sink.Listing(w.cfg.Name, "", keys)
	for name, s := range w.listed {
		if !keep[name] {
			w.stopWatch(name)
			w.polled.remove(name)
			delete(w.listed, name)
			w.remove(s, now, relist)
		}
	}
	w.startListing(wanted)
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

// watchService follows one service with blocking health queries until ctx
// is done. After a failure it keeps the index but reads without blocking,
// so a recovered Consul clears the error at its first answer.
func (w *watcher) watchService(ctx context.Context, s *service, owner uint64) {
	lim, retry := w.limiter(), newRetry()
	var index uint64
	failing := false
	for {
		if lim.Wait(ctx) != nil {
			return
		}
		q := &api.QueryOptions{WaitIndex: index, WaitTime: w.cfg.WaitTime}
		if failing {
			// A blocking query on the old index would hold the first good
			// answer back until the index moves or the wait ends: read
			// the current state at once instead. The index is kept for
			// nextIndex.
			q.WaitIndex = 0
		}
		wake := w.reg.recovery()
		entries, meta, err := w.client.Health().Service(s.name, "", false, q.WithContext(ctx))
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if err != nil {
			w.failRead(s, owner, err, now)
			failing = true
			if !retry.wait(ctx, wake) {
				return
			}
			continue
		}
		retry.reset()
		w.reg.noteOK(serviceReader(s.name))
		next, changed := nextIndex(index, meta.LastIndex)
		index = next
		if changed || failing {
			w.apply(s, owner, entries, now, next == 0)
		}
		failing = false
	}
}

// startListing records the first listing's services as the ones Synced
// waits for.
func (w *watcher) startListing(wanted []string) {
	w.mu.Lock()
	if w.listing {
		w.mu.Unlock()
		return
	}
	w.listing = true
	for _, name := range wanted {
		w.pending[name] = true
	}
	w.mu.Unlock()
	w.markRead("")
}

// markRead notes a service's first successful read (or its removal) and calls
// Synced once the first listing's services are all read.
func (w *watcher) markRead(name string) {
	w.mu.Lock()
	if w.pending == nil {
		w.mu.Unlock()
		return
	}
	delete(w.pending, name)
	done := w.listing && len(w.pending) == 0
	if done {
		w.pending = nil
	}
	w.mu.Unlock()
	if done {
		w.reg.noteSynced()
		w.sink.Synced(w.cfg.Name)
	}
}

// Package pipeline builds and runs meshbridge's data path, the one way
// cmd/bridge, the benchmarks and the tests wire it: registries → Syncer
// (package syncer) → Store → Controller (package serviceentry) → DNS
// (package xds/dns: endpoint names resolved) → DiscoveryServer (package
// xds), and the Store → MCP (validated by package translate).
//
// Rules:
//  1. Ready gate: the xDS server serves only once the Syncer is ready (every
//     registry listed its services, or sync.timeout passed) and the Store's
//     handlers processed everything written so far, so the first response
//     already holds the whole mesh (no partial mesh: grpc-go treats a
//     missing resource as deleted).
//  2. Each registry watcher runs on its own context: a watcher whose Run
//     fails is logged and reported to the Syncer as a registry-wide read
//     error (its services are kept, as for any outage) and does not stop
//     the others or the pipeline.
//  3. The pipeline owns the set of registries and its order: Configure
//     changes it (a reload), in this order: the watchers of removed and
//     restarted registries stop and wait; the Syncer removes the removed
//     ones and takes the configuration order (rule 1 of package syncer:
//     shared hosts are re-decided); the OnAdd hooks hear of each added
//     registry; the Syncer adds or restarts the others; their watchers
//     start. So no snapshot of a stopped watcher reaches the Syncer, and
//     every consumer knows a registry before any of its objects exists.
//
// The Kubernetes writer and the HTTP endpoints are cmd/bridge's: they read
// the Store and the Syncer this package exposes.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
	"github.com/meshbridge/meshbridge/xds/dns"
)

// Registry is one configured registry: its watcher and the Syncer's view
// of it (its translator and outage policy).
type Registry struct {
	Watcher registries.Registry
	Sync    syncer.Registry
}

// Name is the registry's name.
func (r Registry) Name() string { return r.Sync.Name }

// Options configure a Pipeline.
type Options struct {
	// Registries are the registries the pipeline starts with, in
	// configuration order.
	Registries []Registry
	// Sync configures the Syncer; its Registries are Options.Registries'.
	Sync syncer.Config
	// XDS configures the DiscoveryServer. With MCP set, XDS.MCP is filled
	// in with the Store as its source and translate.ValidateConfig as its
	// validation.
	XDS xds.Options
	// DNS configures the resolution of endpoint names between the
	// Controller and the DiscoveryServer; its Logger is Logger.
	DNS dns.Options
	// MCP serves the Store's ServiceEntries and WorkloadEntries to istiod
	// (config key mcp.enabled).
	MCP    bool
	Logger *slog.Logger
}

// Pipeline is the running data path. Its exported fields are set by New
// and read-only after.
type Pipeline struct {
	Store      *serviceentry.Store
	Syncer     *syncer.Syncer
	Controller *serviceentry.Controller
	// DNS is the Controller's XDSUpdater: it hands XDS the endpoints with
	// their DNS names resolved.
	DNS *dns.Updater
	XDS *xds.DiscoveryServer

	log   *slog.Logger
	ready chan struct{}

	// reconf serialises Configure calls.
	reconf sync.Mutex

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run
	regs     []Registry      // configured, in order
	onAdd    []func(name string)
	running  map[string]*watcher
	watchers sync.WaitGroup
}

// watcher is one running registry watcher.
type watcher struct {
	reg    registries.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// sourceFunc adapts a function to xds.ServiceSource: the server lists the
// controller's services, and the controller pushes to the server.
type sourceFunc func() []*model.Service

func (f sourceFunc) Services() []*model.Service { return f() }

// New builds a pipeline; nothing runs until Run.
func New(opts Options) *Pipeline {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	opts.Sync.Logger, opts.XDS.Logger, opts.DNS.Logger = log, log, log
	opts.Sync.Registries = nil
	for _, r := range opts.Registries {
		opts.Sync.Registries = append(opts.Sync.Registries, r.Sync)
	}
	p := &Pipeline{log: log, ready: make(chan struct{}), running: map[string]*watcher{}, regs: slices.Clone(opts.Registries)}
	p.Store = serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	p.Syncer = syncer.New(p.Store, opts.Sync)
	if opts.MCP {
		opts.XDS.MCP = &xds.MCPOptions{Source: p.Store, Validate: translate.ValidateConfig}
	}
	p.XDS = xds.NewDiscoveryServer(sourceFunc(func() []*model.Service { return p.Controller.Services() }), opts.XDS)
	p.DNS = dns.New(p.XDS, opts.DNS)
	p.Controller = serviceentry.NewController(p.Store, p.DNS, log)
	if opts.MCP {
		for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
			p.Store.RegisterEventHandler(kind, func(_, _ model.Object, _ model.Event) { p.XDS.MCPConfigChanged(kind) })
		}
	}
	return p
}

// Ready is closed once the ready gate opened (rule 1).
func (p *Pipeline) Ready() <-chan struct{} { return p.ready }

// Run runs the store, the Syncer, the registries' watchers, the DNS
// lookups and the xDS server until ctx is done, then stops every watcher
// and returns. It returns the xDS server's error (a port that cannot be
// bound) at once, having stopped the rest.
func (p *Pipeline) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A Configure call waits until the configured watchers started.
	p.reconf.Lock()
	p.mu.Lock()
	p.ctx = ctx
	regs := slices.Clone(p.regs)
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.Store.Run(ctx) })
	wg.Go(func() { p.Syncer.Run(ctx) })
	wg.Go(func() { p.DNS.Run(ctx) })
	for _, r := range regs {
		p.start(r.Watcher)
	}
	p.reconf.Unlock()
	wg.Go(func() { p.gate(ctx) })
	err := p.XDS.Run(ctx, p.ready)
	cancel()
	wg.Wait()
	p.watchers.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// gate opens the ready gate (rule 1).
func (p *Pipeline) gate(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-p.Syncer.Ready():
	}
	if err := p.Store.Flush(ctx); err != nil {
		return
	}
	close(p.ready)
	p.log.Info("Aggregate registry synced", "count", len(p.Controller.Services()))
}

// WaitReady waits until the ready gate opened, ctx is done (its error), or
// timeout passed (an error naming it).
func (p *Pipeline) WaitReady(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("the aggregate registry did not sync within %s", timeout)
	}
}

// WaitIdle returns once every endpoint name in use has been looked up once
// and the shards using it handed to the xDS server, then once every push
// request made so far (an XDSUpdater call, a name's new addresses) has been
// pushed, or ctx's error. It is a test hook, as serviceentry.Store.Flush is
// for the store's handlers: once both return with nothing changing, a new
// client is answered from what the server will keep serving.
func (p *Pipeline) WaitIdle(ctx context.Context) error {
	if err := p.DNS.WaitResolved(ctx); err != nil {
		return err
	}
	return p.XDS.WaitIdle(ctx)
}

// start runs r's watcher on its own context (rule 2); before Run, Run
// starts it.
func (p *Pipeline) start(r registries.Registry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	w := &watcher{reg: r, cancel: cancel, done: make(chan struct{})}
	p.running[r.Name()] = w
	p.watchers.Go(func() {
		defer close(w.done)
		err := r.Run(ctx, p.Syncer)
		if err == nil || ctx.Err() != nil {
			return
		}
		p.log.Error("Registry watcher stopped; its services are kept until the configuration changes it",
			"registry", r.Name(), "err", err)
		p.Syncer.Snapshot(registries.Snapshot{Registry: r.Name(), Err: fmt.Errorf("watcher stopped: %w", err),
			Observed: time.Now()})
	})
}

// stop stops the named watcher and waits for it; false when none runs.
func (p *Pipeline) stop(name string) bool {
	p.mu.Lock()
	w := p.running[name]
	delete(p.running, name)
	p.mu.Unlock()
	if w == nil {
		return false
	}
	w.cancel()
	<-w.done
	return true
}

// Running returns the names of the running watchers.
func (p *Pipeline) Running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.running))
	for name := range p.running {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Registries returns the configured registries, in configuration order.
func (p *Pipeline) Registries() []Registry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.regs)
}

// OnAdd registers f to be called with the name of every registry Configure
// adds, before its watcher starts (rule 3): the Kubernetes writer learns
// which objects are its own before any of them exists. Call it before Run.
func (p *Pipeline) OnAdd(f func(name string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onAdd = append(p.onAdd, f)
}

// ConfigureResult names the registries a Configure call changed.
type ConfigureResult struct {
	Added, Removed, Restarted []string
}

// Configure makes regs the pipeline's registries, in configuration order
// (rule 3): a registry not in regs is removed (syncer.Syncer.RemoveRegistry:
// its services leave the store, through the delete guard) and its watcher
// metrics dropped (registries.Forget); one whose Watcher is not the one
// running is restarted with its new configuration (the Syncer keeps its
// services until the new watcher synced); a new one is added; the others
// keep running untouched. Before Run it changes what Run starts. Concurrent
// calls are serialised.
func (p *Pipeline) Configure(regs []Registry) ConfigureResult {
	p.reconf.Lock()
	defer p.reconf.Unlock()
	p.mu.Lock()
	old := slices.Clone(p.regs)
	hooks := slices.Clone(p.onAdd)
	p.mu.Unlock()
	was := make(map[string]Registry, len(old))
	for _, r := range old {
		was[r.Name()] = r
	}
	var res ConfigureResult
	keep := make(map[string]bool, len(regs))
	var changed []Registry
	for _, r := range regs {
		keep[r.Name()] = true
		prev, ok := was[r.Name()]
		switch {
		case !ok:
			res.Added = append(res.Added, r.Name())
			changed = append(changed, r)
		case prev.Watcher != r.Watcher:
			res.Restarted = append(res.Restarted, r.Name())
			changed = append(changed, r)
		}
	}
	for _, r := range old {
		if !keep[r.Name()] {
			res.Removed = append(res.Removed, r.Name())
		}
	}
	for _, name := range slices.Concat(res.Removed, res.Restarted) {
		p.stop(name)
	}
	for _, name := range res.Removed {
		p.Syncer.RemoveRegistry(name)
		registries.Forget(name)
	}
	names := make([]string, len(regs))
	for i, r := range regs {
		names[i] = r.Name()
	}
	p.Syncer.SetOrder(names)
	for _, name := range res.Added {
		for _, f := range hooks {
			f(name)
		}
	}
	p.mu.Lock()
	p.regs = slices.Clone(regs)
	p.mu.Unlock()
	for _, r := range changed {
		p.Syncer.AddRegistry(r.Sync)
		p.start(r.Watcher)
	}
	return res
}

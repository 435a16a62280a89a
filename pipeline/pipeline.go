// Package pipeline builds and runs meshbridge's data path, the one way
// cmd/bridge, the benchmarks and the tests wire it: registries → Syncer
// (package syncer) → Store → Controller (package serviceentry) →
// DiscoveryServer (package xds).
//
// Rules:
//  1. Ready gate: the xDS server serves only once the Syncer is ready (every
//     registry listed its services, or sync.timeout passed) and the Store's
//     handlers processed everything written so far, so the first response
//     already holds the whole mesh (no partial mesh: grpc-go treats a
//     missing resource as deleted).
//  2. Each registry watcher runs on its own context: StopRegistry stops one
//     and waits for it; a watcher whose Run fails is logged and reported to
//     the Syncer as a registry-wide read error (its services are kept, as
//     for any outage) and does not stop the others or the pipeline.
//  3. Registry changes at run time (AddRegistry, ReplaceRegistry,
//     RemoveRegistry) stop the old watcher before the Syncer learns of the
//     change and start the new one after, so no snapshot of a stopped
//     watcher reaches the Syncer.
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
	"github.com/meshbridge/meshbridge/xds"
)

// Options configure a Pipeline.
type Options struct {
	// Sync configures the Syncer; Sync.Registries are the registries the
	// pipeline starts with (Run's watchers, in the same order).
	Sync syncer.Config
	// XDS configures the DiscoveryServer. With MCP set, XDS.MCP is filled
	// in with the Store as its source.
	XDS xds.Options
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
	XDS        *xds.DiscoveryServer

	log   *slog.Logger
	ready chan struct{}

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run
	running  map[string]*watcher
	early    []registries.Registry // added before Run: Run starts them
	skip     map[string]bool       // stopped before Run: Run does not start them
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
	opts.Sync.Logger, opts.XDS.Logger = log, log
	p := &Pipeline{log: log, ready: make(chan struct{}), running: map[string]*watcher{}}
	p.Store = serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	p.Syncer = syncer.New(p.Store, opts.Sync)
	if opts.MCP {
		opts.XDS.MCP = &xds.MCPOptions{Source: p.Store}
	}
	p.XDS = xds.NewDiscoveryServer(sourceFunc(func() []*model.Service { return p.Controller.Services() }), opts.XDS)
	p.Controller = serviceentry.NewController(p.Store, p.XDS, log)
	if opts.MCP {
		for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
			p.Store.RegisterEventHandler(kind, func(_, _ *model.Config, _ model.Event) { p.XDS.MCPConfigChanged(kind) })
		}
	}
	return p
}

// Ready is closed once the ready gate opened (rule 1).
func (p *Pipeline) Ready() <-chan struct{} { return p.ready }

// Run runs the store, the Syncer, the given registry watchers and the xDS
// server until ctx is done, then stops every watcher (also those added
// since) and returns. It returns the xDS server's error (a port that
// cannot be bound) at once, having stopped the rest.
func (p *Pipeline) Run(ctx context.Context, regs []registries.Registry) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	p.ctx = ctx
	early, skip := p.early, p.skip
	p.early, p.skip = nil, nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.Store.Run(ctx) })
	wg.Go(func() { p.Syncer.Run(ctx) })
	for _, r := range regs {
		if !skip[r.Name()] && !slices.ContainsFunc(early, func(e registries.Registry) bool { return e.Name() == r.Name() }) {
			p.start(r)
		}
	}
	for _, r := range early {
		p.start(r)
	}
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

// start runs r's watcher on its own context (rule 2); before Run, Run
// starts it (in place of a registry of the same name Run is given).
func (p *Pipeline) start(r registries.Registry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		p.early = append(slices.DeleteFunc(p.early, func(e registries.Registry) bool { return e.Name() == r.Name() }), r)
		return
	}
	if p.ctx.Err() != nil {
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
	if p.ctx == nil {
		p.early = slices.DeleteFunc(p.early, func(e registries.Registry) bool { return e.Name() == name })
		if p.skip == nil {
			p.skip = map[string]bool{}
		}
		p.skip[name] = true
	}
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
	return out
}

// AddRegistry adds a registry while the pipeline runs: the Syncer learns of
// it (syncer.Syncer.AddRegistry), then its watcher starts. A registry of
// that name is replaced (ReplaceRegistry).
func (p *Pipeline) AddRegistry(r registries.Registry, cfg syncer.Registry) {
	p.ReplaceRegistry(r, cfg)
}

// ReplaceRegistry restarts a registry with a new configuration (rule 3):
// its watcher stops, the Syncer restarts it (keeping its services until the
// new watcher synced), and the new watcher starts.
func (p *Pipeline) ReplaceRegistry(r registries.Registry, cfg syncer.Registry) {
	p.stop(r.Name())
	p.Syncer.AddRegistry(cfg)
	p.start(r)
}

// RemoveRegistry stops a registry's watcher and removes it from the Syncer
// (syncer.Syncer.RemoveRegistry: its services leave the store, through the
// delete guard), and drops its watcher metrics (registries.Forget).
func (p *Pipeline) RemoveRegistry(name string) {
	p.stop(name)
	p.Syncer.RemoveRegistry(name)
	registries.Forget(name)
}

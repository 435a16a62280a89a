package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/xds"
)

// shutdownGrace bounds how long in-flight HTTP requests may finish after a
// stop signal.
const shutdownGrace = 5 * time.Second

// bridge is the running process: registries → Syncer → Store → Controller →
// DiscoveryServer, plus the HTTP endpoints.
type bridge struct {
	cfg        *Config
	log        *slog.Logger
	regs       []registries.Registry
	store      *serviceentry.Store
	syncer     *syncer.Syncer
	controller *serviceentry.Controller
	xds        *xds.DiscoveryServer
	kube       *kubeOutput // nil unless kubernetes.enabled
	metrics    *prometheus.Registry
	ready      chan struct{} // closed once the store holds every registry's first listing
}

// sourceFunc adapts a function to xds.ServiceSource; it breaks the
// construction cycle between the controller (which pushes to the server) and
// the server (which lists the controller's services).
type sourceFunc func() []*model.Service

func (f sourceFunc) Services() []*model.Service { return f() }

func newBridge(cfg *Config, log *slog.Logger) (*bridge, error) {
	regs, syncRegs, err := buildRegistries(cfg, log)
	if err != nil {
		return nil, err
	}
	b := &bridge{cfg: cfg, log: log, regs: regs, ready: make(chan struct{})}
	b.store = serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	if cfg.State.Dir != "" {
		if err := os.MkdirAll(cfg.State.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
	}
	b.syncer = syncer.New(b.store, syncer.Config{
		Registries: syncRegs, Timeout: cfg.Sync.Timeout.Duration, StateDir: cfg.State.Dir,
		ConflictPolicy: cfg.ConflictPolicy, Logger: log,
	})
	b.xds = xds.NewDiscoveryServer(sourceFunc(func() []*model.Service { return b.controller.Services() }), xds.Options{
		Address:           cfg.XDS.Address,
		DebounceAfter:     explicitZero(cfg.Debounce.After.Duration),
		DebounceMax:       explicitZero(cfg.Debounce.Max.Duration),
		EnableEDSDebounce: *cfg.Debounce.EDS,
		Logger:            log,
		TLS:               xdsTLS(cfg.XDS.TLS),
		MCP:               b.mcpOptions(),
		MCPAddress:        cfg.MCP.Address,
		MCPTLS:            xdsTLS(cfg.MCP.TLS),
	})
	b.controller = serviceentry.NewController(b.store, b.xds, log)
	if cfg.Kubernetes.Enabled {
		names := make([]string, len(syncRegs))
		for i, r := range syncRegs {
			names[i] = r.Name
		}
		if b.kube, err = b.newKubeOutput(names); err != nil {
			return nil, err
		}
	}
	if cfg.MCP.Enabled && cfg.Kubernetes.Enabled {
		log.Warn("mcp.enabled and kubernetes.enabled are both set: an istiod that reads this bridge over MCP and the " +
			"cluster's CRDs sees every ServiceEntry and WorkloadEntry twice (istio#37981); point the two outputs at different istiods")
	}
	if cfg.MCP.Enabled {
		for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
			b.store.RegisterEventHandler(kind, func(_, _ *model.Config, _ model.Event) { b.xds.MCPConfigChanged(kind) })
		}
	}
	b.metrics = newMetricsRegistry()
	return b, nil
}

// mcpOptions serves the aggregate store to istiod when mcp.enabled.
func (b *bridge) mcpOptions() *xds.MCPOptions {
	if !b.cfg.MCP.Enabled {
		return nil
	}
	return &xds.MCPOptions{Source: b.store}
}

// explicitZero passes a configured duration to xds.Options, whose zero
// fields take defaults: a configured 0s (no quiet period, or no cap) becomes
// 1ns, which the debounce treats the same as none.
func explicitZero(d time.Duration) time.Duration {
	if d == 0 {
		return time.Nanosecond
	}
	return d
}

func xdsTLS(t *ServerTLSConfig) *xds.TLSConfig {
	if t == nil {
		return nil
	}
	return &xds.TLSConfig{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile}
}

// run starts everything and blocks until ctx is done, then stops in reverse
// order. It returns the first fatal error (a registry that cannot be watched
// at all, or a port that cannot be bound).
func (b *bridge) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lis, err := net.Listen("tcp", b.cfg.HTTP.Address)
	if err != nil {
		return fmt.Errorf("listen on http.address %s: %w", b.cfg.HTTP.Address, err)
	}
	debugLis, err := net.Listen("tcp", b.cfg.HTTP.DebugAddress)
	if err != nil {
		lis.Close()
		return fmt.Errorf("listen on http.debugAddress %s: %w", b.cfg.HTTP.DebugAddress, err)
	}
	srv := &http.Server{Handler: b.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	debugSrv := &http.Server{Handler: b.debugHandler(), ReadHeaderTimeout: 10 * time.Second}

	var wg sync.WaitGroup
	goFn := func(name string, fn func() error) {
		wg.Go(func() {
			if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	goFn("store", func() error { b.store.Run(ctx); return nil })
	goFn("sync", func() error { b.syncer.Run(ctx); return nil })
	for _, r := range b.regs {
		goFn("registry "+r.Name(), func() error { return r.Run(ctx, b.syncer) })
	}
	goFn("ready", func() error { return b.waitReady(ctx) })
	goFn("xds", func() error { return b.xds.Run(ctx, b.ready) })
	if b.kube != nil {
		goFn("kubernetes", func() error { return b.runKube(ctx) })
	}
	for name, s := range map[string]struct {
		srv *http.Server
		lis net.Listener
	}{"http": {srv, lis}, "http debug": {debugSrv, debugLis}} {
		goFn(name, func() error {
			if err := s.srv.Serve(s.lis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	b.log.Info("Started meshbridge", "version", version, "address", b.cfg.XDS.Address, "http", lis.Addr().String(),
		"debug", debugLis.Addr().String(), "registries", len(b.regs), "mcp", b.cfg.MCP.Enabled,
		"kubernetes", b.cfg.Kubernetes.Enabled)

	<-ctx.Done()
	b.log.Info("Stopping meshbridge", "reason", context.Cause(ctx))
	shutdownCtx, done := context.WithTimeout(context.Background(), shutdownGrace)
	defer done()
	_ = srv.Shutdown(shutdownCtx)
	_ = debugSrv.Shutdown(shutdownCtx)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// waitReady closes b.ready once every registry delivered its first listing
// (or the sync timeout passed) and the store's handlers have processed it,
// so the first xDS response already holds the whole mesh.
func (b *bridge) waitReady(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-b.syncer.Ready():
	}
	if err := b.store.Flush(ctx); err != nil {
		return nil
	}
	close(b.ready)
	b.log.Info("Aggregate registry synced", "count", len(b.controller.Services()))
	return nil
}

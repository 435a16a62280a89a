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

	"github.com/meshbridge/meshbridge/pipeline"
	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/xds"
	"github.com/meshbridge/meshbridge/xds/dns"
)

// shutdownGrace bounds how long in-flight HTTP requests may finish after a
// stop signal.
const shutdownGrace = 5 * time.Second

// bridge is the running process: the pipeline (registries → Syncer →
// Store → Controller → DiscoveryServer, package pipeline), the Kubernetes
// writer and the HTTP endpoints, and the configuration reload (reload.go).
type bridge struct {
	log     *slog.Logger
	level   *slog.LevelVar // the live log level (log.level, unless --log-level is given)
	flags   commonFlags
	pipe    *pipeline.Pipeline
	store   *serviceentry.Store
	syncer  *syncer.Syncer
	xds     *xds.DiscoveryServer
	kube    *kubeOutput    // nil unless kubernetes.enabled
	policy  *policy.Source // nil unless policy.files or policy.kubernetes is set
	metrics *prometheus.Registry
	ready   <-chan struct{} // closed once the store holds every registry's first listing

	// mu guards the running configuration and the fingerprint of each
	// running registry (registryFingerprint: what it was built from,
	// compared on reload), which a reload replaces; reloadMu serialises
	// reloads. The registries themselves are the pipeline's.
	mu           sync.Mutex
	cfg          *Config
	fingerprints map[string]string
	lastLoad     reloadStatus
	reloadMu     sync.Mutex
	// failedInputs is reloadInputs of the last reload when it failed, else
	// ""; guarded by reloadMu.
	failedInputs string
}

func newBridge(cfg *Config, log *slog.Logger) (*bridge, error) {
	return newBridgeWith(cfg, log, nil, commonFlags{})
}

// newBridgeWith builds the bridge; level is the logger's level variable
// (nil: the log level does not change on reload) and flags the command
// line, whose --config is the file a reload reads.
func newBridgeWith(cfg *Config, log *slog.Logger, level *slog.LevelVar, flags commonFlags) (*bridge, error) {
	regs, err := buildRegistries(cfg, log)
	if err != nil {
		return nil, err
	}
	b := &bridge{cfg: cfg, log: log, level: level, flags: flags, fingerprints: map[string]string{}}
	for i, r := range regs {
		b.fingerprints[r.Name()] = registryFingerprint(cfg, i)
	}
	if cfg.State.Dir != "" {
		if err := os.MkdirAll(cfg.State.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
	}
	b.pipe = pipeline.New(pipelineOptions(cfg, regs, log))
	b.store, b.syncer, b.xds, b.ready = b.pipe.Store, b.pipe.Syncer, b.pipe.XDS, b.pipe.Ready()
	if len(cfg.Policy.Files) > 0 || cfg.Policy.Kubernetes.Enabled {
		pc := policy.Config{Globs: cfg.Policy.Files, Logger: log.With("component", "policy"),
			OnChange: func(r *policy.Rules) { b.xds.SetPolicies(r) }}
		if cfg.Policy.Kubernetes.Enabled {
			if pc.Kubernetes, err = policyKubernetes(cfg); err != nil {
				return nil, err
			}
		}
		if b.policy, err = policy.New(pc); err != nil {
			return nil, err
		}
	}
	if cfg.Kubernetes.Enabled {
		names := make([]string, len(regs))
		for i, r := range regs {
			names[i] = r.Name()
		}
		if b.kube, err = b.newKubeOutput(names); err != nil {
			return nil, err
		}
		b.pipe.OnAdd(b.kube.writer.AddRegistry)
	}
	b.warnExposedDebug(cfg)
	if cfg.MCP.Enabled && cfg.Kubernetes.Enabled {
		log.Warn("mcp.enabled and kubernetes.enabled are both set: an istiod that reads this bridge over MCP and the " +
			"cluster's CRDs sees every ServiceEntry and WorkloadEntry twice (istio#37981); point the two outputs at different istiods")
	}
	b.metrics = newMetricsRegistry()
	return b, nil
}

// pipelineOptions maps the configuration to the pipeline's options; the
// Syncer's part is also what meshbridge translate reads with.
func pipelineOptions(cfg *Config, regs []pipeline.Registry, log *slog.Logger) pipeline.Options {
	return pipeline.Options{
		Registries: regs,
		Sync: syncer.Config{
			Timeout: cfg.Sync.Timeout.Duration, StateDir: cfg.State.Dir,
			ConflictPolicy: cfg.ConflictPolicy, Logger: log,
		},
		XDS: xds.Options{
			Address:           cfg.XDS.Address,
			DebounceAfter:     cfg.Debounce.After.Duration,
			DebounceMax:       cfg.Debounce.Max.Duration,
			DebounceEDSMax:    cfg.Debounce.EDSMax.Duration,
			EnableEDSDebounce: *cfg.Debounce.EDS,
			TLS:               xdsTLS(cfg.XDS.TLS),
			MCPAddress:        cfg.MCP.Address,
			MCPTLS:            xdsTLS(cfg.MCP.TLS),
		},
		DNS:    dns.Options{RefreshRate: cfg.XDS.DNSRefreshRate.Duration},
		MCP:    cfg.MCP.Enabled,
		Logger: log,
	}
}

// config returns the running configuration.
func (b *bridge) config() *Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
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
	goFn("pipeline", func() error { return b.pipe.Run(ctx) })
	goFn("endpoint mode check", func() error { b.warnWorkloadEntriesForIstiod(ctx); return nil })
	goFn("reload", func() error { b.watchConfig(ctx); return nil })
	if b.kube != nil {
		goFn("kubernetes", func() error { return b.runKube(ctx) })
	}
	if b.policy != nil {
		goFn("policy", func() error { return b.policy.Run(ctx) })
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
		"debug", debugLis.Addr().String(), "registries", len(b.pipe.Registries()), "mcp", b.cfg.MCP.Enabled,
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

// warnExposedDebug logs a warning when http.debugAddress is not on
// loopback, naming what it exposes (README "Security"); the bridge calls it
// when it starts and after each reload, so that the warning stays in view.
func (b *bridge) warnExposedDebug(cfg *Config) {
	if isLoopback(cfg.HTTP.DebugAddress) {
		return
	}
	b.log.Warn("http.debugAddress is not on loopback: whoever reaches it reads every ServiceEntry and WorkloadEntry "+
		"served, every xDS client, the registries' state and the running configuration, profiles the process "+
		"(pprof, the command line) and can apply a delete guard's held removals (POST .../confirm); keep it on "+
		"loopback and reach it with kubectl port-forward (README \"Security\")", "address", cfg.HTTP.DebugAddress)
}

// istiodWorkloadEntryWarn is the number of services above which an istiod
// reader (MCP or Kubernetes output) of WorkloadEntry-mode objects is warned
// about: istiod's WorkloadEntry selection grows with services × entries in
// one namespace (README "MCP for istiod": 135 s for istiod against 0.44 s
// direct at 1,000 services × 10 instances).
const istiodWorkloadEntryWarn = 500

// warnWorkloadEntriesForIstiod logs once, when the aggregate registry has
// synced, that an istiod reading more than istiodWorkloadEntryWarn services
// in WorkloadEntry mode will be slow, and what to do.
func (b *bridge) warnWorkloadEntriesForIstiod(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-b.ready:
	}
	cfg := b.config()
	n := len(b.pipe.Controller.Services())
	if cfg.Output.Endpoints != "workloadentry" || !(cfg.MCP.Enabled || cfg.Kubernetes.Enabled) || n <= istiodWorkloadEntryWarn {
		b.log.Debug("Endpoint mode suits the istiod readers", "services", n, "endpoints", cfg.Output.Endpoints,
			"mcp", cfg.MCP.Enabled, "kubernetes", cfg.Kubernetes.Enabled)
		return
	}
	b.log.Warn("istiod reads these objects in WorkloadEntry mode: its WorkloadEntry selection grows with services × "+
		"WorkloadEntries and may take minutes to converge; consider output.endpoints: inline (README \"MCP for istiod\")",
		"services", n, "threshold", istiodWorkloadEntryWarn, "mcp", cfg.MCP.Enabled, "kubernetes", cfg.Kubernetes.Enabled)
}

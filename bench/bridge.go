package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// namespace is the output namespace, cmd/bridge's default.
const namespace = "meshbridge"

// bridgeConfig is the part of cmd/bridge's configuration the scenarios vary.
type bridgeConfig struct {
	endpoints     translate.EndpointMode
	debounceAfter time.Duration
	edsDebounce   bool
}

// bridge is the pipeline of cmd/bridge/run.go, built the same way: the
// generator registry → Syncer → Store → Controller → DiscoveryServer on
// 127.0.0.1:0, with the same ready gate (Syncer ready, then Store flushed).
type bridge struct {
	gen        *generator
	tr         *translate.Translator
	store      *serviceentry.Store
	syncer     *serviceentry.Syncer
	controller *serviceentry.Controller
	xds        *xds.DiscoveryServer
	ready      chan struct{}

	started time.Time
	synced  time.Time // when ready was closed
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
}

// sourceFunc adapts a function to xds.ServiceSource (as in cmd/bridge).
type sourceFunc func() []*model.Service

func (f sourceFunc) Services() []*model.Service { return f() }

// startBridge builds the pipeline for gen and starts it.
func startBridge(gen *generator, cfg bridgeConfig) (*bridge, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr, err := translate.New(translate.Options{
		Registry: gen.name, HostTemplate: consul.HostTemplate, Namespace: namespace, Endpoints: cfg.endpoints,
	})
	if err != nil {
		return nil, fmt.Errorf("translator: %w", err)
	}
	b := &bridge{gen: gen, tr: tr, ready: make(chan struct{}), errs: make(chan error, 8)}
	b.store = serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	b.syncer = serviceentry.NewSyncer(b.store, serviceentry.SyncerConfig{
		Registries: []serviceentry.SyncRegistry{{Name: gen.name, Type: "consul", Translator: tr}},
		Logger:     log,
	})
	b.xds = xds.NewDiscoveryServer(sourceFunc(func() []*model.Service { return b.controller.Services() }), xds.Options{
		Address:           "127.0.0.1:0",
		DebounceAfter:     cfg.debounceAfter,
		DebounceMax:       10 * time.Second,
		EnableEDSDebounce: cfg.edsDebounce,
		Logger:            log,
	})
	b.controller = serviceentry.NewController(b.store, b.xds, log)

	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.started = time.Now()
	b.wg.Go(func() { b.store.Run(ctx) })
	b.wg.Go(func() { b.syncer.Run(ctx) })
	b.wg.Go(func() {
		if err := gen.Run(ctx, b.syncer); err != nil {
			b.errs <- err
		}
	})
	b.wg.Go(func() { b.waitReady(ctx) })
	b.wg.Go(func() {
		if err := b.xds.Run(ctx, b.ready); err != nil {
			b.errs <- err
		}
	})
	return b, nil
}

// waitReady is cmd/bridge's waitReady: the xDS server may serve once every
// registry listed its services and the store's handlers processed them.
func (b *bridge) waitReady(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-b.syncer.Ready():
	}
	if err := b.store.Flush(ctx); err != nil {
		return
	}
	b.synced = time.Now()
	close(b.ready)
}

// waitServing waits until the first full push is done and the server
// listens.
func (b *bridge) waitServing(timeout time.Duration) error {
	select {
	case <-b.xds.Serving():
		return nil
	case err := <-b.errs:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("bridge not serving after %s", timeout)
	}
}

// address is the xDS server's address; valid once serving.
func (b *bridge) address() string { return b.xds.Addr().String() }

// host returns the mesh host of generated service i.
func (b *bridge) host(i int) string {
	h, err := b.tr.Host(b.gen.service(i, 0).Service)
	if err != nil {
		panic(err) // generated names are valid
	}
	return h
}

// clusterName returns the cluster (and ClusterLoadAssignment) name of
// generated service i.
func (b *bridge) clusterName(i int) string { return xds.ClusterName(servicePort, b.host(i)) }

// stop cancels everything and waits for it to end.
func (b *bridge) stop() {
	b.cancel()
	b.wg.Wait()
}

// startServingBridge starts a workloadentry-mode bridge with debounce.after
// 100ms (EDS debounced when edsDebounce) on gen and waits until it serves:
// the setup of the churn scenarios (P2, P3). The caller stops it.
func startServingBridge(gen *generator, edsDebounce bool) (*bridge, error) {
	b, err := startBridge(gen, bridgeConfig{endpoints: translate.EndpointsWorkloadEntry,
		debounceAfter: 100 * time.Millisecond, edsDebounce: edsDebounce})
	if err != nil {
		return nil, err
	}
	if err := b.waitServing(2 * time.Minute); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

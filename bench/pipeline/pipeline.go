// Package pipeline runs cmd/bridge's pipeline for benchmarks, built by the
// same constructor (package github.com/meshbridge/meshbridge/pipeline): one
// registry → Syncer → Store → Controller → DiscoveryServer on 127.0.0.1:0,
// with the same ready gate (the Syncer ready, then the Store flushed) before
// the xDS server may serve. The scale
// suite (bench/), the soak (bench/soak) and the registries' own benchmarks
// share it, and the tools they drive it with: an in-process generator
// registry (Generator) and the machine's figures (LiveHeap, RSS, Uptime,
// CPUModel). Their ADS clients are the tests' (package test/harness/ads),
// StreamsPerConn streams per connection.
package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	core "github.com/meshbridge/meshbridge/pipeline"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// Namespace is the output namespace, cmd/bridge's default.
const Namespace = "meshbridge"

// StreamsPerConn is how many ADS streams the benchmarks open on one client
// connection.
const StreamsPerConn = 100

// Runner is what the pipeline runs: a registries.Registry, or a generator
// with the same Run.
type Runner interface {
	Run(ctx context.Context, sink registries.Sink) error
}

// Options are the parts of cmd/bridge's configuration benchmarks vary.
type Options struct {
	// Registry and Type name the one registry; HostTemplate is its type's
	// default host template.
	Registry, Type, HostTemplate string
	Endpoints                    translate.EndpointMode
	// DebounceAfter is debounce.after (the configuration's default is 100ms); EDSDebounce is
	// debounce.eds.
	DebounceAfter time.Duration
	EDSDebounce   bool
	// MCP also serves the Store's ServiceEntries and WorkloadEntries to
	// istiod on the xDS port (config key mcp.enabled).
	MCP bool
	// Sink, when set, wraps the Syncer as the registry's sink (to time
	// snapshots, say).
	Sink func(registries.Sink) registries.Sink
	// Policies, when set, is the traffic policy of direct xDS from the
	// start (the config's policy block).
	Policies xds.Policies
}

// Pipeline is a running pipeline; its fields are read-only.
type Pipeline struct {
	Translator *translate.Translator
	Store      *serviceentry.Store
	Syncer     *syncer.Syncer
	Controller *serviceentry.Controller
	XDS        *xds.DiscoveryServer
	// Started is when Start began; Synced when the ready gate opened (read
	// it once Ready is closed).
	Started, Synced time.Time

	core   *core.Pipeline
	ready  chan struct{}
	errs   chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// runnerRegistry makes a Runner a registries.Registry for the pipeline; its
// Run error also goes to errs, for WaitReady and WaitServing.
type runnerRegistry struct {
	name string
	r    Runner
	wrap func(registries.Sink) registries.Sink
	errs chan<- error
}

func (x runnerRegistry) Name() string { return x.name }

func (x runnerRegistry) Run(ctx context.Context, sink registries.Sink) error {
	if x.wrap != nil {
		sink = x.wrap(sink)
	}
	err := x.r.Run(ctx, sink)
	if err != nil {
		x.errs <- err
	}
	return err
}

// Start builds the pipeline around r with cmd/bridge's constructor
// (package pipeline) and starts it. Stop ends it.
func Start(r Runner, opts Options) (*Pipeline, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr, err := translate.New(translate.Options{
		Registry: opts.Registry, HostTemplate: opts.HostTemplate, Namespace: Namespace, Endpoints: opts.Endpoints,
	})
	if err != nil {
		return nil, fmt.Errorf("translator: %w", err)
	}
	p := &Pipeline{Translator: tr, ready: make(chan struct{}), errs: make(chan error, 8)}
	reg := runnerRegistry{name: opts.Registry, r: r, wrap: opts.Sink, errs: p.errs}
	p.core = core.New(core.Options{
		Registries: []core.Registry{{Watcher: reg, Sync: syncer.Registry{Name: opts.Registry, Type: opts.Type, Translator: tr}}},
		XDS: xds.Options{
			Address:           "127.0.0.1:0",
			DebounceAfter:     opts.DebounceAfter,
			DebounceMax:       10 * time.Second,
			DebounceEDSMax:    500 * time.Millisecond,
			EnableEDSDebounce: opts.EDSDebounce,
		},
		MCP:    opts.MCP,
		Logger: log,
	})
	p.Store, p.Syncer, p.Controller, p.XDS = p.core.Store, p.core.Syncer, p.core.Controller, p.core.XDS
	if opts.Policies != nil {
		p.XDS.SetPolicies(opts.Policies)
	}

	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.Started = time.Now()
	p.wg.Go(func() {
		if err := p.core.Run(ctx); err != nil {
			p.errs <- err
		}
	})
	p.wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-p.core.Ready():
			p.Synced = time.Now()
			close(p.ready)
		}
	})
	return p, nil
}

// WaitReady waits until HasSynced (the ready gate opened).
func (p *Pipeline) WaitReady(timeout time.Duration) error {
	select {
	case <-p.ready:
		return nil
	case err := <-p.errs:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("pipeline not synced after %s", timeout)
	}
}

// WaitServing waits until the first full push is done and the server
// listens.
func (p *Pipeline) WaitServing(timeout time.Duration) error {
	select {
	case <-p.XDS.Serving():
		return nil
	case err := <-p.errs:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("pipeline not serving after %s", timeout)
	}
}

// Stop cancels everything and waits for it to end.
func (p *Pipeline) Stop() {
	p.cancel()
	p.wg.Wait()
}

// LiveHeap returns the live heap after a forced GC: runtime/metrics
// "/gc/heap/live:bytes", the heap marked live by the last cycle. Two cycles
// let finalizers and sync.Pool victims go.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// CountingSink is a registries.Sink that counts snapshots, for benchmarks of
// a registry alone.
type CountingSink struct {
	// N is the number of snapshots so far.
	N      atomic.Int64
	synced chan struct{}
}

// Snapshot implements registries.Sink.
func (s *CountingSink) Snapshot(registries.Snapshot) { s.N.Add(1) }

// Synced implements registries.Sink.
func (s *CountingSink) Synced(string) { close(s.synced) }

// Listing implements registries.Sink.
func (s *CountingSink) Listing(string, registries.Scope, []registries.ServiceKey, []registries.ServiceKey) {
}

// Serving implements registries.Sink: it holds nothing.
func (s *CountingSink) Serving(string) []registries.ServiceKey { return nil }

// RunCounting runs r into a new CountingSink and returns once r called
// Synced; stop cancels the run and waits for it. It fails tb when Run
// returns first, or when Synced has not come after timeout.
func RunCounting(tb testing.TB, r Runner, timeout time.Duration) (stop func(), sink *CountingSink) {
	tb.Helper()
	sink = &CountingSink{synced: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, sink) }()
	select {
	case <-sink.synced:
	case err := <-done:
		cancel()
		tb.Fatalf("Run returned before Synced: %v", err)
	case <-time.After(timeout):
		cancel()
		tb.Fatalf("registry not synced after %s", timeout)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	}, sink
}

// MiB is n bytes in mebibytes, for benchmark logs.
func MiB(n uint64) float64 { return float64(n) / (1 << 20) }

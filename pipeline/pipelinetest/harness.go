// Package pipelinetest runs the real pipeline (pipeline.New: Syncer →
// Store → Controller → DNS → DiscoveryServer, MCP on) for tests, in the manner of
// Contour's featuretests: scripted registries feed it through a
// registries.Reporter per watcher run, the one caller of every real
// registry's Sink, so that it hears what real watchers send; a fake clock
// drives the Syncer's timers (hold-down, delete guard, sync timeout), and
// test/harness/ads clients read what it serves. It is the one place the pipeline is wired for tests.
//
// What a pipeline serves is compared with what a freshly built one serves
// when fed the same final registry state (Oracle): the fresh pipeline is
// the specification, so the rules are not written a second time for the
// tests.
package pipelinetest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	networking "istio.io/api/networking/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/pipeline"
	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/eureka"
	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// Namespace is the output namespace of a harness that names none.
const Namespace = "mesh"

// RegistryConfig is one configured registry.
type RegistryConfig struct {
	Name string
	// Type is the registry type ("consul", "file", "nacos"): the Syncer's
	// view of it; the watcher is always a scripted Registry.
	Type string
	// HostTemplate defaults to consul's ("<service>.service.consul").
	HostTemplate string
	// ServicePort and Resolution are the registry's servicePort and
	// resolution keys.
	ServicePort uint32
	Resolution  model.Resolution
	// Eureka: the registry is watched by the real Eureka watcher reading a
	// recorded Eureka server the Eureka steps script (eureka.go); Type is
	// then "eureka". The oracle's fresh pipeline feeds what a fresh
	// watcher reads of that server through a scripted registry.
	Eureka bool
}

// Options configure a Harness. The zero value is one consul-typed registry
// "a" in WorkloadEntry mode under conflictPolicy merge.
type Options struct {
	Registries []RegistryConfig
	// ConflictPolicy is syncer.ConflictMerge ("" too) or ConflictFirst.
	ConflictPolicy string
	// Endpoints is the output.endpoints mode ("" is workloadentry).
	Endpoints translate.EndpointMode
	// Outage is every registry's outage policy; the zero value turns
	// hold-down and the delete guard off.
	Outage syncer.OutagePolicy
	// StateDir is state.dir ("" persists nothing).
	StateDir string
	// SyncTimeout is sync.timeout on the fake clock; 0 waits forever.
	SyncTimeout time.Duration
	// Debounce is debounce.after (also for EDS); 0 pushes without a quiet
	// period.
	Debounce time.Duration
	// Namespace is output.namespace; "" is Namespace.
	Namespace string
	// Logger receives the pipeline's logs; nil discards them.
	Logger *slog.Logger
	// KeptPorts are the ports a previous run kept (syncer.Config.KeptPorts).
	KeptPorts syncer.KeptPorts

	// eureka holds the Eureka registries' recorded servers, shared by
	// every harness started from a copy of these options (Start sets it).
	eureka *eurekaServers
}

// Harness is a running pipeline with scripted registries.
type Harness struct {
	T        testing.TB
	Pipeline *pipeline.Pipeline
	// Clock is the Syncer's clock: Advance moves it.
	Clock *clocktesting.FakeClock

	opts Options
	regs map[string]*Registry
	// eurekaRegs are the running Eureka watchers, by registry.
	eurekaRegs map[string]*eureka.Registry
	conn       *grpc.ClientConn
	stop       func()
	// policy is the traffic policy served (SetPolicy), nil none, made of
	// rules and routing by host; policyObjects the objects made for each
	// (host, Policy).
	policy        *policy.Rules
	rules         map[string]*networking.DestinationRule
	routing       map[string]*networking.VirtualService
	policyObjects map[string]any
}

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Start builds and runs a pipeline of opts's registries, each watched by a
// scripted Registry; it ends with the test. The pipeline is not ready until
// every registry synced (or the sync timeout passed): WaitReady.
func Start(t testing.TB, opts Options) *Harness {
	t.Helper()
	// Reloads change the harness's copy, never the caller's.
	opts.Registries = slices.Clone(opts.Registries)
	if len(opts.Registries) == 0 {
		opts.Registries = []RegistryConfig{{Name: "a"}}
	}
	if opts.eureka == nil {
		opts.eureka = &eurekaServers{servers: map[string]*eurekatest.Server{}}
	}
	h := &Harness{T: t, Clock: clocktesting.NewFakeClock(epoch), opts: opts, regs: map[string]*Registry{},
		eurekaRegs: map[string]*eureka.Registry{}}
	var regs []pipeline.Registry
	for _, rc := range opts.Registries {
		regs = append(regs, h.registry(rc, NewRegistry(rc.Name)))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h.Pipeline = pipeline.New(pipeline.Options{
		Registries: regs,
		Sync: syncer.Config{Timeout: opts.SyncTimeout, StateDir: opts.StateDir,
			ConflictPolicy: opts.ConflictPolicy, KeptPorts: opts.KeptPorts, Clock: h.Clock},
		XDS: xds.Options{Address: "127.0.0.1:0", DebounceAfter: opts.Debounce, DebounceMax: 10 * time.Second,
			DebounceEDSMax: 500 * time.Millisecond, EnableEDSDebounce: true},
		MCP:    true,
		Logger: log,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Pipeline.Run(ctx) }()
	h.stop = sync.OnceFunc(func() {
		if h.conn != nil {
			_ = h.conn.Close()
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pipeline Run: %v", err)
		}
	})
	t.Cleanup(h.stop)
	if opts.SyncTimeout > 0 {
		// Advance must find the sync timeout's timer, which Run sets.
		harness.EventuallyTrue(t, readyTimeout, "the sync timeout's timer set", h.Clock.HasWaiters)
	}
	return h
}

// Stop stops the pipeline and waits for it; the test's end does it too.
func (h *Harness) Stop() { h.stop() }

// Oracle is what a freshly built pipeline serves when fed state, the
// services each registry lists in the end, by registry name: a pipeline of
// h's options and registries as configured now, given the ports h's
// pipeline keeps for its hosts (syncer rule 3: a host's ports, once
// decided, depend on its history, which a fresh bridge learns from them, as
// a restarted bridge does from its state dir), each of whose watchers lists
// its services once through its Reporter (ListCalls) and syncs, read by a
// new client once ready.
// It returns what that client holds and what that pipeline's Store holds
// (StoreObjects); the fresh pipeline is stopped. Persisted listings are not
// read: the fresh pipeline knows only state.
func (h *Harness) Oracle(state map[string][]registries.Service) (Served, map[string]string) {
	h.T.Helper()
	opts := h.opts
	opts.Registries = slices.Clone(opts.Registries)
	for i := range opts.Registries {
		opts.Registries[i].Eureka = false // the truth is fed as any registry's
	}
	opts.StateDir, opts.SyncTimeout, opts.Logger = "", 0, nil
	opts.KeptPorts = h.Pipeline.Syncer.KeptPorts()
	fresh := Start(h.T, opts)
	defer fresh.Stop()
	if h.policy != nil {
		fresh.policy = h.policy
		fresh.Pipeline.XDS.SetPolicies(h.policy)
	}
	for _, rc := range opts.Registries {
		fresh.Do(rc.Name, ListCalls(state[rc.Name], false)...)
	}
	fresh.WaitReady()
	fresh.Settle()
	// Endpoints registered by name are served once resolved (package
	// xds/dns): the client connects once every name was looked up and
	// pushed, so its first answers are what the fresh pipeline keeps
	// serving.
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := fresh.Pipeline.WaitIdle(ctx); err != nil {
		h.T.Fatalf("the fresh pipeline's pushes: %v", err)
	}
	c := fresh.Connect("oracle", SotW)
	if err := c.wait(ctx, c.complete); err != nil {
		h.T.Fatalf("the fresh pipeline's client: %v", err)
	}
	return c.Served(), fresh.StoreObjects()
}

// registry is rc watched by w, with the translator the command would
// build for it; w becomes rc's scripted registry.
func (h *Harness) registry(rc RegistryConfig, w *Registry) pipeline.Registry {
	h.T.Helper()
	tr, err := translate.New(translate.Options{
		Registry:     rc.Name,
		Namespace:    cmp.Or(h.opts.Namespace, Namespace),
		HostTemplate: cmp.Or(rc.HostTemplate, consul.HostTemplate),
		ServicePort:  rc.ServicePort,
		Resolution:   rc.Resolution,
		Endpoints:    h.opts.Endpoints,
	})
	if err != nil {
		h.T.Fatalf("translator of registry %s: %v", rc.Name, err)
	}
	sync := syncer.Registry{Name: rc.Name, Type: cmp.Or(rc.Type, "consul"), Translator: tr, Policy: h.opts.Outage}
	if rc.Eureka {
		sync.Type = "eureka"
		delete(h.regs, rc.Name)
		return pipeline.Registry{Watcher: h.newEurekaWatcher(rc.Name), Sync: sync}
	}
	if h.opts.Logger != nil {
		w.log = h.opts.Logger
	}
	h.regs[rc.Name] = w
	delete(h.eurekaRegs, rc.Name)
	return pipeline.Registry{Watcher: w, Sync: sync}
}

// Registry returns the scripted registry called name.
func (h *Harness) Registry(name string) *Registry {
	h.T.Helper()
	r := h.regs[name]
	if r == nil {
		h.T.Fatalf("no registry %q", name)
	}
	return r
}

// Do reports calls to registry name's watcher's Reporter, in order,
// failing the test on an error.
func (h *Harness) Do(name string, calls ...Call) {
	h.T.Helper()
	r := h.Registry(name)
	for _, c := range calls {
		if err := r.Do(c); err != nil {
			h.T.Fatal(err)
		}
	}
}

// Configured returns the names of the registries in configuration order.
func (h *Harness) Configured() []string {
	out := make([]string, 0, len(h.opts.Registries))
	for _, rc := range h.opts.Registries {
		out = append(out, rc.Name)
	}
	return out
}

// Configure reloads the configuration with registries rcs, in order
// (pipeline.Pipeline.Configure): a registry named in restart, or not
// configured before, gets a new scripted watcher, which must list; the
// others keep theirs.
func (h *Harness) Configure(rcs []RegistryConfig, restart ...string) {
	h.T.Helper()
	running := map[string]pipeline.Registry{}
	for _, r := range h.Pipeline.Registries() {
		running[r.Name()] = r
	}
	var regs []pipeline.Registry
	for _, rc := range rcs {
		if r, ok := running[rc.Name]; ok && !slices.Contains(restart, rc.Name) {
			regs = append(regs, r)
			continue
		}
		regs = append(regs, h.registry(rc, NewRegistry(rc.Name)))
	}
	h.opts.Registries = slices.Clone(rcs)
	h.Pipeline.Configure(regs)
	for name := range h.regs {
		if !slices.ContainsFunc(rcs, func(rc RegistryConfig) bool { return rc.Name == name }) {
			delete(h.regs, name)
		}
	}
	for name := range h.eurekaRegs {
		if !slices.ContainsFunc(rcs, func(rc RegistryConfig) bool { return rc.Name == name && rc.Eureka }) {
			delete(h.eurekaRegs, name)
		}
	}
}

// AddRegistry is a reload that adds rc after the configured registries.
func (h *Harness) AddRegistry(rc RegistryConfig) {
	h.T.Helper()
	h.Configure(append(slices.Clone(h.opts.Registries), rc))
}

// RestartRegistry is a reload that changes registry name's configuration in
// a way that restarts it: a new watcher, which must relist.
func (h *Harness) RestartRegistry(name string) {
	h.T.Helper()
	h.Configure(h.opts.Registries, name)
}

// RemoveRegistry is a reload that removes registry name.
func (h *Harness) RemoveRegistry(name string) {
	h.T.Helper()
	h.Configure(slices.DeleteFunc(slices.Clone(h.opts.Registries), func(rc RegistryConfig) bool { return rc.Name == name }))
}

// Advance moves the Syncer's clock by d: the hold-downs, delete guards and
// sync timeout due by then fire (on their own goroutines: wait for what
// they do with Settle or a condition).
func (h *Harness) Advance(d time.Duration) { h.Clock.Step(d) }

// readyTimeout bounds every wait of the harness for the pipeline.
const readyTimeout = 20 * time.Second

// WaitReady waits for the pipeline's ready gate (every registry synced, or
// the sync timeout passed on the fake clock).
func (h *Harness) WaitReady() {
	h.T.Helper()
	if err := h.Pipeline.WaitReady(context.Background(), readyTimeout); err != nil {
		h.T.Fatal(err)
	}
}

// Settle waits until the Store's handlers processed every write made so
// far: the controller's push decisions are queued by then (the pushes
// themselves follow after the debounce; clients are waited for with
// Client.Await).
func (h *Harness) Settle() {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := h.Pipeline.Store.Flush(ctx); err != nil {
		h.T.Fatalf("store flush: %v", err)
	}
}

// dial returns the harness's connection to its xDS port, opened on first
// use once the pipeline serves.
func (h *Harness) dial() *grpc.ClientConn {
	h.T.Helper()
	if h.conn != nil {
		return h.conn
	}
	select {
	case <-h.Pipeline.XDS.Serving():
	case <-time.After(readyTimeout):
		h.T.Fatalf("the xDS server does not serve within %s", readyTimeout)
	}
	conn, err := ads.Dial(h.Pipeline.XDS.Addr().String())
	if err != nil {
		h.T.Fatal(err)
	}
	h.conn = conn
	return conn
}

// StoreObjects returns the Store's ServiceEntries and WorkloadEntries as
// "Kind namespace/name" → content hash (hex): what the MCP and Kubernetes
// outputs, which read the Store, are made of.
func (h *Harness) StoreObjects() map[string]string {
	out := map[string]string{}
	for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
		for _, c := range h.Pipeline.Store.List(kind, "") {
			out[fmt.Sprintf("%s %s/%s", kind, c.Namespace, c.Name)] = c.Hash.String()
		}
	}
	return out
}

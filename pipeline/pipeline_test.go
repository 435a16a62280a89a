package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
	"github.com/meshbridge/meshbridge/xds/dns"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fileRegistry writes a services file of host and returns the file
// registry and the Syncer's view of it.
func fileRegistry(t *testing.T, name, host string) Registry {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	body := fmt.Sprintf("services:\n- host: %s\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.0.0.1, port: 8080}]\n", host)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := file.New(file.Config{Name: name, Path: path, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := translate.New(translate.Options{Registry: name, HostTemplate: file.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	return Registry{Watcher: reg, Sync: syncer.Registry{Name: name, Type: "file", Translator: tr}}
}

// failing is a registry whose watcher fails at once.
type failing struct{ name string }

func (f failing) Name() string { return f.name }
func (f failing) Run(context.Context, registries.Sink) error {
	return errors.New("cannot be watched")
}

// start runs a pipeline of regs until the test ends.
func start(t *testing.T, regs []Registry, before func(*Pipeline)) *Pipeline {
	t.Helper()
	p := New(Options{Registries: regs, Sync: syncer.Config{Timeout: time.Second},
		XDS: xds.Options{Address: "127.0.0.1:0"}, Logger: quiet})
	if before != nil {
		before(p)
	}
	return run(t, p)
}

// run runs p until the test ends, and returns it once its ready gate opened.
func run(t *testing.T, p *Pipeline) *Pipeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if err := p.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

func hosts(p *Pipeline) []string {
	var out []string
	for _, c := range p.Store.List(model.KindServiceEntry, "") {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

func waitHosts(t *testing.T, p *Pipeline, want ...string) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, fmt.Sprintf("hosts %v", want), func() error {
		if err := p.Store.Flush(context.Background()); err != nil {
			return err
		}
		if got := hosts(p); !slices.Equal(got, want) {
			return fmt.Errorf("hosts %v", got)
		}
		return nil
	})
}

// TestRegistryLifecycle: a registry added, replaced and removed while the
// pipeline runs (rule 3); a watcher that fails does not stop the others or
// the pipeline (rule 2).
func TestRegistryLifecycle(t *testing.T) {
	a := fileRegistry(t, "a", "a.local")
	bad := Registry{Watcher: failing{name: "bad"}, Sync: fileRegistry(t, "bad", "bad.local").Sync}
	p := start(t, []Registry{a, bad}, nil)
	waitHosts(t, p, "a.local")
	harness.Eventually(t, 10*time.Second, "the failed watcher reported", func() error {
		for _, st := range p.Syncer.Status() {
			if st.Name == "bad" && st.LastError != "" {
				return nil
			}
		}
		return fmt.Errorf("status %+v", p.Syncer.Status())
	})

	var added []string
	p.OnAdd(func(name string) { added = append(added, name) })
	b := fileRegistry(t, "b", "b.local")
	if res := p.Configure([]Registry{a, bad, b}); !slices.Equal(res.Added, []string{"b"}) || res.Removed != nil || res.Restarted != nil {
		t.Fatalf("Configure = %+v, want b added", res)
	}
	waitHosts(t, p, "a.local", "b.local")

	b2 := fileRegistry(t, "b", "b2.local")
	if res := p.Configure([]Registry{a, bad, b2}); !slices.Equal(res.Restarted, []string{"b"}) {
		t.Fatalf("Configure = %+v, want b restarted", res)
	}
	waitHosts(t, p, "a.local", "b2.local")

	if res := p.Configure([]Registry{bad, b2}); !slices.Equal(res.Removed, []string{"a"}) {
		t.Fatalf("Configure = %+v, want a removed", res)
	}
	waitHosts(t, p, "b2.local")
	if got := p.Running(); slices.Contains(got, "a") || !slices.Contains(got, "b") {
		t.Errorf("running watchers %v: want b and not a", got)
	}
	if !slices.Equal(added, []string{"b"}) {
		t.Errorf("OnAdd heard %v, want [b]", added)
	}
}

// TestRegistryChangedBeforeRun: a replacement or removal made before Run is
// what Run starts.
func TestRegistryChangedBeforeRun(t *testing.T) {
	a := fileRegistry(t, "a", "a.local")
	b := fileRegistry(t, "b", "b.local")
	a2 := fileRegistry(t, "a", "a2.local")
	p := start(t, []Registry{a, b}, func(p *Pipeline) {
		p.Configure([]Registry{a2})
	})
	waitHosts(t, p, "a2.local")
}

// TestHostnameEndpointServedResolved: an instance registered by DNS name is
// served by the pipeline's xDS server as the address the name resolves to
// (package xds/dns between the Controller and the server), beside the IP
// instance, and the name's new address replaces it at the next refresh;
// WaitIdle waits for the name's first lookup.
func TestHostnameEndpointServedResolved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	body := "services:\n- host: web.local\n  ports: [{number: 8080, protocol: grpc}]\n" +
		"  instances: [{address: 10.0.0.1, port: 8080}, {address: App.Example, port: 8081}]\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := file.New(file.Config{Name: "a", Path: path, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := translate.New(translate.Options{Registry: "a", HostTemplate: file.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		answer  = "10.9.0.1"
		lookups []string
	)
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups = append(lookups, host)
		return []netip.Addr{netip.MustParseAddr(answer)}, nil
	}
	p := New(Options{
		Registries: []Registry{{Watcher: reg, Sync: syncer.Registry{Name: "a", Type: "file", Translator: tr}}},
		Sync:       syncer.Config{Timeout: time.Second},
		XDS:        xds.Options{Address: "127.0.0.1:0", DebounceAfter: time.Millisecond, DebounceMax: time.Second},
		DNS:        dns.Options{Lookup: lookup, RefreshRate: 50 * time.Millisecond},
		Logger:     quiet,
	})
	run(t, p)
	waitHosts(t, p, "web.local")
	idle, cancelIdle := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelIdle()
	if err := p.WaitIdle(idle); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	looked := slices.Clone(lookups)
	mu.Unlock()
	if !slices.Contains(looked, "app.example") {
		t.Fatalf("WaitIdle returned before the name was looked up (lookups %v)", looked)
	}

	<-p.XDS.Serving()
	conn, err := ads.Dial(p.XDS.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := ads.NewSotW(t, conn, ads.Options{Node: &core.Node{Id: "hostname-test"}, FollowCDS: true}, nil)
	if err := client.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	const cluster = "outbound|8080||web.local"
	served := func(want ...string) func() error {
		return func() error {
			cla, ok := client.Resources(resourcev3.EndpointType)[cluster]
			if !ok {
				return fmt.Errorf("no ClusterLoadAssignment %s", cluster)
			}
			_, eps, err := ads.Endpoints(cla)
			if err != nil {
				return err
			}
			if slices.Sort(eps); !slices.Equal(eps, want) {
				return fmt.Errorf("endpoints %v", eps)
			}
			return nil
		}
	}
	client.Await(t, 10*time.Second, "the name served as its address", served("10.0.0.1:8080", "10.9.0.1:8081"))

	mu.Lock()
	answer = "10.9.0.2"
	mu.Unlock()
	client.Await(t, 10*time.Second, "the name's new address served", served("10.0.0.1:8080", "10.9.0.2:8081"))
}

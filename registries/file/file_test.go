package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in      string
		wantErr string
		check   func(t *testing.T, svcs []registries.Service)
	}{
		"instances default to the first declared port, get address:port IDs and weights on the common scale (×100)": {
			in: "services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances:\n  - {address: 10.0.0.1, weight: 2, locality: r/z/s, labels: {version: v1}}\n",
			check: func(t *testing.T, svcs []registries.Service) {
				in := svcs[0].Instances[0]
				if in.ID != "10.0.0.1:8080" || in.Port != 8080 || in.Protocol != "grpc" || in.Weight != 200 || in.Locality != "r/z/s" || in.Labels["version"] != "v1" {
					t.Fatalf("instance = %+v", in)
				}
			},
		},
		"services come out sorted by host": {
			in: "services:\n- {host: b.local, ports: [{number: 1}]}\n- {host: a.local, ports: [{number: 1}]}\n",
			check: func(t *testing.T, svcs []registries.Service) {
				if svcs[0].Name != "a.local" || svcs[1].Name != "b.local" {
					t.Fatalf("order = %s, %s", svcs[0].Name, svcs[1].Name)
				}
			},
		},
		"an unknown key is named with its path": {
			in: "services:\n- host: a\n  instances: [{address: 1.1.1.1, port: 1, wieght: 2}]\n", wantErr: "services[0].instances[0].wieght: unknown field",
		},
		"an unknown protocol is refused": {
			in: "services:\n- host: a\n  ports: [{number: 1, protocol: udp}]\n", wantErr: `services[0].ports[0].protocol: "udp" is not one of`,
		},
		"a duplicate host is refused": {
			in: "services:\n- {host: a, ports: [{number: 1}]}\n- {host: a, ports: [{number: 2}]}\n", wantErr: "services[1].host",
		},
		"an instance without any port is refused": {
			in: "services:\n- host: a\n  instances: [{address: 1.1.1.1}]\n", wantErr: "services[0].instances[0].port: required",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svcs, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, svcs)
		})
	}
}

// sinkRecorder collects snapshots and wakes waiters on each one.
type sinkRecorder struct {
	mu     sync.Mutex
	snaps  []registries.Snapshot
	synced bool
	notify chan struct{}
}

func newSinkRecorder() *sinkRecorder { return &sinkRecorder{notify: make(chan struct{}, 100)} }

func (s *sinkRecorder) Snapshot(snap registries.Snapshot) {
	s.mu.Lock()
	s.snaps = append(s.snaps, snap)
	s.mu.Unlock()
	s.notify <- struct{}{}
}

func (s *sinkRecorder) Synced(string) {
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
	s.notify <- struct{}{}
}

// waitFor waits, bounded, until cond holds over the recorded snapshots.
func (s *sinkRecorder) waitFor(t *testing.T, what string, cond func([]registries.Snapshot) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		ok := cond(s.snaps)
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.notify:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// runRegistry runs a file registry on path until the test ends. Resync is
// long, so every change the test sees came through the file watch.
func runRegistry(t *testing.T, name, path string) *sinkRecorder {
	t.Helper()
	_, rec := runConfig(t, Config{Name: name, Path: path, Resync: time.Hour})
	return rec
}

// runConfig runs a file registry on cfg until the test ends; Run must
// return nil.
func runConfig(t *testing.T, cfg Config) (*Registry, *sinkRecorder) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newSinkRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r, rec
}

func last(snaps []registries.Snapshot, name string) *registries.Snapshot {
	for i := len(snaps) - 1; i >= 0; i-- {
		if snaps[i].Service.Name == name {
			return &snaps[i]
		}
	}
	return nil
}

func TestRegistryFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "services.yaml")
	write := func(content string) {
		// Write-then-rename, as editors and config tools do.
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("services:\n- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}]\n")
	rec := runRegistry(t, "static", path)

	rec.waitFor(t, "first listing", func(s []registries.Snapshot) bool { return len(s) == 1 })
	rec.mu.Lock()
	synced := rec.synced
	rec.mu.Unlock()
	if !synced {
		rec.waitFor(t, "synced", func([]registries.Snapshot) bool { return rec.synced })
	}

	write("services:\n- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}, {address: 10.0.0.2}]\n- host: b.local\n  ports: [{number: 81}]\n")
	rec.waitFor(t, "two instances of a.local and b.local", func(s []registries.Snapshot) bool {
		a, b := last(s, "a.local"), last(s, "b.local")
		return a != nil && len(a.Service.Instances) == 2 && b != nil
	})

	write("services: [{host: a.local, ports: [{number: 80}], instances: [{address: 10.0.0.1}, {address: 10.0.0.2}], bogus: 1}]\n")
	rec.waitFor(t, "a parse error", func(s []registries.Snapshot) bool { return s[len(s)-1].Err != nil })

	write("services:\n- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}, {address: 10.0.0.2}]\n")
	rec.waitFor(t, "b.local removed", func(s []registries.Snapshot) bool {
		b := last(s, "b.local")
		return b != nil && b.Removed
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, s := range rec.snaps {
		if s.Service.Name == "a.local" && !s.Removed && s.Err == nil && len(s.Service.Instances) == 0 {
			t.Fatal("a.local was emitted with no instances: a bad file must never empty a service")
		}
	}
}

func TestRegistryFollowsConfigMapSymlinkSwaps(t *testing.T) {
	// Kubernetes mounts a ConfigMap as dir/..data -> ..<timestamp>/ and
	// dir/services.yaml -> ..data/services.yaml, and swaps ..data atomically.
	dir := t.TempDir()
	version := func(name, content string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "services.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", "services: [{host: a.local, ports: [{number: 80}], instances: [{address: 10.0.0.1}]}]\n")
	if err := os.Symlink(filepath.Join("..data", "services.yaml"), filepath.Join(dir, "services.yaml")); err != nil {
		t.Fatal(err)
	}
	rec := runRegistry(t, "cm", filepath.Join(dir, "services.yaml"))
	rec.waitFor(t, "first listing", func(s []registries.Snapshot) bool { return len(s) == 1 })
	version("..v2", "services: [{host: a.local, ports: [{number: 80}], instances: [{address: 10.0.0.1}, {address: 10.0.0.3}]}]\n")
	rec.waitFor(t, "the swapped content", func(s []registries.Snapshot) bool {
		a := last(s, "a.local")
		return a != nil && len(a.Service.Instances) == 2
	})
}

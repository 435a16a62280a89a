package file

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
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

// TestReloadConvertsAndEmitsOnlyChangedServices: after a good read, a read
// of a changed file converts only the services whose document changed,
// takes the others from the last read, lists every service before any
// snapshot, and emits what changed, then what was removed. A failed read
// keeps the last good state.
func TestReloadConvertsAndEmitsOnlyChangedServices(t *testing.T) {
	const (
		a      = "- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1, labels: {version: v1}}]\n"
		b      = "- host: b.local\n  ports: [{number: 81, protocol: http}]\n  instances: [{address: 10.0.1.1}, {address: 10.0.1.2}]\n"
		before = "services:\n" + a + b
	)
	cases := map[string]struct {
		after         string
		wantEvents    []string // "listing a.local,b.local", "snapshot b.local", "removed b.local", "error ..."
		wantConverted []string // services converted from their document: not known from the read of before
	}{
		"unchanged content, with a comment and in flow style": {
			after:      "# edited\nservices:\n- {host: a.local, ports: [{number: 80}], instances: [{address: 10.0.0.1, labels: {version: v1}}]}\n" + b,
			wantEvents: []string{"listing a.local,b.local"},
		},
		"one service changed": {
			after:         "services:\n" + a + strings.Replace(b, "10.0.1.2", "10.0.1.3", 1),
			wantEvents:    []string{"listing a.local,b.local", "snapshot b.local"},
			wantConverted: []string{"b.local"},
		},
		"one service added": {
			after:         before + "- {host: c.local, ports: [{number: 82}]}\n",
			wantEvents:    []string{"listing a.local,b.local,c.local", "snapshot c.local"},
			wantConverted: []string{"c.local"},
		},
		"one service removed": {
			after:      "services:\n" + a,
			wantEvents: []string{"listing a.local", "removed b.local"},
		},
		"services reordered": {
			after:      "services:\n" + b + a,
			wantEvents: []string{"listing a.local,b.local"},
		},
		"only an instance's label changed": {
			after:         "services:\n" + strings.Replace(a, "version: v1", "version: v2", 1) + b,
			wantEvents:    []string{"listing a.local,b.local", "snapshot a.local"},
			wantConverted: []string{"a.local"},
		},
		"a document written differently that converts to the same service is converted, not emitted": {
			after:         "services:\n" + strings.Replace(a, "10.0.0.1,", "10.0.0.1, port: 80,", 1) + b,
			wantEvents:    []string{"listing a.local,b.local"},
			wantConverted: []string{"a.local"},
		},
		"a duplicate of an unchanged service": {
			after:      before + a,
			wantEvents: []string{`error services[2].host: "a.local" is already declared by services[0]`},
		},
		"a changed service with the host of an unchanged one": {
			after:      "services:\n" + b + strings.Replace(b, "10.0.1.2", "10.0.1.3", 1),
			wantEvents: []string{`error services[1].host: "b.local" is already declared by services[0]`},
		},
		"a parse error names the changed service by its place in the file": {
			after:      "services:\n" + b + strings.Replace(a, "labels:", "bogus: 1, labels:", 1),
			wantEvents: []string{"error services[1].instances[0].bogus: unknown field"},
		},
		"a conversion error names the changed service by its place in the file": {
			after:      "services:\n" + b + strings.Replace(a, "number: 80", "number: 0", 1),
			wantEvents: []string{"error services[1].ports[0].number: 0 is not a port (1-65535)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "services.yaml")
			r, err := New(Config{Name: "diff", Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			var events []string
			sink := registries.SinkFuncs{
				ListingFunc: func(_, _ string, keys []string) { events = append(events, "listing "+strings.Join(keys, ",")) },
				SnapshotFunc: func(s registries.Snapshot) {
					switch {
					case s.Err != nil:
						events = append(events, "error "+strings.TrimPrefix(s.Err.Error(), path+": "))
					case s.Removed:
						events = append(events, "removed "+s.Service.Name)
					default:
						events = append(events, "snapshot "+s.Service.Name)
					}
				},
			}
			read := func(content string) []string {
				t.Helper()
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				events = nil
				r.reload(sink)
				return events
			}
			if got := read(before); !slices.Equal(got, []string{"listing a.local,b.local", "snapshot a.local", "snapshot b.local"}) {
				t.Fatalf("first read: %q", got)
			}
			if got := read(tc.after); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events = %q, want %q", got, tc.wantEvents)
			}
			// Which services were converted: those not taken from the
			// last read, which a field the file never sets tells apart.
			first, err := parse([]byte(before), nil)
			if err != nil {
				t.Fatal(err)
			}
			known := make(map[docSum]registries.Service)
			for _, p := range first {
				p.Service.Datacenter = "known"
				known[p.Sum] = p.Service
			}
			next, err := parse([]byte(tc.after), known)
			if strings.HasPrefix(tc.wantEvents[0], "error ") {
				if err == nil {
					t.Errorf("parse with the known services accepted the file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var converted []string
			for _, p := range next {
				if p.Datacenter != "known" {
					converted = append(converted, p.Name)
				}
			}
			if !slices.Equal(converted, tc.wantConverted) {
				t.Errorf("converted %q, want %q", converted, tc.wantConverted)
			}
		})
	}
}

// TestReloadAfterAFailedReadDiffsAgainstTheLastGoodRead: the services a
// failed read found are not remembered, and a service removed in a file
// that failed is removed by the next good read.
func TestReloadAfterAFailedReadDiffsAgainstTheLastGoodRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "services.yaml")
	r, err := New(Config{Name: "diff", Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := registrytest.NewRecorder(t)
	for i, content := range []string{
		"services:\n- {host: a.local, ports: [{number: 80}]}\n- {host: b.local, ports: [{number: 81}]}\n",
		"services:\n- {host: a.local, ports: [{number: 8080}]}\n- {host: c.local, ports: [{number: 82}]}\n- {host: c.local, ports: [{number: 83}]}\n",
		"services:\n- {host: a.local, ports: [{number: 80}]}\n- {host: c.local, ports: [{number: 82}]}\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if ok := r.reload(rec); ok != (i != 1) {
			t.Fatalf("read %d: ok = %v", i, ok)
		}
	}
	var got []string
	for _, s := range rec.Snapshots() {
		got = append(got, fmt.Sprintf("%s removed=%v err=%v", s.Service.Name, s.Removed, s.Err != nil))
	}
	want := []string{
		"a.local removed=false err=false", "b.local removed=false err=false",
		" removed=false err=true",
		"c.local removed=false err=false", "b.local removed=true err=false",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshots:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// runRegistry runs a file registry on path until the test ends. Resync is
// long, so every change the test sees came through the file watch.
func runRegistry(t *testing.T, name, path string) *registrytest.Recorder {
	t.Helper()
	_, rec := runConfig(t, Config{Name: name, Path: path, Resync: time.Hour})
	return rec
}

// runConfig runs a file registry on cfg until the test ends; Run must
// return nil. Waits are bounded by 10 s.
func runConfig(t *testing.T, cfg Config) (*Registry, *registrytest.Recorder) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := registrytest.Run(t, r, 10*time.Second)
	rec.Timeout = 10 * time.Second
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

	rec.Eventually(t, "first listing", func(st registrytest.State) bool { return len(st.All) == 1 })
	rec.Eventually(t, "synced", func(st registrytest.State) bool { return st.Synced > 0 })

	write("services:\n- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}, {address: 10.0.0.2}]\n- host: b.local\n  ports: [{number: 81}]\n")
	rec.Eventually(t, "two instances of a.local and b.local", func(st registrytest.State) bool {
		a, b := last(st.All, "a.local"), last(st.All, "b.local")
		return a != nil && len(a.Service.Instances) == 2 && b != nil
	})

	write("services: [{host: a.local, ports: [{number: 80}], instances: [{address: 10.0.0.1}, {address: 10.0.0.2}], bogus: 1}]\n")
	rec.Eventually(t, "a parse error", func(st registrytest.State) bool { return st.All[len(st.All)-1].Err != nil })

	write("services:\n- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}, {address: 10.0.0.2}]\n")
	rec.Eventually(t, "b.local removed", func(st registrytest.State) bool {
		b := last(st.All, "b.local")
		return b != nil && b.Removed
	})
	for _, s := range rec.Snapshots() {
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
	rec.Eventually(t, "first listing", func(st registrytest.State) bool { return len(st.All) == 1 })
	version("..v2", "services: [{host: a.local, ports: [{number: 80}], instances: [{address: 10.0.0.1}, {address: 10.0.0.3}]}]\n")
	rec.Eventually(t, "the swapped content", func(st registrytest.State) bool {
		a := last(st.All, "a.local")
		return a != nil && len(a.Service.Instances) == 2
	})
}

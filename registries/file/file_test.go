package file

import (
	"os"
	"path/filepath"
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
		// skipped are the services Parse skips, as Skipped.String.
		skipped []string
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
		"a wrong type is the whole file's error": {
			in: "services:\n- {host: a, ports: [{number: 1}]}\n- {host: b, ports: [{number: http}]}\n", wantErr: "services[1].ports[0].number",
		},
		"invalid YAML is the whole file's error":  {in: "services:\n- {host: a, ports: [{number: 1}\n", wantErr: "yaml"},
		"invalid UTF-8 is the whole file's error": {in: "services:\n- {host: \"a\xff\", ports: [{number: 1}]}\n", wantErr: "invalid"},
		"a service with an unknown protocol is skipped, the others served": {
			in:      "services:\n- {host: b, ports: [{number: 1}]}\n- host: a\n  ports: [{number: 1, protocol: udp}]\n",
			skipped: []string{`services[1].ports[0].protocol: "udp" is not one of http, http2, grpc, tcp`},
			check: func(t *testing.T, svcs []registries.Service) {
				if len(svcs) != 1 || svcs[0].Name != "b" {
					t.Fatalf("services = %+v, want b alone", svcs)
				}
			},
		},
		"a service with a port of 70000 or 0, or without a host, is skipped": {
			in: "services:\n- {host: a, ports: [{number: 70000}]}\n- {host: b, ports: [{number: 1}, {number: 0}]}\n" +
				"- {ports: [{number: 1}]}\n- {host: c, ports: [{number: 3}]}\n",
			skipped: []string{"services[0].ports[0].number: 70000 is not a port (1-65535)",
				"services[1].ports[1].number: 0 is not a port (1-65535)", "services[2].host: required"},
			check: func(t *testing.T, svcs []registries.Service) {
				if len(svcs) != 1 || svcs[0].Name != "c" {
					t.Fatalf("services = %+v, want c alone", svcs)
				}
			},
		},
		"a duplicate host is skipped, the first served": {
			in:      "services:\n- {host: a, ports: [{number: 1}]}\n- {host: a, ports: [{number: 2}]}\n",
			skipped: []string{`services[1].host: "a" is already declared by services[0]`},
			check: func(t *testing.T, svcs []registries.Service) {
				if len(svcs) != 1 || svcs[0].Ports[0].Number != 1 {
					t.Fatalf("services = %+v, want the first a", svcs)
				}
			},
		},
		"an empty file is incomplete, not an empty listing":  {in: "", wantErr: "the file is empty"},
		"a file of comments is incomplete":                   {in: "# nothing yet\n", wantErr: "the file is empty"},
		"a services key with nothing after it is incomplete": {in: "services:\n", wantErr: "services: null"},
		"a file without a services key is incomplete":        {in: "{}\n", wantErr: "services: missing"},
		"an explicit empty list lists no service": {
			in: "services: []\n",
			check: func(t *testing.T, svcs []registries.Service) {
				if len(svcs) != 0 {
					t.Fatalf("services = %v, want none", svcs)
				}
			},
		},
		"an instance without any port or with a weight past the scale is invalid, the others served": {
			in: "services:\n- host: a\n  instances: [{address: 1.1.1.1}, {address: 1.1.1.2, port: 9}]\n" +
				"- host: b\n  ports: [{number: 8}]\n  instances: [{address: 1.1.1.3, weight: 4294967295}, {address: 1.1.1.4}]\n",
			check: func(t *testing.T, svcs []registries.Service) {
				a, b := svcs[0].Instances, svcs[1].Instances
				if len(a) != 2 || a[0].Invalid() != "instances[0].port: required when the service declares no ports" || a[1].Invalid() != "" ||
					len(b) != 2 || !strings.HasPrefix(b[0].Invalid(), "instances[0].weight: 4294967295 is over ") || b[1].Invalid() != "" {
					t.Fatalf("instances: a %+v, b %+v", a, b)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svcs, skipped, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range skipped {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tc.skipped) {
				t.Errorf("skipped %q, want %q", got, tc.skipped)
			}
			tc.check(t, svcs)
		})
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

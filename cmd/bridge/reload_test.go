package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/test/harness"
)

// loadString writes body as a configuration file in dir and loads it.
func loadString(t *testing.T, dir, body string) *Config {
	t.Helper()
	p := filepath.Join(dir, "meshbridge.yaml")
	writeFile(t, p, body)
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatalf("LoadConfig: %v\n%s", err, body)
	}
	return cfg
}

const reloadBase = `registries:
- {name: a, type: consul, consul: {address: 127.0.0.1:8500, tokenFile: token}}
- {name: b, type: file, file: {path: services.yaml}}
`

// TestFixedChanges: which changed keys make a reload fail (README
// "Reloading the configuration").
func TestFixedChanges(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"nothing", "", nil},
		{"registries change live", "", nil},
		{"debounce", "debounce: {after: 1s, max: 20s, eds: false}\n", nil},
		{"log level", "log: {level: debug}\n", nil},
		{"log format", "log: {format: json}\n", []string{"log.format"}},
		{"kubernetes rate limit", "kubernetes: {qps: 5, burst: 7}\n", nil},
		{"outage and translator keys", "outage: {holdDown: 1s}\noutput: {revision: canary, allowLabels: [topology.istio.io/network]}\n", nil},
		{"listeners", "xds: {address: 127.0.0.1:1}\nhttp: {address: 127.0.0.1:2}\n", []string{"http.address", "xds.address"}},
		{"output", "output: {namespace: other, endpoints: inline, instance: blue}\n",
			[]string{"kubernetes.leaderElection.leaseNamespace", "output.endpoints", "output.instance", "output.namespace"}},
		{"outputs on", "mcp: {enabled: true}\nkubernetes: {enabled: true}\n", []string{"kubernetes.enabled", "mcp.enabled"}},
		{"sync, state, conflicts", "sync: {timeout: 1s}\nstate: {dir: /tmp/x}\nconflictPolicy: first\n",
			[]string{"conflictPolicy", "state.dir", "sync.timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "token"), "t1")
			old := loadString(t, dir, reloadBase)
			body := reloadBase + tc.extra
			if tc.name == "registries change live" {
				body = "registries:\n- {name: c, type: file, file: {path: other.yaml}}\n"
			}
			got := fixedChanges(old, loadString(t, dir, body))
			if !slices.Equal(got, tc.want) {
				t.Errorf("fixedChanges = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRegistryFingerprint: a registry's fingerprint changes with its block,
// the global keys it is built from and the content of the files it names,
// and with nothing else.
func TestRegistryFingerprint(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token"), "t1")
	base := loadString(t, dir, reloadBase)
	fa, fb := registryFingerprint(base, 0), registryFingerprint(base, 1)
	for _, tc := range []struct {
		name          string
		body          string
		before        func()
		changeA, chgB bool
	}{
		{"same", reloadBase, nil, false, false},
		{"debounce", reloadBase + "debounce: {after: 1s}\n", nil, false, false},
		{"a's block", strings.Replace(reloadBase, "127.0.0.1:8500", "127.0.0.1:8501", 1), nil, true, false},
		{"outage", reloadBase + "outage: {holdDown: 3s}\n", nil, true, true},
		{"revision", reloadBase + "output: {revision: canary}\n", nil, true, true},
		{"a's token file content", reloadBase, func() { writeFile(t, filepath.Join(dir, "token"), "t2") }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
				defer writeFile(t, filepath.Join(dir, "token"), "t1")
			}
			cfg := loadString(t, dir, tc.body)
			if got := registryFingerprint(cfg, 0) != fa; got != tc.changeA {
				t.Errorf("registry a changed = %v, want %v", got, tc.changeA)
			}
			if got := registryFingerprint(cfg, 1) != fb; got != tc.chgB {
				t.Errorf("registry b changed = %v, want %v", got, tc.chgB)
			}
		})
	}
	if got, want := namedFiles(base), []string{filepath.Join(dir, "token")}; !slices.Equal(got, want) {
		t.Errorf("namedFiles = %v, want %v (the file registry's own file is not among them)", got, want)
	}
	if err := os.Remove(filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	if registryFingerprint(base, 0) == fa {
		t.Error("a token file gone leaves the fingerprint unchanged")
	}
}

// TestWarnsWorkloadEntriesForIstiod: with an istiod reader (MCP) and
// WorkloadEntry mode, more than istiodWorkloadEntryWarn services log one
// warning once synced; inline mode, or no istiod reader, logs none.
func TestWarnsWorkloadEntriesForIstiod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		extra    string
		services int
		warn     bool
	}{
		{"mcp, workloadentry, above", "mcp: {enabled: true}\n", istiodWorkloadEntryWarn + 1, true},
		{"mcp, workloadentry, at the threshold", "mcp: {enabled: true}\n", istiodWorkloadEntryWarn, false},
		{"mcp, inline", "mcp: {enabled: true}\noutput: {endpoints: inline}\n", istiodWorkloadEntryWarn + 1, false},
		{"no istiod reader", "", istiodWorkloadEntryWarn + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var svcs strings.Builder
			svcs.WriteString("services:\n")
			for i := range tc.services {
				fmt.Fprintf(&svcs, "- host: s%d.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.0.%d.%d}]\n", i, i/250, i%250+1)
			}
			writeFile(t, filepath.Join(dir, "services.yaml"), svcs.String())
			cfg := loadString(t, dir, fmt.Sprintf("registries:\n- {name: static, type: file, file: {path: services.yaml}}\n"+
				"xds: {address: %q}\nhttp: {address: %q, debugAddress: %q}\n%s", freeAddr(t), freeAddr(t), freeAddr(t), tc.extra))
			var logs harness.LockedBuffer
			b, err := newBridge(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- b.run(ctx) }()
			harness.Eventually(t, 20*time.Second, "the endpoint mode checked", func() error {
				if l := logs.String(); !strings.Contains(l, "Endpoint mode suits the istiod readers") &&
					!strings.Contains(l, "istiod reads these objects in WorkloadEntry mode") {
					return fmt.Errorf("not yet")
				}
				return nil
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(logs.String(), "istiod reads these objects in WorkloadEntry mode"); got != tc.warn {
				t.Errorf("warned = %v, want %v", got, tc.warn)
			}
		})
	}
}

// TestFailedReloadIsLoggedOnce: one failure is one error line and one
// count, however many triggers (the file watch, then SIGHUP) read the same
// inputs; the next change is reloaded again.
func TestFailedReloadIsLoggedOnce(t *testing.T) {
	cfgPath := fileConfig(t, "")
	var logs harness.LockedBuffer
	b := loadBridge(t, cfgPath, slog.New(slog.NewTextHandler(&logs, nil)))
	failures := func() float64 { return testutil.ToFloat64(configReloads.WithLabelValues("failure")) }
	before := failures()
	writeFile(t, cfgPath, "registries: []\nbogus: 1\n")
	if err := b.reload("file change"); err == nil || errors.Is(err, errUnchangedSinceFailure) {
		t.Fatalf("reload of an invalid configuration: %v", err)
	}
	if err := b.reload("SIGHUP"); !errors.Is(err, errUnchangedSinceFailure) {
		t.Errorf("second reload of the same file: %v, want errUnchangedSinceFailure", err)
	}
	if n := strings.Count(logs.String(), "Configuration reload failed"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, logs.String())
	}
	if got := failures() - before; got != 1 {
		t.Errorf("meshbridge_config_reloads_total{result=\"failure\"} rose by %v, want 1", got)
	}
	writeFile(t, cfgPath, "registries: []\nbogus: 2\n")
	if err := b.reload("file change"); err == nil || errors.Is(err, errUnchangedSinceFailure) {
		t.Errorf("reload of another invalid configuration: %v, want it tried", err)
	}
	if got := failures() - before; got != 2 {
		t.Errorf("after a second, different failure: +%v, want 2", got)
	}
}

// TestWarnsOfAnExposedDebugAddress: an http.debugAddress off loopback is
// a warning naming what it exposes, when the bridge starts and after each
// reload; on loopback there is none.
func TestWarnsOfAnExposedDebugAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:15015", false},
		{"localhost:15015", false},
		{"[::1]:15015", false},
		{"0.0.0.0:15015", true},
		{"10.1.2.3:15015", true},
		{"meshbridge.internal:15015", true},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			cfgPath := fileConfig(t, fmt.Sprintf("http: {debugAddress: %q}\n", tc.addr))
			var logs harness.LockedBuffer
			// Built and reloaded, never run: nothing binds the address.
			b := loadBridge(t, cfgPath, slog.New(slog.NewTextHandler(&logs, nil)))
			const warning = "http.debugAddress is not on loopback"
			if got := strings.Count(logs.String(), warning); got != map[bool]int{true: 1}[tc.warn] {
				t.Errorf("at start: %d warnings, want warn=%v:\n%s", got, tc.warn, logs.String())
			}
			if err := b.reload("SIGHUP"); err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(logs.String(), warning); got != map[bool]int{true: 2}[tc.warn] {
				t.Errorf("after a reload: %d warnings, want warn=%v:\n%s", got, tc.warn, logs.String())
			}
			if tc.warn && !strings.Contains(logs.String(), "pprof") {
				t.Errorf("the warning does not name what is exposed:\n%s", logs.String())
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshbridge/meshbridge/test/harness"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get returns the status and body of GET http://addr/path; a failed
// request is status 0 with the error as the body.
func get(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// fileConfig writes a services file and a config using it; extra is
// appended to the config.
func fileConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	svcs := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(svcs, []byte("services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.0.0.1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	body := fmt.Sprintf("registries:\n- name: static\n  type: file\n  file: {path: %q}\n%s", svcs, extra)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runBridge runs the real bridge in-process on the configuration at cfgPath
// until the test ends; run's error fails the test.
func runBridge(t *testing.T, cfgPath string) *bridge {
	t.Helper()
	b := loadBridge(t, cfgPath, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return b
}

// loadBridge loads the configuration at cfgPath and builds the bridge on it
// (its --config, for reloads), logging to log; it starts nothing.
func loadBridge(t *testing.T, cfgPath string, log *slog.Logger) *bridge {
	t.Helper()
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBridgeWith(cfg, log, nil, commonFlags{config: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// emptyFileConfig writes a config whose file registry lists no services.
func emptyFileConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte("services: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("registries:\n- {name: static, type: file, file: {path: services.yaml}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = realMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCommands(t *testing.T) {
	cases := map[string]struct {
		args     func(t *testing.T) []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		"version prints the version": {
			args: func(*testing.T) []string { return []string{"version"} }, wantOut: "meshbridge dev",
		},
		"an unknown command is a usage error": {
			args: func(*testing.T) []string { return []string{"serve"} }, wantCode: 2, wantErr: `unknown command "serve"`,
		},
		"run without --config is a usage error": {
			args: func(*testing.T) []string { return []string{"run"} }, wantCode: 2, wantErr: "--config is required",
		},
		"translate prints kubectl-applyable yaml": {
			args:    func(t *testing.T) []string { return []string{"translate", "--config", fileConfig(t, "")} },
			wantOut: "apiVersion: networking.istio.io/v1\nkind: ServiceEntry",
		},
		"translate -o json prints a List": {
			args:    func(t *testing.T) []string { return []string{"translate", "--config", fileConfig(t, ""), "-o", "json"} },
			wantOut: `"kind": "List"`,
		},
		"translate names a registry it cannot read, with its last error": {
			args: func(t *testing.T) []string {
				cfg := filepath.Join(t.TempDir(), "c.yaml")
				body := fmt.Sprintf("registries:\n- {name: down, type: consul, consul: {address: %q}}\nsync: {timeout: 2s}\n", freeAddr(t))
				if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"translate", "--config", cfg}
			},
			wantCode: 1, wantErr: `could not read registry "down": no complete listing within sync.timeout (2s); last error: `,
		},
		"--version works as a command": {
			args: func(*testing.T) []string { return []string{"--version"} }, wantOut: "meshbridge dev",
		},
		"--version works on a command": {
			args: func(*testing.T) []string { return []string{"translate", "--version"} }, wantOut: "meshbridge dev",
		},
		"--help lists every command": {
			args: func(*testing.T) []string { return []string{"--help"} }, wantOut: "meshbridge bootstrap --node-id ID",
		},
		"translate -h prints its flags and exits 0": {
			args: func(*testing.T) []string { return []string{"translate", "-h"} }, wantOut: "-allow-empty",
		},
		"run --help exits 0": {
			args: func(*testing.T) []string { return []string{"run", "--help"} }, wantOut: "-log-format",
		},
		"a stray argument is a usage error": {
			args: func(t *testing.T) []string {
				return []string{"translate", "--config", fileConfig(t, ""), "extra"}
			},
			wantCode: 2, wantErr: `unexpected argument "extra"`,
		},
		"version takes no argument": {
			args: func(*testing.T) []string { return []string{"version", "x"} }, wantCode: 2, wantErr: `unexpected argument "x"`,
		},
		"an unknown flag is a usage error": {
			args: func(*testing.T) []string { return []string{"run", "--conifg", "x"} }, wantCode: 2, wantErr: "flag provided but not defined: -conifg",
		},
		"translate of an empty registry fails without --allow-empty": {
			args: func(t *testing.T) []string {
				cfg := emptyFileConfig(t)
				return []string{"translate", "--config", cfg}
			},
			wantCode: 1, wantErr: "the registries listed no services",
		},
		"translate of an empty registry with --allow-empty": {
			args: func(t *testing.T) []string {
				return []string{"translate", "--config", emptyFileConfig(t), "--allow-empty"}
			},
		},
		"translate stops at once on a missing registry file": {
			args: func(t *testing.T) []string {
				cfg := filepath.Join(t.TempDir(), "c.yaml")
				// sync.timeout is long: the test's speed shows translate did not wait for it.
				body := "registries:\n- {name: static, type: file, file: {path: missing.yaml}}\nsync: {timeout: 10m}\n"
				if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"translate", "--config", cfg}
			},
			wantCode: 1, wantErr: "missing.yaml: no such file or directory",
		},
		"an invalid config names the field": {
			args: func(t *testing.T) []string {
				return []string{"translate", "--config", fileConfig(t, "output: {endpoints: x}\n")}
			},
			wantCode: 1, wantErr: "output.endpoints",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errs := run(tc.args(t)...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) || !strings.Contains(errs, tc.wantErr) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ⊇ %q, stderr ⊇ %q", code, tc.wantCode, out, errs, tc.wantOut, tc.wantErr)
			}
		})
	}
}

// TestRunServesHTTP runs the real bridge in-process on a file registry and
// an unreachable Consul, and checks its operator endpoints: probes and
// metrics on http.address, everything that shows the mesh or the process
// only on http.debugAddress, and never a secret.
func TestRunServesHTTP(t *testing.T) {
	httpAddr, debugAddr := freeAddr(t), freeAddr(t)
	const secret = "s3cr3t-token-value"
	const nacosPassword, nacosSecretKey = "n4cos-passw0rd", "n4cos-s3cret-key"
	cfgPath := fileConfig(t, fmt.Sprintf("xds: {address: %q}\nhttp: {address: %q, debugAddress: %q}\n", freeAddr(t), httpAddr, debugAddr))
	// A Consul registry nobody listens on, with a token that must never show.
	raw, _ := os.ReadFile(cfgPath)
	raw = bytes.Replace(raw, []byte("registries:\n"), []byte(fmt.Sprintf("registries:\n- {name: down, type: consul, consul: {address: %q, token: %q}}\n", freeAddr(t), secret)), 1)
	// A Nacos registry nobody listens on, with a password and a secret key
	// that must never show either.
	raw = bytes.Replace(raw, []byte("- name: static"), []byte(fmt.Sprintf("- {name: nacos-down, type: nacos, nacos: {addresses: [%q], username: u, password: %q, accessKey: ak, secretKey: %q}}\n- name: static",
		freeAddr(t), nacosPassword, nacosSecretKey)), 1)
	raw = append(raw, []byte("sync: {timeout: 1s}\n")...)
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	runBridge(t, cfgPath)

	var ready string
	harness.Eventually(t, 20*time.Second, "/readyz answers 200 (the sync timeout is 1s)", func() error {
		code, body := get(httpAddr, "/readyz")
		if code != http.StatusOK {
			return fmt.Errorf("/readyz = %d %s", code, body)
		}
		ready = body
		return nil
	})
	// Ready, but saying what is degraded: the Consul registry never listed.
	if !strings.Contains(ready, "degraded") || !strings.Contains(ready, "registry down: no complete listing yet") {
		t.Errorf("/readyz body does not name the unsynced registry:\n%s", ready)
	}
	if code, _ := get(httpAddr, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	// The first full push follows readiness; its counter appears with it.
	harness.Eventually(t, 10*time.Second, "the first push is counted", func() error {
		if _, m := get(httpAddr, "/metrics"); !strings.Contains(m, "meshbridge_pushes_total") {
			return fmt.Errorf("no meshbridge_pushes_total yet")
		}
		return nil
	})
	_, metrics := get(httpAddr, "/metrics")
	for _, name := range []string{
		"meshbridge_build_info", "meshbridge_registry_services", "meshbridge_registry_instances",
		"meshbridge_registry_served_instances", "meshbridge_registry_up",
		"meshbridge_registry_errors_total", "meshbridge_pushes_total", "meshbridge_event_to_push_seconds",
	} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// The debug endpoints are not on http.address.
	for _, path := range []string{"/debug/configz", "/debug/config", "/debug/registryz", "/debug/kubez", "/debug/pprof/"} {
		if code, _ := get(httpAddr, path); code != http.StatusNotFound {
			t.Errorf("http.address serves %s: %d, want 404", path, code)
		}
	}
	_, configz := get(debugAddr, "/debug/configz")
	var objs []configzEntry
	if err := json.Unmarshal([]byte(configz), &objs); err != nil || len(objs) != 2 {
		t.Fatalf("/debug/configz = %d objects (%v): %s", len(objs), err, configz)
	}
	_, registryz := get(debugAddr, "/debug/registryz")
	var regs []registryzEntry
	if err := json.Unmarshal([]byte(registryz), &regs); err != nil || len(regs) != 3 {
		t.Fatalf("/debug/registryz: %v: %s", err, registryz)
	}
	down, nacosDown, static := regs[0], regs[1], regs[2]
	if nacosDown.Name != "nacos-down" || nacosDown.Synced || nacosDown.Up || nacosDown.Watcher == nil {
		t.Errorf("/debug/registryz nacos-down = %+v", nacosDown)
	}
	if down.Name != "down" || down.Synced || down.Up || down.LastError == "" ||
		static.Name != "static" || !static.Synced || !static.Up || static.LastSuccess.IsZero() || static.Stale ||
		static.Instances != 1 || static.ServedInstances != 1 {
		t.Fatalf("/debug/registryz = %s", registryz)
	}
	if strings.Contains(registryz, "0001-01-01") {
		t.Errorf("/debug/registryz shows a zero time:\n%s", registryz)
	}
	_, config := get(debugAddr, "/debug/config")
	if !strings.Contains(config, `"token": "<redacted>"`) || !strings.Contains(config, `"password": "<redacted>"`) ||
		!strings.Contains(config, `"secretKey": "<redacted>"`) || !strings.Contains(config, `"debugAddress": "`+debugAddr+`"`) {
		t.Errorf("/debug/config does not show the running configuration redacted:\n%s", config)
	}
	for _, page := range []struct{ addr, path string }{
		{httpAddr, "/metrics"}, {httpAddr, "/readyz"},
		{debugAddr, "/debug/configz"}, {debugAddr, "/debug/config"}, {debugAddr, "/debug/registryz"}, {debugAddr, "/debug/kubez"},
	} {
		_, body := get(page.addr, page.path)
		for _, s := range []string{secret, nacosPassword, nacosSecretKey} {
			if strings.Contains(body, s) {
				t.Errorf("%s shows a secret (%q)", page.path, s)
			}
		}
	}
	if code, _ := get(debugAddr, "/debug/pprof/"); code != http.StatusOK {
		t.Errorf("/debug/pprof/ = %d", code)
	}
}

// TestRunServesMCP checks the MCP wiring: with mcp.enabled the xDS
// port answers istiod's MCP types, and a registry change reaches the stream
// through the store handler.
func TestRunServesMCP(t *testing.T) {
	xdsAddr := freeAddr(t)
	cfgPath := fileConfig(t, fmt.Sprintf("xds: {address: %q}\nhttp: {address: %q, debugAddress: 127.0.0.1:0}\nmcp: {enabled: true}\ndebounce: {after: 1ms}\n", xdsAddr, freeAddr(t)))
	runBridge(t, cfgPath)

	conn, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The port opens after the first full push; retry until it does.
		stream, err = discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(t.Context(), grpc.WaitForReady(true))
		if err == nil {
			err = stream.Send(&discovery.DiscoveryRequest{TypeUrl: "networking.istio.io/v1/WorkloadEntry", ResponseNonce: "x"})
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.GetResources()); resp.GetTypeUrl() != "networking.istio.io/v1/WorkloadEntry" || got != 1 {
		t.Fatalf("got %d resources of %s, want 1 WorkloadEntry", got, resp.GetTypeUrl())
	}
	if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
		t.Fatal(err)
	}

	svcs := filepath.Join(filepath.Dir(cfgPath), "services.yaml")
	if err := os.WriteFile(svcs, []byte("services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.0.0.1}, {address: 10.0.0.2}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if got := len(resp.GetResources()); got != 2 {
		t.Fatalf("after adding an instance: %d WorkloadEntries, want 2", got)
	}
}

// TestTranslateAgainstConsulACLs runs translate against a real Consul agent
// with ACLs denying by default: without a token the agent answers an empty
// catalog, not an error, which translate must not print as an empty mesh;
// with a token the agent refuses, translate stops at once with the cause.
func TestTranslateAgainstConsulACLs(t *testing.T) {
	const management = "0b6c3b6f-6c2a-4a0e-9c1e-5d7e3a1f2b44"
	c := harness.StartConsul(t, harness.WithConsulACL("deny", management))
	c.RegisterInstance(t, "web", "web-1", "10.0.0.1", 8080, nil, nil, "passing")
	t.Setenv("CONSUL_HTTP_TOKEN", "")
	config := func(t *testing.T, consul string) string {
		cfg := filepath.Join(t.TempDir(), "c.yaml")
		body := fmt.Sprintf("registries:\n- {name: dc1, type: consul, consul: {address: %q%s}}\nsync: {timeout: 10m}\n", c.Address(), consul)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Run("no token sees nothing", func(t *testing.T) {
		code, out, errs := run("translate", "--config", config(t, ""))
		if code != 1 || out != "" || !strings.Contains(errs, "the registries listed no services") ||
			!strings.Contains(errs, "ACL") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s\nwant exit 1, an ACL warning and the empty-result error", code, out, errs)
		}
	})
	t.Run("a token Consul refuses ends translate at once", func(t *testing.T) {
		// sync.timeout is 10m: returning at all shows translate did not wait for it.
		code, _, errs := run("translate", "--config", config(t, ", token: 11111111-2222-3333-4444-555555555555"))
		if code != 1 || !strings.Contains(errs, `could not read registry "dc1"`) || !strings.Contains(errs, "403") {
			t.Fatalf("exit %d\nstderr: %s\nwant exit 1 naming the registry and Consul's 403", code, errs)
		}
	})
	t.Run("the management token reads the service", func(t *testing.T) {
		code, out, errs := run("translate", "--config", config(t, ", token: "+management))
		if code != 0 || !strings.Contains(out, "web.service.consul") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
	})
}

// TestRunFailsAtOnceOnATakenXDSPort: the listeners are bound when run
// starts, so a taken xDS port stops the bridge at once, naming it, while
// a registry that does not answer would hold the first push for
// sync.timeout (10 minutes here).
func TestRunFailsAtOnceOnATakenXDSPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfgPath, fmt.Sprintf("registries:\n- {name: down, type: consul, consul: {address: %q}}\nsync: {timeout: 10m}\n"+
		"xds: {address: %q}\nhttp: {address: %q, debugAddress: 127.0.0.1:0}\n", freeAddr(t), taken.Addr(), freeAddr(t)))
	b := loadBridge(t, cfgPath, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.run(ctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "listen on xds.address "+taken.Addr().String()) {
			t.Fatalf("run: %v, want an error naming the taken xDS address", err)
		}
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatal("run kept waiting for the registries with its xDS port taken")
	}
}

package e2e

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// proxylessClient is one gRPC implementation's client program. Each prints a
// line per call, "<time> ok <backend>" or "<time> error <message>", as
// examples/grpc/client does, and reads its bootstrap from GRPC_XDS_BOOTSTRAP.
type proxylessClient struct {
	name string
	// command returns the client calling target as o says; it skips (or
	// fails, under MESHBRIDGE_REQUIRE_SERVERS=1) when the client's runtime
	// is missing.
	command func(t testing.TB, target string, o callOpts) *exec.Cmd
	// tls is whether the client knows "tls" channel credentials (gRFC A65).
	tls bool
}

var proxylessClients = []proxylessClient{
	{name: "grpc-go", command: goClient, tls: true},
	{name: "grpc-js", command: nodeClient},
	{name: "c-core", command: pythonClient},
	{name: "grpc-java", command: javaClient},
}

// callOpts are how a client calls: count times (0: until stopped), each
// call with a deadline of timeout (default 1s), interval apart (default
// 50ms); cycleHeader "name=N" sends header name with value v<i mod N> on
// call i (each client's --cycle-header); concurrency loops (default 1)
// share the calls, so that many are in flight at once (--concurrency);
// xdsCreds applies the TLS the clusters carry (--xds-creds, gRFC A29).
type callOpts struct {
	count             int
	timeout, interval time.Duration
	cycleHeader       string
	concurrency       int
	xdsCreds          bool
}

// with appends the cycle-header, concurrency and xds-creds flags (spelled
// with the client's prefix, "-" or "--") to cmd when o asks for them.
func (o callOpts) with(cmd *exec.Cmd, prefix string) *exec.Cmd {
	if o.xdsCreds {
		cmd.Args = append(cmd.Args, prefix+"xds-creds")
	}
	if o.cycleHeader != "" {
		cmd.Args = append(cmd.Args, prefix+"cycle-header", o.cycleHeader)
	}
	if o.concurrency > 1 {
		cmd.Args = append(cmd.Args, prefix+"concurrency", strconv.Itoa(o.concurrency))
	}
	return cmd
}

func (o callOpts) withDefaults() callOpts {
	o.timeout = cmp.Or(o.timeout, time.Second)
	o.interval = cmp.Or(o.interval, 50*time.Millisecond)
	return o
}

func goClient(_ testing.TB, target string, o callOpts) *exec.Cmd {
	o = o.withDefaults()
	return o.with(exec.Command(bins.client, "-target", target, "-count", strconv.Itoa(o.count), "-interval", o.interval.String(),
		"-timeout", o.timeout.String()), "-")
}

// nodeClient is test/clients/node/client.js: grpc-js with @grpc/grpc-js-xds.
func nodeClient(t testing.TB, target string, o callOpts) *exec.Cmd {
	o = o.withDefaults()
	dir := clientDir(t, "node")
	node := harness.NodeXDSClient(t, dir)
	return o.with(exec.Command(node, filepath.Join(dir, "client.js"), "--target", target, "--count", strconv.Itoa(o.count),
		"--interval-ms", strconv.FormatInt(o.interval.Milliseconds(), 10), "--timeout-ms", strconv.FormatInt(o.timeout.Milliseconds(), 10)),
		"--")
}

// pythonClient is test/clients/python/client.py on gRPC C-core (Debian's
// python3-grpcio).
func pythonClient(t testing.TB, target string, o callOpts) *exec.Cmd {
	o = o.withDefaults()
	python := harness.PythonGRPC(t)
	return o.with(exec.Command(python, filepath.Join(clientDir(t, "python"), "client.py"), "--target", target,
		"--count", strconv.Itoa(o.count), "--interval", strconv.FormatFloat(o.interval.Seconds(), 'f', -1, 64),
		"--timeout", strconv.FormatFloat(o.timeout.Seconds(), 'f', -1, 64)), "--")
}

// javaClient is tools/grpc-java's client: grpc-java 1.85.1 with grpc-xds
// (SotW only: grpc-java has no Delta xDS client).
func javaClient(t testing.TB, target string, o callOpts) *exec.Cmd {
	o = o.withDefaults()
	java, cp := harness.GRPCJavaClient(t)
	return o.with(exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, harness.GRPCJavaMain,
		"--target", target, "--count", strconv.Itoa(o.count), "--interval-ms", strconv.FormatInt(o.interval.Milliseconds(), 10),
		"--timeout-ms", strconv.FormatInt(o.timeout.Milliseconds(), 10)), "--")
}

// clientDir is test/clients/<name>, absolute.
func clientDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// renderBootstrap runs `meshbridge bootstrap` with args, as the README shows
// it, and writes its output to a file for GRPC_XDS_BOOTSTRAP.
func renderBootstrap(t testing.TB, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bins.meshbridge, append([]string{"bootstrap"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("meshbridge bootstrap %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runProxyless starts cmd with the bootstrap file and collects its calls.
func runProxyless(t testing.TB, name string, cmd *exec.Cmd, bootstrapPath string) *client {
	t.Helper()
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+bootstrapPath)
	proc, sc := startProcess(t, name, cmd, true)
	c := &client{t: t, proc: proc, notify: make(chan struct{}, 1)}
	go func() {
		for sc.Scan() {
			c.add(sc.Text())
		}
	}()
	return c
}

// TestProxylessClients runs a client of each gRPC implementation against
// meshbridge following Consul, each with the bootstrap `meshbridge bootstrap`
// prints (node id, a full locality, plaintext): its xds:/// target resolves
// through meshbridge's LDS, RDS, CDS and EDS, calls reach both instances,
// a deregistered instance stops receiving calls, and an instance added on
// another port receives them. The clients that lack "tls" channel credentials refuse a TLS bootstrap rather than fall back to
// plaintext: given one for the same plaintext port, no call succeeds.
func TestProxylessClients(t *testing.T) {
	consul := harness.StartConsul(t)
	// The service port is the lowest instance port seen: register the lower
	// port first, so the target's port is known whatever meshbridge saw.
	pa, pb, p3 := startBackend(t, "backend-a"), startBackend(t, "backend-b"), startBackend(t, "backend-c")
	lower, higher := "backend-a", "backend-b"
	if pb < pa {
		pa, pb = pb, pa
		lower, higher = higher, lower
	}
	b := startBridge(t, consulRegistry(consul))
	for _, pc := range proxylessClients {
		svc := "proxyless-" + pc.name
		target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, pa)
		t.Run(pc.name+"/follows-consul", func(t *testing.T) {
			cmd := pc.command(t, target, callOpts{})
			boot := renderBootstrap(t, "--node-id", "e2e-"+pc.name, "--xds-address", b.xdsAddr,
				"--cluster", "e2e", "--locality", "e2e-region/e2e-zone/e2e-subzone")
			consul.RegisterInstance(t, svc, svc+"-1", "127.0.0.1", pa, nil, grpcMeta, api.HealthPassing)
			consul.RegisterInstance(t, svc, svc+"-2", "127.0.0.1", pb, nil, grpcMeta, api.HealthPassing)
			c := runProxyless(t, pc.name, cmd, boot)
			c.waitSettled(0, 60*time.Second, lower, higher)

			m := c.mark()
			consul.Deregister(t, svc+"-2")
			c.waitSettled(m, 15*time.Second, lower)

			// Re-added on another port: it maps through its WorkloadEntry.
			m = c.mark()
			consul.RegisterInstance(t, svc, svc+"-3", "127.0.0.1", p3, nil, grpcMeta, api.HealthPassing)
			c.waitSettled(m, 30*time.Second, lower, "backend-c")
		})
		if pc.tls {
			continue
		}
		t.Run(pc.name+"/refuses-tls-bootstrap", func(t *testing.T) {
			const calls = 3
			cmd := pc.command(t, target, callOpts{count: calls})
			boot := renderBootstrap(t, "--node-id", "e2e-"+pc.name+"-tls", "--xds-address", b.xdsAddr, "--tls")
			c := runProxyless(t, pc.name, cmd, boot)
			c.waitUntil(0, 30*time.Second, fmt.Sprintf("%d calls", calls), func(rs []callResult) bool { return len(rs) >= calls })
			rs := c.since(0)
			for _, r := range rs {
				if r.backend != "" {
					t.Fatalf("%s reached %s with a TLS bootstrap for a plaintext port: it fell back to plaintext", pc.name, r.backend)
				}
			}
			t.Logf("%s refused the bootstrap: %s", pc.name, rs[0].err)
		})
	}
}

// TestProxylessClientMTLS runs the grpc-go client against meshbridge serving
// xDS over mTLS, with the bootstrap `meshbridge bootstrap --config` derives
// from the bridge's configuration plus the client's CA, certificate and key
// ("tls" channel credentials, gRFC A65). The file registry feeds it.
func TestProxylessClientMTLS(t *testing.T) {
	ca := harness.NewCA(t, "meshbridge-e2e-ca")
	server := ca.ServerCert(t, "127.0.0.1")
	clientCert := ca.ClientCert(t, "e2e-grpc-go")
	port := startBackend(t, "backend-tls")
	dir := t.TempDir()
	services := filepath.Join(dir, "services.yaml")
	host := "echo.tls.local"
	if err := os.WriteFile(services, fmt.Appendf(nil,
		"services:\n- host: %s\n  ports: [{number: %d, protocol: grpc}]\n  instances: [{address: 127.0.0.1, port: %d}]\n",
		host, port, port), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := harness.FreePorts(t, 2)
	b := &bridge{
		t:        t,
		cfgPath:  filepath.Join(dir, "meshbridge.yaml"),
		xdsAddr:  "127.0.0.1:" + strconv.Itoa(ports[0]),
		httpAddr: "127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	cfg := fmt.Sprintf("registries:\n- name: static\n  type: file\n  file: {path: %q}\n"+
		"xds: {address: %q, tls: {certFile: %q, keyFile: %q, clientCAFile: %q}}\nhttp: {address: %q}\n",
		services, b.xdsAddr, server.CertFile, server.KeyFile, ca.CertFile, b.httpAddr)
	if err := os.WriteFile(b.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()

	boot := renderBootstrap(t, "--node-id", "e2e-grpc-go-mtls", "--config", b.cfgPath,
		"--ca-file", ca.CertFile, "--cert-file", clientCert.CertFile, "--key-file", clientCert.KeyFile)
	target := fmt.Sprintf("xds:///%s:%d", host, port)
	c := runProxyless(t, "grpc-go", goClient(t, target, callOpts{}), boot)
	c.waitSettled(0, 30*time.Second, "backend-tls")
}

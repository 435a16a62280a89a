package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file runs Polaris (github.com/polarismesh/polaris, built by
// tools/build.sh polaris) as the Nacos server of meshbridge's tests: Polaris
// implements the Nacos 1.x HTTP API and the 2.x gRPC API that nacos-sdk-go
// speaks. The harness writes Polaris's own config template, copied next to
// the binary by tools/build.sh, into a fresh working directory with every TCP
// listener on 127.0.0.1 and a free port; Polaris keeps its store
// (./polaris.bolt) and its logs (./log/) there.
//
// Where Polaris differs from a real Nacos server (v1.18.1):
//   - Reads lag writes by up to about a second: Polaris serves lists and
//     subscriptions from a cache it refreshes every second. Tests wait for
//     what they registered with Eventually.
//   - Polaris's cache sees a deregister only when the instance's last
//     register or update is at most about 5 s old (its cache.diffTime; a
//     deregister changes no timestamp the cache reads). DeregisterInstance
//     therefore re-sends the instance's registration first. An SDK client's
//     deregister of an older instance, and its disconnect, go unseen the same
//     way: the instance stays listed, healthy.
//   - Over the 1.x HTTP API every instance is ephemeral (the ephemeral
//     parameter is ignored) and gets a 5 s heartbeat check; with health
//     checks on, an instance nothing beats for turns unhealthy after about
//     40 s. The harness turns health checks off, so an HTTP instance's health
//     is what its last registration said.
//   - An ephemeral instance registered over the 2.x gRPC API (nacos-sdk-go)
//     is healthy while its client's connection is up, whatever it was
//     registered with: Polaris re-checks every 3 s. Only a persistent one
//     (Ephemeral=false) keeps healthy=false.
//   - After a restart on a kept polaris.bolt every instance is older than
//     the 5 s window, so deregisters of kept instances go unseen: Restart
//     starts from an empty store.
//   - A namespace other than the default one is created by the first
//     register in it; a service stays listed after its last instance goes.

const (
	// nacosGRPCOffset is how far the Nacos gRPC port lies above the Nacos HTTP
	// port: Polaris listens there, and nacos-sdk-go dials there, both deriving
	// it from the HTTP port.
	nacosGRPCOffset = 1000
	// polarisConfigFile is the config the harness writes into the working
	// directory; polarisTemplate is the template tools/build.sh puts next to
	// the binary.
	polarisConfigFile = "polaris-server.yaml"
	polarisTemplate   = "polaris-server.yaml"
	// polarisStore is Polaris's bolt store in the working directory.
	polarisStore = "polaris.bolt"
)

// polarisListeners names each TCP listener (an "apiservers" entry of
// Polaris's config) the harness moves to 127.0.0.1 and a free port. A
// template with any other entry is refused, so that a new listener cannot
// come up on 0.0.0.0 and its default port unnoticed.
var polarisListeners = []string{"service-eureka", "api-http", "service-grpc", "config-grpc", "xds-v3", "service-nacos"}

// PolarisPorts are the TCP ports a Polaris server listens on, all on
// 127.0.0.1. The Nacos gRPC port is not set here: it is NacosHTTP + 1000
// (NacosGRPC).
type PolarisPorts struct {
	Eureka      int // Eureka protocol (service-eureka)
	HTTP        int // Polaris's own HTTP API, console API and /metrics (api-http)
	ServiceGRPC int // Polaris's own gRPC API (service-grpc)
	ConfigGRPC  int // Polaris's configuration-centre gRPC API (config-grpc)
	XDS         int // Polaris's xDS server (xds-v3; Polaris's default is 15010, istiod's port)
	NacosHTTP   int // Nacos 1.x HTTP API (service-nacos)
}

// NacosGRPC is the Nacos 2.x gRPC port: NacosHTTP + 1000.
func (p PolarisPorts) NacosGRPC() int { return p.NacosHTTP + nacosGRPCOffset }

// FreePolarisPorts picks free ports for a Polaris server, with NacosHTTP
// chosen so that NacosHTTP + 1000 is free too.
func FreePolarisPorts(t testing.TB) PolarisPorts {
	t.Helper()
	ports, err := FindPolarisPorts()
	if err != nil {
		t.Fatalf("find free ports for polaris: %v", err)
	}
	return ports
}

// PolarisOption changes how StartPolaris starts the server.
type PolarisOption func(*polarisOptions)

type polarisOptions struct {
	edits []func(cfg map[string]any)
}

// WithPolarisConfig edits the server's config after the harness's own
// changes, before it is written: cfg is Polaris's polaris-server.yaml
// decoded into maps ("naming" → "batch" → ...); e.g.
// cfg["healthcheck"].(map[string]any)["open"] = true turns Polaris's health
// checks back on. Listener addresses are the harness's: an edit that moves
// them breaks NacosAddress and the readiness check.
func WithPolarisConfig(edit func(cfg map[string]any)) PolarisOption {
	return func(o *polarisOptions) { o.edits = append(o.edits, edit) }
}

// Polaris is a running Polaris server started by this package.
type Polaris struct {
	srv    server // its dir is the working directory: config, polaris.bolt, log/
	ports  PolarisPorts
	client *http.Client

	mu sync.Mutex
	// registered holds the last registration RegisterInstance sent per
	// instance (polarisInstanceKey), which DeregisterInstance sends again.
	registered map[string]url.Values
}

// StartPolaris starts a Polaris server with an empty store in a fresh
// working directory under t.TempDir() and returns it once the Nacos HTTP API
// answers and the Nacos gRPC port accepts connections. Changed from Polaris's
// template: every TCP listener on 127.0.0.1 and a free port; register
// batching off (with it on, a register right after a client connects can be
// refused as a duplicate); health checks and the server's registration of
// itself (polaris.checker, which only health checks use) off; the CMDB URL
// empty. Nothing in the config then connects out of the machine. The test's
// cleanup stops the server.
func StartPolaris(t testing.TB, opts ...PolarisOption) *Polaris {
	t.Helper()
	var o polarisOptions
	for _, opt := range opts {
		opt(&o)
	}
	bin, template := PolarisBinary(t)
	dir := t.TempDir()
	p := &Polaris{
		srv: server{
			name: "polaris",
			bin:  bin,
			args: []string{"start", "-c", filepath.Join(dir, polarisConfigFile)},
			dir:  dir,
			log:  filepath.Join(dir, "polaris.log"),
			logs: []string{
				filepath.Join(dir, "log", "runtime", "polaris-default.log"),
				filepath.Join(dir, "log", "runtime", "polaris-naming.log"),
				filepath.Join(dir, "log", "runtime", "nacos-apiserver.log"),
			},
			tailLines: 40,
			idle:      listensNowhere,
		},
		ports:      FreePolarisPorts(t),
		client:     &http.Client{Timeout: 10 * time.Second},
		registered: map[string]url.Values{},
	}
	if _, err := WritePolarisConfig(template, dir, p.ports, o.edits...); err != nil {
		t.Fatal(err)
	}
	p.srv.stopAtEnd(t)
	p.srv.start(t, p.NacosAddress(), p.ready)
	return p
}

// ready tells whether the Nacos HTTP API lists services and the Nacos gRPC
// port accepts a connection.
func (p *Polaris) ready() error {
	if _, err := p.listServices(defaultNacosNamespace, defaultNacosGroup); err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.NacosGRPCPort()), time.Second)
	if err != nil {
		return fmt.Errorf("nacos gRPC port: %v", err)
	}
	c.Close()
	return nil
}

// NacosAddress is the Nacos HTTP API's address, "127.0.0.1:port" (what a
// Nacos client is configured with; it derives the gRPC port from it).
func (p *Polaris) NacosAddress() string { return "127.0.0.1:" + strconv.Itoa(p.ports.NacosHTTP) }

// NacosGRPCPort is the Nacos 2.x gRPC port: the HTTP port + 1000.
func (p *Polaris) NacosGRPCPort() int { return p.ports.NacosGRPC() }

// Ports are the server's ports.
func (p *Polaris) Ports() PolarisPorts { return p.ports }

// Dir is the server's working directory: its config, store and logs.
func (p *Polaris) Dir() string { return p.srv.dir }

// Pid is the server process's PID, or 0 when it is not running.
func (p *Polaris) Pid() int { return p.srv.pid() }

// Pause stops the server with SIGSTOP (by its PID): a hung server, whose
// connections stay open and whose requests wait instead of being refused.
// Resume continues it (SIGCONT).
func (p *Polaris) Pause(t testing.TB) {
	t.Helper()
	p.srv.signal(t, syscall.SIGSTOP)
}

// Resume continues a server stopped by Pause.
func (p *Polaris) Resume(t testing.TB) {
	t.Helper()
	p.srv.signal(t, syscall.SIGCONT)
}

// Stop stops the server by its PID: SIGTERM, then SIGKILL once the process
// holds no listening socket any more or after a timeout. On SIGTERM Polaris
// closes its listeners and client connections, then sleeps 5 s before it
// exits; its store is not reused (Restart deletes it), so that sleep is cut
// short. It is a no-op when the server is not running.
func (p *Polaris) Stop() { p.srv.stop() }

// listensNowhere tells whether process pid holds no listening TCP socket.
func listensNowhere(pid int) bool {
	l, err := tcpListeners(pid)
	return err == nil && len(l) == 0
}

// Restart stops the server and starts it again on the same ports with an
// EMPTY store (polaris.bolt is deleted: Polaris keeps a restarted store's
// instances in a state where later deregisters go wrong), returning once it
// is ready. Clients connected to the old server see their connections drop.
func (p *Polaris) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := os.Remove(filepath.Join(p.srv.dir, polarisStore)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("remove polaris store: %v", err)
	}
	p.mu.Lock()
	p.registered = map[string]url.Values{}
	p.mu.Unlock()
	p.srv.start(t, p.NacosAddress(), p.ready)
}

// nacosURL is the Nacos HTTP API's URL for path (e.g. "/nacos/v1/ns/instance").
func (p *Polaris) nacosURL(path string) string { return "http://" + p.NacosAddress() + path }

// nacosDo sends a Nacos 1.x HTTP API request with form parameters (in the
// query for GET and DELETE, whose bodies Polaris does not read; in the body
// otherwise) and returns the response body, or an error for a transport
// error or a status other than 200.
func (p *Polaris) nacosDo(method, path string, form url.Values) ([]byte, error) {
	u := p.nacosURL(path)
	var body io.Reader
	if method == http.MethodGet || method == http.MethodDelete {
		u += "?" + form.Encode()
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

func polarisInstanceKey(namespace, group, service, ip string, port int) string {
	return strings.Join([]string{namespace, group, service, ip, strconv.Itoa(port)}, "\x00")
}

// RegisterInstance registers instance ip:port of service in group and
// namespace over the Nacos 1.x HTTP API (POST /nacos/v1/ns/instance), or
// overwrites it: registering it again with other values is how a test
// changes its weight, metadata, health or enabled flag. namespace "" or
// "public" is the default namespace (another one is created by its first
// register); group "" is DEFAULT_GROUP; weight is 0 to 1000; metadata may be
// nil. healthy is kept as given (health checks are off); enabled=false
// hides the instance from Nacos clients' lists. ephemeral is sent as given,
// but Polaris lists every instance as ephemeral. Readers see the change
// within about a second.
func (p *Polaris) RegisterInstance(t testing.TB, namespace, group, service, ip string, port int, weight float64,
	metadata map[string]string, ephemeral, healthy, enabled bool) {
	t.Helper()
	if metadata == nil {
		metadata = map[string]string{}
	}
	meta, err := json.Marshal(metadata)
	if err != nil {
		t.Fatalf("encode metadata: %v", err)
	}
	form := url.Values{
		"serviceName": {nacosServiceName(group, service)},
		"ip":          {ip},
		"port":        {strconv.Itoa(port)},
		"weight":      {strconv.FormatFloat(weight, 'f', -1, 64)},
		"metadata":    {string(meta)},
		"ephemeral":   {strconv.FormatBool(ephemeral)},
		"healthy":     {strconv.FormatBool(healthy)},
		"enabled":     {strconv.FormatBool(enabled)},
	}
	if namespace != "" {
		form.Set("namespaceId", namespace)
	}
	if group != "" {
		form.Set("groupName", group)
	}
	if _, err := p.nacosDo(http.MethodPost, "/nacos/v1/ns/instance", form); err != nil {
		t.Fatalf("register %s:%d in %s/%s/%s: %v", ip, port, namespace, group, service, err)
	}
	p.mu.Lock()
	p.registered[polarisInstanceKey(namespace, group, service, ip, port)] = form
	p.mu.Unlock()
}

// DeregisterInstance removes instance ip:port of service in group and
// namespace over the Nacos 1.x HTTP API (DELETE /nacos/v1/ns/instance);
// namespace and group as for RegisterInstance. Polaris sees a deregister only
// of an instance written in about the last 5 s, so when RegisterInstance
// registered it on this server (since the last Restart), that registration
// is first sent again unchanged; an instance registered otherwise (e.g. by an
// SDK client) more than 5 s ago may stay listed. Removing an unknown
// instance succeeds. Readers see the removal within about a second.
func (p *Polaris) DeregisterInstance(t testing.TB, namespace, group, service, ip string, port int) {
	t.Helper()
	p.mu.Lock()
	again := p.registered[polarisInstanceKey(namespace, group, service, ip, port)]
	p.mu.Unlock()
	if again != nil {
		if _, err := p.nacosDo(http.MethodPost, "/nacos/v1/ns/instance", again); err != nil {
			t.Fatalf("re-register %s:%d in %s/%s/%s before deregistering it: %v", ip, port, namespace, group, service, err)
		}
	}
	form := url.Values{
		"serviceName": {nacosServiceName(group, service)},
		"ip":          {ip},
		"port":        {strconv.Itoa(port)},
	}
	if namespace != "" {
		form.Set("namespaceId", namespace)
	}
	if group != "" {
		form.Set("groupName", group)
	}
	if _, err := p.nacosDo(http.MethodDelete, "/nacos/v1/ns/instance", form); err != nil {
		t.Fatalf("deregister %s:%d in %s/%s/%s: %v", ip, port, namespace, group, service, err)
	}
	p.mu.Lock()
	delete(p.registered, polarisInstanceKey(namespace, group, service, ip, port))
	p.mu.Unlock()
}

// ListServices returns the names of the services in group and namespace
// (GET /nacos/v1/ns/service/list, one page of up to 10,000), without the
// group prefix; namespace "" or "public" is the default namespace, group ""
// is DEFAULT_GROUP. Polaris lists a service as long as it exists, with
// instances or not, and creates one on its first register.
func (p *Polaris) ListServices(t testing.TB, namespace, group string) []string {
	t.Helper()
	names, err := p.listServices(namespace, group)
	if err != nil {
		t.Fatalf("list services in %s/%s: %v", namespace, group, err)
	}
	return names
}

func (p *Polaris) listServices(namespace, group string) ([]string, error) {
	return nacosV1{p.nacosDo}.listServices(namespace, group)
}

// ListInstances returns the enabled instances of service in group and
// namespace, healthy or not (GET /nacos/v1/ns/instance/list), as a Nacos
// 1.x client reads them: disabled instances are left out; Metadata includes
// Polaris's own keys (internal-nacos-cluster, internal-nacos-service).
func (p *Polaris) ListInstances(t testing.TB, namespace, group, service string) []NacosInstance {
	t.Helper()
	in, err := nacosV1{p.nacosDo}.listInstances(namespace, group, service)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// tcpListeners returns "ip:port" of each listening TCP socket (IPv4 and
// IPv6) process pid holds, from /proc/<pid>/fd and /proc/<pid>/net/tcp{,6}.
func tcpListeners(pid int) ([]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, file := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			addr, err := procNetAddr(f[1])
			if err != nil {
				return nil, err
			}
			out = append(out, addr)
		}
	}
	return out, nil
}

// procNetAddr decodes /proc/net/tcp's "0100007F:1F90" (little-endian words)
// into "127.0.0.1:8080".
func procNetAddr(s string) (string, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return "", err
	}
	ip := make(net.IP, len(hexIP)/2)
	for i := 0; i < len(ip); i += 4 {
		word, err := strconv.ParseUint(hexIP[2*i:2*i+8], 16, 32)
		if err != nil {
			return "", err
		}
		ip[i], ip[i+1], ip[i+2], ip[i+3] = byte(word), byte(word>>8), byte(word>>16), byte(word>>24)
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

// PolarisBinary returns the polaris binary tests run and the config template
// next to it: $MESHBRIDGE_POLARIS_BIN, else the newest
// ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/polaris-*/polaris built by
// tools/build.sh; the template is polaris-server.yaml in the binary's
// directory. When either is missing it skips the test, or fails it when
// MESHBRIDGE_REQUIRE_SERVERS=1.
func PolarisBinary(t testing.TB) (bin, template string) {
	t.Helper()
	bin = os.Getenv("MESHBRIDGE_POLARIS_BIN")
	if bin != "" && !isExecutable(bin) {
		missing(t, "polaris", fmt.Sprintf("MESHBRIDGE_POLARIS_BIN=%s is not an executable file", bin))
	}
	if bin == "" {
		bin = newestCached("polaris")
	}
	if bin == "" {
		missing(t, "polaris", "no polaris binary: set MESHBRIDGE_POLARIS_BIN, or build it with tools/build.sh polaris (cached under "+
			cacheDir()+")")
	}
	template = filepath.Join(filepath.Dir(bin), polarisTemplate)
	if fi, err := os.Stat(template); err != nil || !fi.Mode().IsRegular() {
		missing(t, "polaris", fmt.Sprintf("no Polaris config template %s next to %s (tools/build.sh polaris puts it there)", template, bin))
	}
	return bin, template
}

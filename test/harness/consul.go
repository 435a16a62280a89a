package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// ConsulPorts are the ports a Consul agent listens on, all on 127.0.0.1.
type ConsulPorts struct {
	// HTTP is the HTTP API's port: plain HTTP, or HTTPS only when the agent
	// was started WithConsulTLS.
	HTTP    int
	SerfLAN int
	SerfWAN int
	Server  int
}

// FreeConsulPorts picks free ports for a Consul agent.
func FreeConsulPorts(t testing.TB) ConsulPorts {
	p := FreePorts(t, 4)
	return ConsulPorts{HTTP: p[0], SerfLAN: p[1], SerfWAN: p[2], Server: p[3]}
}

// ConsulOption changes how StartConsul starts the agent.
type ConsulOption func(*consulOptions)

type consulOptions struct {
	hcl   []string
	tls   *consulTLS
	token string
}

type consulTLS struct {
	ca             *CA
	verifyIncoming bool
}

// WithConsulHCL adds an HCL configuration fragment (consul agent -hcl), e.g.
// `limits { http_max_conns_per_client = 50 }`.
func WithConsulHCL(hcl string) ConsulOption {
	return func(o *consulOptions) { o.hcl = append(o.hcl, hcl) }
}

// WithConsulTLS serves the agent's HTTP API over HTTPS only, on
// Ports().HTTP (plain HTTP is off: ports { http = -1 }), with a server
// certificate for 127.0.0.1 and "localhost" issued by ca. With
// verifyIncoming the agent requires a client certificate signed by ca
// (tls.https.verify_incoming); the harness's own client presents one issued
// by ca to itself (common name "harness"). Consul 1.12+ configuration:
// tls { defaults { ca_file cert_file key_file } https { verify_incoming } }.
func WithConsulTLS(ca *CA, verifyIncoming bool) ConsulOption {
	return func(o *consulOptions) { o.tls = &consulTLS{ca: ca, verifyIncoming: verifyIncoming} }
}

// WithConsulACL enables ACLs with the given default policy ("allow" or
// "deny") and managementToken as the initial management token and the
// agent's own token (so that the agent can register its node under "deny").
// The harness's client (Client, Register, the readiness check) uses
// managementToken.
func WithConsulACL(defaultPolicy, managementToken string) ConsulOption {
	return func(o *consulOptions) {
		o.hcl = append(o.hcl, fmt.Sprintf(`acl {
  enabled = true
  default_policy = %q
  tokens {
    initial_management = %q
    agent = %q
  }
}`, defaultPolicy, managementToken, managementToken))
		o.token = managementToken
	}
}

// Consul is a running Consul agent started by this package.
type Consul struct {
	srv    server
	ports  ConsulPorts
	node   string
	scheme string // "http" or "https"
	c      *api.Client
}

// StartConsul starts a dev-mode Consul agent (in-memory state, a server and
// client in one) and returns it once its leader is elected and its node is
// healthy in the catalog. The test's cleanup stops it.
func StartConsul(t testing.TB, opts ...ConsulOption) *Consul {
	t.Helper()
	var o consulOptions
	for _, opt := range opts {
		opt(&o)
	}
	args := []string{"agent", "-dev"}
	for _, h := range o.hcl {
		args = append(args, "-hcl", h)
	}
	return startConsul(t, args, FreeConsulPorts(t), o)
}

// StartConsulServer starts a single non-dev Consul server keeping its state
// in dataDir, on the given ports, so that Restart brings back the same
// server with the same state (registered services and checks included). The
// test's cleanup stops it.
func StartConsulServer(t testing.TB, dataDir string, ports ConsulPorts) *Consul {
	t.Helper()
	args := []string{"agent", "-server", "-bootstrap-expect", "1", "-data-dir", dataDir,
		// Dev-mode raft timings: elections in about a second, not five.
		"-hcl", "performance { raft_multiplier = 1 }"}
	return startConsul(t, args, ports, consulOptions{})
}

func startConsul(t testing.TB, args []string, ports ConsulPorts, o consulOptions) *Consul {
	t.Helper()
	c := &Consul{
		srv:    server{name: "consul", bin: ConsulBinary(t), log: filepath.Join(t.TempDir(), "consul.log"), tailLines: 60},
		ports:  ports,
		node:   "harness-" + strconv.Itoa(ports.HTTP),
		scheme: "http",
	}
	httpPort, httpsPort := strconv.Itoa(ports.HTTP), "-1"
	clientCfg := &api.Config{Address: c.Address(), Token: o.token}
	if o.tls != nil {
		c.scheme, httpPort, httpsPort = "https", "-1", strconv.Itoa(ports.HTTP)
		server := o.tls.ca.ServerCert(t, "127.0.0.1", "localhost")
		self := o.tls.ca.ClientCert(t, "harness")
		args = append(args, "-hcl", fmt.Sprintf(`tls {
  defaults {
    ca_file = %q
    cert_file = %q
    key_file = %q
  }
  https {
    verify_incoming = %t
  }
}`, o.tls.ca.CertFile, server.CertFile, server.KeyFile, o.tls.verifyIncoming))
		clientCfg.TLSConfig = api.TLSConfig{CAFile: o.tls.ca.CertFile, CertFile: self.CertFile, KeyFile: self.KeyFile}
	}
	clientCfg.Scheme = c.scheme
	c.srv.args = append(args,
		"-node", c.node,
		"-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-http-port", httpPort, "-https-port", httpsPort,
		"-serf-lan-port", strconv.Itoa(ports.SerfLAN),
		"-serf-wan-port", strconv.Itoa(ports.SerfWAN),
		"-server-port", strconv.Itoa(ports.Server),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
		"-hcl", "disable_update_check = true",
		"-log-level", "info",
	)
	client, err := api.NewClient(clientCfg)
	if err != nil {
		t.Fatalf("consul client: %v", err)
	}
	c.c = client
	c.srv.stopAtEnd(t)
	c.srv.start(t, c.Address(), c.ready)
	return c
}

// Address is the agent's HTTP API address, "127.0.0.1:port", without a
// scheme: the API speaks HTTPS there when the agent was started
// WithConsulTLS (see URL).
func (c *Consul) Address() string { return "127.0.0.1:" + strconv.Itoa(c.ports.HTTP) }

// URL is the agent's HTTP API address with its scheme:
// "http://127.0.0.1:port" or, WithConsulTLS, "https://127.0.0.1:port".
func (c *Consul) URL() string { return c.scheme + "://" + c.Address() }

// Client is an API client for the agent: without a token, or with the
// management token of WithConsulACL; over HTTPS with the harness's client
// certificate WithConsulTLS.
func (c *Consul) Client() *api.Client { return c.c }

// Ports are the agent's ports.
func (c *Consul) Ports() ConsulPorts { return c.ports }

// Node is the agent's node name.
func (c *Consul) Node() string { return c.node }

// ready tells whether the agent has a leader and its own node's checks pass
// in the catalog (the agent synced itself, so reads see real state).
func (c *Consul) ready() error {
	leader, err := c.c.Status().Leader()
	if err != nil || leader == "" {
		return fmt.Errorf("no leader yet (%v)", err)
	}
	checks, _, err := c.c.Health().Node(c.node, nil)
	if err != nil || len(checks) == 0 || checks.AggregatedStatus() != api.HealthPassing {
		return fmt.Errorf("node not healthy in the catalog yet (%v)", err)
	}
	return nil
}

// Stop stops the agent by its PID: SIGTERM, then SIGKILL after a timeout.
// It is a no-op when the agent is not running.
func (c *Consul) Stop() { c.srv.stop() }

// Pause stops the agent with SIGSTOP (by its PID): a hung server, whose
// connections stay open and whose queries time out instead of being
// refused. Resume continues it (SIGCONT).
func (c *Consul) Pause(t testing.TB) { c.signal(t, syscall.SIGSTOP) }

// Resume continues an agent stopped by Pause.
func (c *Consul) Resume(t testing.TB) { c.signal(t, syscall.SIGCONT) }

func (c *Consul) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	c.srv.signal(t, sig)
}

// Restart stops the agent and starts it again with the same arguments, data
// dir and ports, returning once it is ready.
func (c *Consul) Restart(t testing.TB) {
	t.Helper()
	c.Stop()
	c.srv.start(t, c.Address(), c.ready)
}

// Register registers a service with the agent.
func (c *Consul) Register(t testing.TB, svc api.AgentServiceRegistration) {
	t.Helper()
	if err := c.c.Agent().ServiceRegister(&svc); err != nil {
		t.Fatalf("register service %q (id %q): %v", svc.Name, svc.ID, err)
	}
}

// CheckID is the ID of the TTL check RegisterInstance gives instance id.
func CheckID(id string) string { return "service:" + id }

// RegisterInstance registers instance id of service name at addr:port with
// one TTL check (ID CheckID(id)) in checkStatus (api.HealthPassing,
// HealthWarning or HealthCritical), which SetCheck changes. The TTL is long
// enough never to expire during a test.
//
// The status is also set through the TTL endpoint: the agent persists a TTL
// check's state only on such an update, and a restarted agent otherwise
// brings the check back critical.
func (c *Consul) RegisterInstance(t testing.TB, name, id, addr string, port int, tags []string, meta map[string]string, checkStatus string) {
	t.Helper()
	c.Register(t, api.AgentServiceRegistration{
		Name: name, ID: id, Address: addr, Port: port, Tags: tags, Meta: meta,
		Check: &api.AgentServiceCheck{CheckID: CheckID(id), TTL: "1h", Status: checkStatus},
	})
	c.SetCheck(t, CheckID(id), checkStatus)
}

// SetCheck sets a TTL check's status: api.HealthPassing, HealthWarning or
// HealthCritical.
func (c *Consul) SetCheck(t testing.TB, checkID, status string) {
	t.Helper()
	if err := c.c.Agent().UpdateTTL(checkID, "set by test", status); err != nil {
		t.Fatalf("set check %q to %s: %v", checkID, status, err)
	}
}

// Deregister removes a service instance from the agent.
func (c *Consul) Deregister(t testing.TB, id string) {
	t.Helper()
	if err := c.c.Agent().ServiceDeregister(id); err != nil {
		t.Fatalf("deregister service %q: %v", id, err)
	}
}

// Maintenance puts a service instance in or out of maintenance mode.
func (c *Consul) Maintenance(t testing.TB, id string, enable bool) {
	t.Helper()
	var err error
	if enable {
		err = c.c.Agent().EnableServiceMaintenance(id, "set by test")
	} else {
		err = c.c.Agent().DisableServiceMaintenance(id)
	}
	if err != nil {
		t.Fatalf("set maintenance of %q to %v: %v", id, enable, err)
	}
}

// ConsulBinary returns the consul binary tests run: $MESHBRIDGE_CONSUL_BIN,
// else the newest ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/consul-*/consul
// built by tools/build.sh, else consul on PATH. When there is none it skips
// the test, or fails it when MESHBRIDGE_REQUIRE_SERVERS=1.
func ConsulBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MESHBRIDGE_CONSUL_BIN"); p != "" {
		if isExecutable(p) {
			return p
		}
		missing(t, "consul", fmt.Sprintf("MESHBRIDGE_CONSUL_BIN=%s is not an executable file", p))
	}
	if p := newestCached("consul"); p != "" {
		return p
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p
	}
	missing(t, "consul", "no consul binary: set MESHBRIDGE_CONSUL_BIN, or build it with tools/build.sh consul (cached under "+
		cacheDir()+")")
	return ""
}

func missing(t testing.TB, server, why string) {
	t.Helper()
	if os.Getenv("MESHBRIDGE_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s; MESHBRIDGE_REQUIRE_SERVERS=1 forbids skipping (run tools/build.sh %s)", why, server)
	}
	t.Skipf("%s; skipping", why)
}

func cacheDir() string {
	if d := os.Getenv("MESHBRIDGE_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "meshbridge")
}

// newestCached returns the most recently built <cache>/<name>-<key>/<name>.
// tools/build.sh builds into <name>-<key>.tmp and renames it when done, so
// .tmp directories hold partial builds and are ignored.
func newestCached(name string) string {
	matches, _ := filepath.Glob(filepath.Join(cacheDir(), name+"-*", name))
	var best string
	var bestTime time.Time
	for _, m := range matches {
		if strings.HasSuffix(filepath.Dir(m), ".tmp") || !isExecutable(m) {
			continue
		}
		if fi, err := os.Stat(m); err == nil && fi.ModTime().After(bestTime) {
			best, bestTime = m, fi.ModTime()
		}
	}
	return best
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

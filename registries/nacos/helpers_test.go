package nacos

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

const waitTimeout = registrytest.DefaultTimeout

// key is the recorder's key of service name in namespace and group
// (registries.ServiceKey.String).
func key(namespace, group, name string) string {
	return registries.Service{Namespace: namespace, Group: group, Name: name}.Key().String()
}

// runRegistry runs a registry on cfg until the test ends. Its debug log
// goes to logs when not nil.
func runRegistry(t *testing.T, cfg Config, logs io.Writer) (*Registry, *registrytest.Recorder) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "nacos-test"
	}
	if logs == nil {
		logs = io.Discard
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.CacheDir == "" {
		cfg.CacheDir = t.TempDir()
	}
	reg, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return reg, registrytest.Run(t, reg, 20*time.Second)
}

// appClient is an application registering ephemeral instances: on the Nacos
// server over its HTTP API with heartbeats (harness.Nacos, a Nacos 1.x
// client's way; newNacosApp), on Polaris with the nacos-sdk-go naming
// client over gRPC (newApp). nacos-sdk-go v2.3.5 clients in this process
// race with themselves when they reconnect (rpc.RpcClient; see
// runWatchdog), which the real server makes them do when it answers a
// request before it registered their connection; the race detector would
// report the SDK, not the bridge.
type appClient struct {
	t         testing.TB
	nc        naming_client.INamingClient
	nacos     *harness.Nacos
	namespace string
}

// newNacosApp is an application of namespace ("" = public) registering on
// n over its HTTP API.
func newNacosApp(t testing.TB, n *harness.Nacos, namespace string) *appClient {
	return &appClient{t: t, nacos: n, namespace: namespace}
}

// newApp connects an application to the server whose HTTP API is at addr
// ("127.0.0.1:port") in namespace ("" = public); the test's cleanup closes
// it.
func newApp(t testing.TB, addr string, namespace string) *appClient {
	t.Helper()
	_, portStr, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("server address %q: %v", addr, err)
	}
	dir := t.TempDir()
	nc, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			NamespaceId: namespace, TimeoutMs: 5000, NotLoadCacheAtStart: true,
			CacheDir: dir, LogDir: dir, LogLevel: "error",
		},
		ServerConfigs: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: uint64(port)}},
	})
	if err != nil {
		t.Fatalf("nacos naming client: %v", err)
	}
	a := &appClient{t: t, nc: nc}
	t.Cleanup(a.close)
	return a
}

func (a *appClient) close() {
	if a.nc == nil {
		return
	}
	sdkClientMu.Lock() // rpc.RpcClient.Shutdown edits the SDK's client map unlocked
	defer sdkClientMu.Unlock()
	a.nc.CloseClient()
}

// instance is an ephemeral instance an appClient registers.
type instance struct {
	group, service, ip string
	port               uint64
	weight             float64
	cluster            string
	metadata           map[string]string
}

func (a *appClient) register(in instance) {
	a.t.Helper()
	if a.nacos != nil {
		if in.weight == 0 {
			in.weight = 1
		}
		a.nacos.RegisterInCluster(a.t, a.namespace, in.group, in.service, in.cluster, in.ip, int(in.port), in.weight, in.metadata)
		return
	}
	if in.weight == 0 {
		in.weight = 1
	}
	// A register right after the client connected can meet a server that
	// has not registered the connection yet ("Connection is unregistered":
	// the SDK reconnects); the application tries again, as its SDK's redo
	// would.
	harness.Eventually(a.t, waitTimeout, fmt.Sprintf("register %+v", in), func() error {
		ok, err := a.nc.RegisterInstance(vo.RegisterInstanceParam{
			Ip: in.ip, Port: in.port, ServiceName: in.service, GroupName: in.group, ClusterName: in.cluster,
			Weight: in.weight, Enable: true, Healthy: true, Ephemeral: true, Metadata: in.metadata,
		})
		if err != nil || !ok {
			return fmt.Errorf("ok=%v err=%v", ok, err)
		}
		return nil
	})
}

// deregister removes an ephemeral instance.
func (a *appClient) deregister(in instance) {
	a.t.Helper()
	if a.nacos != nil {
		a.nacos.DeregisterInstance(a.t, a.namespace, in.group, in.service, in.ip, int(in.port), true)
		return
	}
	ok, err := a.nc.DeregisterInstance(vo.DeregisterInstanceParam{
		Ip: in.ip, Port: in.port, ServiceName: in.service, GroupName: in.group, Cluster: in.cluster, Ephemeral: true,
	})
	if err != nil || !ok {
		a.t.Fatalf("deregister %+v: ok=%v err=%v", in, ok, err)
	}
}

// counted is meshbridge_registry_errors_total{registry,reason}.
func counted(registry, reason string) float64 {
	return testutil.ToFloat64(registries.RegistryErrors.WithLabelValues(registry, reason))
}

// skipped is meshbridge_registry_skipped_total{registry,reason="dubbo"}.
func skipped(registry string) float64 {
	return testutil.ToFloat64(registries.RegistrySkipped.WithLabelValues(registry, "dubbo"))
}

// protectedServices is meshbridge_registry_protected_services{registry}
// (-1 when there is no such series).
func protectedServices(t testing.TB, registry string) float64 {
	t.Helper()
	return registrytest.RegistryGauge(t, "meshbridge_registry_protected_services", registry)
}

// lister is a Nacos-protocol server a test registers in (harness.Nacos,
// harness.Polaris).
type lister interface {
	ListServices(t testing.TB, namespace, group string) []string
}

// waitListed waits until the server lists a service (its listing lags
// writes), so that a registry started next finds it in its first listing.
func waitListed(t testing.TB, p lister, namespace, group, name string) {
	t.Helper()
	harness.EventuallyTrue(t, waitTimeout, "the server lists "+name, func() bool {
		return slices.Contains(p.ListServices(t, namespace, group), name)
	})
}

// tcpPort is a port on 127.0.0.1 a test opens and closes: what the Nacos
// server's TCP health check of a persistent instance connects to.
type tcpPort struct {
	port int
	mu   sync.Mutex
	l    net.Listener
}

// listenTCP listens on a free port of 127.0.0.1, accepting and closing
// every connection, until close or the end of the test.
func listenTCP(t testing.TB) *tcpPort {
	t.Helper()
	p := &tcpPort{port: harness.FreePort(t)}
	p.listen(t)
	t.Cleanup(p.close)
	return p
}

// listen opens the port again.
func (p *tcpPort) listen(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.port))
	if err != nil {
		t.Fatalf("listen on %d: %v", p.port, err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// close closes the port: connections to it are refused.
func (p *tcpPort) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
}

// identityBuilder is the dubbo.Builder of c with dubbotest's identity
// templates: a Dubbo service's host states its identity.
func identityBuilder(t testing.TB, c dubbo.Config) *dubbo.Builder {
	t.Helper()
	b, err := dubbo.NewBuilder(dubbotest.IdentityTemplates(c))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

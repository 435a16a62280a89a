package nacos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/meshbridge/meshbridge/test/harness"
)

const waitTimeout = 45 * time.Second

// recorder is a Sink that records every call and checks the Sink contract:
// Synced once.
type recorder struct {
	t  testing.TB
	mu sync.Mutex
	// all is every snapshot in arrival order.
	all []registries.Snapshot
	// last is the last snapshot per service (key), removed services deleted;
	// good the last authoritative list per service.
	last   map[string]registries.Snapshot
	good   map[string][]registries.Instance
	synced int
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, last: map[string]registries.Snapshot{}, good: map[string][]registries.Instance{}}
}

// key names a service in the recorder: "<namespace>/<group>/<name>".
func key(namespace, group, name string) string { return namespace + "/" + group + "/" + name }

func keyOf(s registries.Service) string { return key(s.Namespace, s.Group, s.Name) }

func (r *recorder) Snapshot(s registries.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
	k := keyOf(s.Service)
	switch {
	case s.Service.Name == "":
	case s.Removed:
		delete(r.last, k)
		delete(r.good, k)
	case s.Err != nil:
		r.last[k] = s
	default:
		r.last[k] = s
		r.good[k] = s.Service.Instances
	}
}

func (r *recorder) Synced(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced++
	if r.synced > 1 {
		r.t.Errorf("Synced called %d times, want once", r.synced)
	}
}

// eventually waits until cond holds under the recorder's lock.
func (r *recorder) eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	harness.Eventually(t, waitTimeout, what, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if cond() {
			return nil
		}
		return fmt.Errorf("not yet; state:\n%s", r.dumpLocked())
	})
}

// instances returns a service's last authoritative instances by address
// "ip:port"; nil when none is recorded. r.mu is held.
func (r *recorder) instances(k string) map[string]registries.Instance {
	list, ok := r.good[k]
	if !ok {
		return nil
	}
	out := map[string]registries.Instance{}
	for _, in := range list {
		out[in.Address+":"+strconv.FormatUint(uint64(in.Port), 10)] = in
	}
	return out
}

// addrs returns the sorted "ip:port" of a service's last authoritative
// instances, or nil. r.mu is held.
func (r *recorder) addrs(k string) []string {
	m := r.instances(k)
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

func (r *recorder) dumpLocked() string {
	var b strings.Builder
	fmt.Fprintf(&b, "synced=%d snapshots=%d services=%d\n", r.synced, len(r.all), len(r.last))
	for _, k := range slices.Sorted(maps.Keys(r.last)) {
		fmt.Fprintf(&b, "  %s err=%v addrs=%v\n", k, r.last[k].Err, r.addrs(k))
	}
	return b.String()
}

// snapshots returns a copy of every snapshot so far.
func (r *recorder) snapshots() []registries.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// runRegistry runs a registry on cfg until the test ends. Its debug log
// goes to logs when not nil.
func runRegistry(t *testing.T, cfg Config, logs io.Writer) (*Registry, *recorder) {
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
	rec := newRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	return reg, rec
}

// appClient is an application registering ephemeral instances with the
// nacos-sdk-go naming client (gRPC), as real applications do.
type appClient struct {
	t  testing.TB
	nc naming_client.INamingClient
}

// newApp connects an application to p in namespace ("" = public); the test's
// cleanup closes it.
func newApp(t testing.TB, p *harness.Polaris, namespace string) *appClient {
	t.Helper()
	dir := t.TempDir()
	nc, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			NamespaceId: namespace, TimeoutMs: 5000, NotLoadCacheAtStart: true,
			CacheDir: dir, LogDir: dir, LogLevel: "error",
		},
		ServerConfigs: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: uint64(p.Ports().NacosHTTP)}},
	})
	if err != nil {
		t.Fatalf("nacos naming client: %v", err)
	}
	a := &appClient{t: t, nc: nc}
	t.Cleanup(a.close)
	return a
}

func (a *appClient) close() {
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
	if in.weight == 0 {
		in.weight = 1
	}
	ok, err := a.nc.RegisterInstance(vo.RegisterInstanceParam{
		Ip: in.ip, Port: in.port, ServiceName: in.service, GroupName: in.group, ClusterName: in.cluster,
		Weight: in.weight, Enable: true, Healthy: true, Ephemeral: true, Metadata: in.metadata,
	})
	if err != nil || !ok {
		a.t.Fatalf("register %+v: ok=%v err=%v", in, ok, err)
	}
}

// deregister removes an ephemeral instance. Polaris sees a deregister only
// of an instance written in about the last 5 s, so it is registered again
// unchanged first (test/harness/polaris.go).
func (a *appClient) deregister(in instance) {
	a.t.Helper()
	a.register(in)
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

// waitListed waits until Polaris lists a service (its reads lag writes by
// about a second), so that a registry started next finds it in its first
// listing.
func waitListed(t testing.TB, p *harness.Polaris, namespace, group, name string) {
	t.Helper()
	harness.EventuallyTrue(t, waitTimeout, "Polaris lists "+name, func() bool {
		return slices.Contains(p.ListServices(t, namespace, group), name)
	})
}

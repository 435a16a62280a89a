package istio

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	"istio.io/istio/pkg/workloadapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/kube"
	mbpipeline "github.com/meshbridge/meshbridge/pipeline"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// The ambient tests (TestAmbient…) run meshbridge's Kubernetes output into
// the harness's kube-apiserver, with Istio's CRDs from the istio.io/istio
// module go.mod pins, and read what an unpatched istiod of that version
// makes of the objects: in Kubernetes mode (its config and registry are the
// apiserver), PILOT_ENABLE_AMBIENT=true, plaintext xDS. One istiod and one
// apiserver serve every test (harness.SharedIstiod); each test writes into
// a namespace of its own, with hosts that name it.

// Type URLs of the WDS view ztunnel subscribes to (istiod
// pilot/pkg/model AddressType, WorkloadAuthorizationType). Another type
// URL sends a ztunnel node to a generator that requires an authenticated
// identity, and istiod drops the stream.
const (
	addressType       = "type.googleapis.com/istio.workload.Address"
	authorizationType = "type.googleapis.com/istio.security.Authorization"
)

// ambientWait bounds the waits of the ambient tests: istiod's debounce
// (100 ms quiet, 10 s at most) plus its krt collections and the writer.
const ambientWait = 60 * time.Second

// ambient is the shared kube-apiserver and istiod.
type ambient struct {
	kube   *harness.Kube
	istiod *harness.Istiod
	client versioned.Interface // the test's own, uncounted
}

func startAmbient(t testing.TB) *ambient {
	t.Helper()
	k := harness.SharedKube(t)
	i := harness.SharedIstiod(t, harness.IstiodOptions{Env: []string{"PILOT_ENABLE_AMBIENT=true"}})
	client, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &ambient{kube: k, istiod: i, client: client}
}

// bridgeOptions are what a test varies of meshbridge's configuration.
type bridgeOptions struct {
	endpoints   translate.EndpointMode // output.endpoints
	allowLabels []string               // output.allowLabels
	// consul, when set, is the registry (healthyOnly, Consul's host
	// template) instead of the file registry.
	consul *harness.Consul
}

// bridge is meshbridge in-process as cmd/bridge runs it with a file
// registry and the Kubernetes output (no leader election): pipeline →
// Store → kube.Writer → the shared apiserver, into namespace ns.
type bridge struct {
	ns     string
	xds    *xds.DiscoveryServer // its direct xDS, on a free 127.0.0.1 port
	writer *kube.Writer
	// writes counts the writer's requests to the apiserver.
	writes *harness.RequestCounter
	stop   func()
}

// startBridge starts meshbridge reading the services file path (or
// o.consul), writing to ns, and returns once the writer leads (its first
// list done) and is idle.
func (a *ambient) startBridge(t testing.TB, ns, path string, o bridgeOptions) *bridge {
	t.Helper()
	var (
		reg          registries.Registry
		err          error
		regType      = "file"
		hostTemplate string
	)
	if o.consul != nil {
		regType, hostTemplate = "consul", consul.HostTemplate
		reg, err = consul.New(consul.Config{Name: registryName, Address: o.consul.URL(), HealthyOnly: true, Logger: quiet})
	} else {
		reg, err = file.New(file.Config{Name: registryName, Path: path, Logger: quiet})
	}
	if err != nil {
		t.Fatal(err)
	}
	tr, err := translate.New(translate.Options{Registry: registryName, Namespace: ns, Endpoints: o.endpoints,
		AllowLabels: o.allowLabels, HostTemplate: hostTemplate})
	if err != nil {
		t.Fatal(err)
	}
	p := mbpipeline.New(mbpipeline.Options{
		Registries: []mbpipeline.Registry{{Watcher: reg, Sync: syncer.Registry{Name: registryName, Type: regType,
			Translator: tr, Policy: syncer.DefaultOutagePolicy}}},
		XDS:    xds.Options{Address: "127.0.0.1:0"},
		Logger: quiet,
	})
	b := &bridge{ns: ns, xds: p.XDS, writes: &harness.RequestCounter{}}
	client, md := b.writes.IstioClients(t, a.kube.Config)
	b.writer, err = kube.NewWriter(p.Store, kube.Options{
		Namespace: ns, Registries: []string{registryName}, Client: client, Metadata: md,
		RegistrySynced: p.Syncer.RegistrySynced, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			t.Errorf("pipeline: %v", err)
		}
	})
	wg.Go(func() { b.writer.Run(ctx) })
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-p.Ready():
			b.writer.Lead(ctx)
		}
	})
	b.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(b.stop)
	harness.EventuallyTrue(t, ambientWait, "meshbridge leads and is idle", func() bool {
		return !b.writer.LastResync().IsZero() && b.writer.Pending() == 0
	})
	return b
}

// idle waits until the writer has nothing queued, being written or waiting
// for a retry.
func (b *bridge) idle(t testing.TB) {
	t.Helper()
	harness.EventuallyTrue(t, ambientWait, "meshbridge's writer idle", func() bool { return b.writer.Pending() == 0 })
}

// fileServices is the file registry's content, by host.
type fileServices map[string]file.ServiceSpec

// svc is a file-registry service: host, one declared port, instances.
func svc(host string, port uint32, protocol string, insts ...file.InstanceSpec) file.ServiceSpec {
	return file.ServiceSpec{Host: host, Ports: []file.PortSpec{{Number: port, Protocol: protocol}}, Instances: insts}
}

func instance(addr string, port uint32, labels map[string]string) file.InstanceSpec {
	return file.InstanceSpec{Address: addr, Port: port, Labels: labels}
}

// writeServices replaces the registry file at path with svcs, atomically
// (a rename, as a ConfigMap update or an editor does), and returns when.
func writeServices(t testing.TB, path string, svcs fileServices) time.Time {
	t.Helper()
	doc := file.Document{}
	for _, h := range slices.Sorted(maps.Keys(svcs)) {
		doc.Services = append(doc.Services, svcs[h])
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return at
}

// scenario is one test's namespace, registry file and hosts.
type scenario struct {
	*ambient
	ns   string
	path string
}

func (a *ambient) scenario(t testing.TB) *scenario {
	t.Helper()
	return &scenario{ambient: a, ns: a.kube.Namespace(t), path: filepath.Join(t.TempDir(), "services.yaml")}
}

// host is a host of the scenario's own: <name>.<namespace>.mesh.
func (s *scenario) host(name string) string { return name + "." + s.ns + ".mesh" }

// serviceEntry reads the ServiceEntry named host (nil when absent).
func (s *scenario) serviceEntry(t testing.TB, host string) *clientnetworking.ServiceEntry {
	t.Helper()
	se, err := s.client.NetworkingV1().ServiceEntries(s.ns).Get(context.Background(), host, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return se
}

// vips returns the addresses istiod's allocator wrote into the
// ServiceEntry's status, sorted.
func vips(se *clientnetworking.ServiceEntry) []string {
	var out []string
	for _, a := range se.Status.GetAddresses() {
		out = append(out, a.GetValue())
	}
	slices.Sort(out)
	return out
}

// allocated waits until istiod allocated VIPs to the ServiceEntry of each
// host, and returns the ServiceEntries.
func (s *scenario) allocated(t testing.TB, hosts ...string) map[string]*clientnetworking.ServiceEntry {
	t.Helper()
	out := map[string]*clientnetworking.ServiceEntry{}
	harness.Eventually(t, ambientWait, "istiod allocates VIPs", func() error {
		for _, h := range hosts {
			se := s.serviceEntry(t, h)
			if se == nil || len(vips(se)) == 0 {
				return fmt.Errorf("%s has no status.addresses yet", h)
			}
			out[h] = se
		}
		return nil
	})
	return out
}

// checkVIPs checks istiod's allocation: one IPv4 address in 240.240.0.0/16
// and one IPv6 address in 2001:2::/48 per host (istiod's defaults,
// PILOT_IP_AUTOALLOCATE_IPV4_PREFIX and _IPV6_PREFIX).
func checkVIPs(t testing.TB, se *clientnetworking.ServiceEntry) {
	t.Helper()
	v4, v6 := netip.MustParsePrefix("240.240.0.0/16"), netip.MustParsePrefix("2001:2::/48")
	var got4, got6 int
	for _, a := range se.Status.GetAddresses() {
		ip, err := netip.ParseAddr(a.GetValue())
		switch {
		case err != nil:
			t.Errorf("%s: status address %q: %v", se.Name, a.GetValue(), err)
		case a.GetHost() != se.Spec.GetHosts()[0]:
			t.Errorf("%s: status address %s for host %q", se.Name, ip, a.GetHost())
		case v4.Contains(ip):
			got4++
		case v6.Contains(ip):
			got6++
		default:
			t.Errorf("%s: status address %s is outside %s and %s", se.Name, ip, v4, v6)
		}
	}
	if got4 != 1 || got6 != 1 {
		t.Errorf("%s: status.addresses %v, want one IPv4 and one IPv6 address", se.Name, vips(se))
	}
}

// kubeEndpoints returns the endpoints of the ServiceEntry named host as
// the apiserver holds them, inline or as the WorkloadEntries its
// workloadSelector selects: "address:port" → the instance's version label.
// It fails unless the ServiceEntry has port 8080.
func (s *scenario) kubeEndpoints(t testing.TB, host string) (map[string]string, error) {
	t.Helper()
	se := s.serviceEntry(t, host)
	if se == nil {
		return nil, fmt.Errorf("no ServiceEntry %s", host)
	}
	if len(se.Spec.GetPorts()) != 1 {
		return nil, fmt.Errorf("%s has ports %v", host, se.Spec.GetPorts())
	}
	port := se.Spec.GetPorts()[0]
	out := map[string]string{}
	add := func(addr string, ports map[string]uint32, labels map[string]string) {
		p, ok := ports[port.GetName()]
		if !ok {
			p = port.GetNumber()
		}
		out[fmt.Sprintf("%s:%d", addr, p)] = labels["version"]
	}
	for _, e := range se.Spec.GetEndpoints() {
		add(e.GetAddress(), e.GetPorts(), e.GetLabels())
	}
	if sel := se.Spec.GetWorkloadSelector().GetLabels(); len(sel) > 0 {
		wes, err := s.client.NetworkingV1().WorkloadEntries(s.ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return nil, err
		}
		for _, we := range wes.Items {
			add(we.Spec.GetAddress(), we.Spec.GetPorts(), we.Spec.GetLabels()) // the instance's labels
		}
	}
	return out, nil
}

// awaitKube waits until the apiserver holds host on port 8080 with exactly
// the endpoints want ("address:port" → version label).
func (s *scenario) awaitKube(t testing.TB, host string, want map[string]string) {
	t.Helper()
	harness.Eventually(t, ambientWait, "the apiserver holds "+host+"'s endpoints", func() error {
		got, err := s.kubeEndpoints(t, host)
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("endpoints %v, want %v", got, want)
		}
		if p := s.serviceEntry(t, host).Spec.GetPorts()[0].GetNumber(); p != 8080 {
			return fmt.Errorf("port %d, want 8080", p)
		}
		return nil
	})
}

// identity is what must not change for a ServiceEntry to keep its VIP and
// its precedence among ServiceEntries of its host.
type identity struct {
	uid     string
	created time.Time
	vips    string
}

func identityOf(se *clientnetworking.ServiceEntry) identity {
	return identity{uid: string(se.UID), created: se.CreationTimestamp.Time, vips: strings.Join(vips(se), ",")}
}

// ztunnel is a Delta ADS client with ztunnel's node identity subscribed to
// the WDS view (every Address and Authorization), as ztunnel subscribes.
type ztunnel struct {
	*ads.Delta
}

// ztunnelNode is the node a ztunnel of istio-system presents
// (ztunnel~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local, which
// istiod parses into a proxy of type ztunnel).
func ztunnelNode(t testing.TB) *core.Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{
		"NAMESPACE": harness.IstiodNamespace, "SERVICE_ACCOUNT": "ztunnel", "NODE_NAME": "node-1",
		"CLUSTER_ID": "Kubernetes", "NAME": "ztunnel-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return &core.Node{Id: "ztunnel~127.0.0.1~ztunnel-test." + harness.IstiodNamespace + "~" + harness.IstiodNamespace +
		".svc.cluster.local", Metadata: md}
}

// startZtunnel connects to istiod's WDS and waits for its first Address
// and Authorization responses.
func (a *ambient) startZtunnel(t testing.TB) *ztunnel {
	t.Helper()
	conn, err := ads.Dial(a.istiod.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	z := &ztunnel{ads.NewDelta(t, conn, ads.Options{Node: ztunnelNode(t)}, nil)}
	for _, typeURL := range []string{addressType, authorizationType} {
		if err := z.Subscribe(typeURL, []string{"*"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	z.Await(t, ambientWait, "istiod answers the WDS subscriptions", func() error {
		for _, typeURL := range []string{addressType, authorizationType} {
			if z.State(typeURL).ACKed == "" && z.State(typeURL).Responses == 0 {
				return fmt.Errorf("no response of %s", typeURL)
			}
		}
		return nil
	})
	return z
}

// wds is ztunnel's view of one namespace: its services by hostname and its
// workloads by UID.
type wds struct {
	services  map[string]*workloadapi.Service
	workloads map[string]*workloadapi.Workload
}

// view decodes the Addresses the client holds in namespace ns.
func (z *ztunnel) view(ns string) (wds, error) {
	v := wds{services: map[string]*workloadapi.Service{}, workloads: map[string]*workloadapi.Workload{}}
	for name, a := range z.Resources(addressType) {
		addr := &workloadapi.Address{}
		if err := a.UnmarshalTo(addr); err != nil {
			return v, fmt.Errorf("decode Address %s: %w", name, err)
		}
		if s := addr.GetService(); s != nil && s.GetNamespace() == ns {
			v.services[s.GetHostname()] = s
		}
		if w := addr.GetWorkload(); w != nil && w.GetNamespace() == ns {
			v.workloads[w.GetUid()] = w
		}
	}
	return v, nil
}

// serviceVIPs are the VIPs of the WDS service of host, sorted.
func (v wds) serviceVIPs(host string) []string {
	var out []string
	for _, a := range v.services[host].GetAddresses() {
		if ip, ok := netip.AddrFromSlice(a.GetAddress()); ok {
			out = append(out, ip.String())
		}
	}
	slices.Sort(out)
	return out
}

// wdsEndpoint is one workload of a service as ztunnel would use it.
type wdsEndpoint struct {
	addr   string // address:target port
	status workloadapi.WorkloadStatus
	tunnel workloadapi.TunnelProtocol
}

func (e wdsEndpoint) String() string { return fmt.Sprintf("%s(%s,%s)", e.addr, e.status, e.tunnel) }

// endpoints lists the workloads of the WDS service of host on servicePort,
// sorted by address.
func (v wds) endpoints(ns, host string, servicePort uint32) []wdsEndpoint {
	var out []wdsEndpoint
	for _, w := range v.workloads {
		for _, p := range w.GetServices()[ns+"/"+host].GetPorts() {
			if p.GetServicePort() != servicePort {
				continue
			}
			for _, a := range w.GetAddresses() {
				ip, _ := netip.AddrFromSlice(a)
				out = append(out, wdsEndpoint{addr: netip.AddrPortFrom(ip, uint16(p.GetTargetPort())).String(),
					status: w.GetStatus(), tunnel: w.GetTunnelProtocol()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// plain are endpoints at addrs (address:port), healthy, plain TCP: what a
// registry instance must look like to ztunnel.
func plain(addrs ...string) []wdsEndpoint {
	out := make([]wdsEndpoint, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, wdsEndpoint{addr: a, status: workloadapi.WorkloadStatus_HEALTHY, tunnel: workloadapi.TunnelProtocol_NONE})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// awaitService waits until ztunnel sees host with vips and, on port, the
// endpoints want, and returns when it saw them.
func (z *ztunnel) awaitService(t testing.TB, ns, host string, vips []string, port uint32, want []wdsEndpoint) time.Time {
	t.Helper()
	z.Await(t, ambientWait, "ztunnel's view of "+host, func() error {
		v, err := z.view(ns)
		if err != nil {
			return err
		}
		if v.services[host] == nil {
			return fmt.Errorf("no WDS service %s/%s", ns, host)
		}
		if got := v.serviceVIPs(host); !slices.Equal(got, vips) {
			return fmt.Errorf("service %s has VIPs %v, want %v", host, got, vips)
		}
		if got := v.endpoints(ns, host, port); !slices.Equal(got, want) {
			return fmt.Errorf("service %s:%d has endpoints %v, want %v", host, port, got, want)
		}
		return nil
	})
	return time.Now()
}

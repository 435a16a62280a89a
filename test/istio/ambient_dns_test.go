package istio

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
)

// TestAmbientHostnameInstanceMakesADNSServiceEntry: under the default
// resolution (AUTO), a service with one instance registered by DNS name
// ("localhost", as Spring Cloud Consul registers the machine's hostname)
// and one by IP (127.0.0.1), each a real gRPC server on a port of its own,
// in both endpoint modes:
//
//   - meshbridge writes a ServiceEntry with resolution DNS and the name as
//     a WorkloadEntry's (or inline endpoint's) address; the apiserver,
//     with Istio's CRDs and their validation rules (enforced: it refuses
//     a ServiceEntry that breaks one), accepts every object at its first
//     write;
//   - istiod takes them: it allocates the ServiceEntry's VIPs, an Envoy
//     sidecar (istiod's default generator) gets a STRICT_DNS cluster whose
//     load assignment holds both instances, the name as the address Envoy
//     resolves, and ztunnel's WDS view holds both, the named one as a
//     workload with that hostname;
//   - a proxyless gRPC client (GENERATOR grpc) reaches neither instance:
//     istiod's grpc generator (pilot/pkg/networking/grpcgen) builds every
//     cluster as EDS, and its EDS answer for a DNS-resolution service has
//     no endpoints (pilot/pkg/xds/endpoints EndpointBuilder.findShards
//     skips the shards of a DNS service; BuildClusterLoadAssignment drops
//     any endpoint whose address is not an IP), so grpc-go's calls fail
//     UNAVAILABLE. This pins that limitation of istiod's proxyless path:
//     while one instance of a host is registered by name, the host is
//     dark to proxyless gRPC through istiod, its IP instances included.
//     Once the named instance leaves, the ServiceEntry is STATIC again and
//     the calls reach the IP instance; when it returns, the host goes dark
//     again.
func TestAmbientHostnameInstanceMakesADNSServiceEntry(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		byName, byIP := uint32(harness.StartEcho(t, "by-name")), uint32(harness.StartEcho(t, "by-ip"))
		named, ip := instance("localhost", byName, nil), instance("127.0.0.1", byIP, nil)
		namedAddr, ipAddr := hostPort("localhost", byName), hostPort("127.0.0.1", byIP)
		s := a.scenario(t)
		host := s.host("named")
		cl := "outbound|8080||" + host
		both := fileServices{host: svc(host, 8080, "grpc", named, ip)}
		writeServices(t, s.path, both)
		start := time.Now()
		b := s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})

		// The apiserver accepted every object at its first write: a refused
		// write is retried, and would count again.
		s.awaitKube(t, host, map[string]string{namedAddr: "", ipAddr: ""})
		s.awaitResolution(t, host, networking.ServiceEntry_DNS)
		b.idle(t)
		objects := 1 // the ServiceEntry, endpoints inline
		if mode == translate.EndpointsWorkloadEntry {
			objects += 2 // a WorkloadEntry per instance
		}
		if n := b.writes.Writes(); n != objects {
			t.Errorf("meshbridge wrote %d times (%v) for %d objects, want one write each", n, b.writes, objects)
		}
		s.checkCRDValidationLive(t, host)
		se := s.allocated(t, host)[host]
		t.Logf("%s: resolution %s, endpoints %v in the apiserver (%s mode), VIPs %v, %s after meshbridge started", host,
			se.Spec.GetResolution(), map[string]string{namedAddr: "", ipAddr: ""}, mode, vips(se),
			time.Since(start).Round(time.Millisecond))

		// An Envoy sidecar's view: STRICT_DNS, both instances.
		envoy := a.envoySidecar(t, s.ns)
		envoy.Await(t, ambientWait, "an Envoy sidecar's cluster "+cl, func() error {
			c, err := heldCluster(envoy, cl)
			if err != nil {
				return err
			}
			if c.GetType() != cluster.Cluster_STRICT_DNS {
				return fmt.Errorf("cluster %s has type %s, want STRICT_DNS", cl, c.GetType())
			}
			if got := lbEndpoints(c.GetLoadAssignment()); !slices.Equal(got, sorted(namedAddr, ipAddr)) {
				return fmt.Errorf("cluster %s has endpoints %v, want %v", cl, got, sorted(namedAddr, ipAddr))
			}
			return nil
		})
		t.Logf("an Envoy sidecar gets %s as a STRICT_DNS cluster with endpoints %v", cl, sorted(namedAddr, ipAddr))

		// ztunnel's view: the service with its VIPs, both workloads.
		wantWDS := sorted(namedAddr, ipAddr)
		z.Await(t, ambientWait, "ztunnel's view of "+host, func() error {
			v, err := z.view(s.ns)
			if err != nil {
				return err
			}
			if got := v.serviceVIPs(host); !slices.Equal(got, vips(se)) {
				return fmt.Errorf("service %s has VIPs %v, want %v", host, got, vips(se))
			}
			if got := v.namedEndpoints(s.ns, host, 8080); !slices.Equal(got, wantWDS) {
				return fmt.Errorf("service %s:8080 has workloads %v, want %v", host, got, wantWDS)
			}
			return nil
		})
		t.Logf("ztunnel's view of %s: workloads %v (the named one by hostname)", host, wantWDS)

		// The proxyless view: an EDS cluster without endpoints; calls fail.
		probe := a.proxylessProbe(t, s.ns, host, 8080)
		conn := dialIstiod(t, a.istiod.GRPCAddr, s.ns, host+":8080")
		darkStep := func(t *testing.T) {
			t.Helper()
			probe.awaitAssignment(t, cluster.Cluster_EDS, nil)
			err := awaitUnavailable(t, conn, 5)
			t.Logf("proxyless gRPC through istiod: cluster %s is EDS, its ClusterLoadAssignment has no endpoints; "+
				"5 calls in a row failed: %v", cl, err)
		}
		t.Run("named and IP instances: dark to proxyless gRPC", darkStep)

		t.Run("named instance gone: STATIC, the IP instance reached", func(t *testing.T) {
			at := writeServices(t, s.path, fileServices{host: svc(host, 8080, "grpc", ip)})
			s.awaitKube(t, host, map[string]string{ipAddr: ""})
			s.awaitResolution(t, host, networking.ServiceEntry_STATIC)
			probe.awaitAssignment(t, cluster.Cluster_EDS, []string{ipAddr})
			awaitCalls(t, conn, 20, "by-ip")
			t.Logf("STATIC again: the proxyless client's assignment is [%s], 20 calls in a row reached by-ip %s after "+
				"the named instance left", ipAddr, time.Since(at).Round(time.Millisecond))
		})

		t.Run("named instance back: DNS, dark again", func(t *testing.T) {
			writeServices(t, s.path, both)
			s.awaitKube(t, host, map[string]string{namedAddr: "", ipAddr: ""})
			s.awaitResolution(t, host, networking.ServiceEntry_DNS)
			darkStep(t)
		})
	})
}

// hostPort is "host:port".
func hostPort(host string, port uint32) string {
	return host + ":" + strconv.FormatUint(uint64(port), 10)
}

// sorted returns s sorted.
func sorted(s ...string) []string {
	return slices.Sorted(slices.Values(s))
}

// awaitResolution waits until the apiserver's ServiceEntry named host has
// resolution r.
func (s *scenario) awaitResolution(t testing.TB, host string, r networking.ServiceEntry_Resolution) {
	t.Helper()
	harness.Eventually(t, ambientWait, host+" resolution "+r.String(), func() error {
		se := s.serviceEntry(t, host)
		if se == nil {
			return fmt.Errorf("no ServiceEntry %s", host)
		}
		if got := se.Spec.GetResolution(); got != r {
			return fmt.Errorf("%s has resolution %s, want %s", host, got, r)
		}
		return nil
	})
}

// checkCRDValidationLive makes sure the apiserver enforces the validation
// rules of Istio's CRDs (x-kubernetes-validations), so that the objects it
// accepted passed them: a server-side dry run of the ServiceEntry of host
// with resolution NONE and an endpoint must be refused ("NONE mode cannot
// set endpoints").
func (s *scenario) checkCRDValidationLive(t testing.TB, host string) {
	t.Helper()
	se := s.serviceEntry(t, host).DeepCopy()
	se.ObjectMeta = metav1.ObjectMeta{Name: "crd-validation-probe", Namespace: s.ns}
	se.Spec.Resolution = networking.ServiceEntry_NONE
	se.Spec.WorkloadSelector = nil
	se.Spec.Endpoints = []*networking.WorkloadEntry{{Address: "localhost"}}
	_, err := s.client.NetworkingV1().ServiceEntries(s.ns).Create(context.Background(), se,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("the apiserver answered a ServiceEntry with resolution NONE and an endpoint with %v, "+
			"want Invalid: Istio's CRD validation is not enforced", err)
	}
	t.Logf("the apiserver enforces Istio's CRD validation: %v", err)
}

// probeNode is the node of an xDS client of istiod that is a workload of
// namespace ns (a sidecar node id, which istiod requires) with metadata md.
func probeNode(t testing.TB, ns, name string, md map[string]any) *core.Node {
	t.Helper()
	md["NAMESPACE"] = ns
	st, err := structpb.NewStruct(md)
	if err != nil {
		t.Fatal(err)
	}
	return &core.Node{Id: "sidecar~127.0.0.1~" + name + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: st}
}

// envoySidecar subscribes to every Cluster istiod serves an Envoy sidecar
// of namespace ns (istiod's default generator), as Envoy does.
func (a *ambient) envoySidecar(t testing.TB, ns string) *ads.SotW {
	t.Helper()
	conn, err := ads.Dial(a.istiod.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := ads.NewSotW(t, conn, ads.Options{Node: probeNode(t, ns, "envoy-probe", map[string]any{})}, nil)
	if err := c.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// heldCluster decodes the Cluster named name that c holds.
func heldCluster(c *ads.SotW, name string) (*cluster.Cluster, error) {
	a := c.Resources(resourcev3.ClusterType)[name]
	if a == nil {
		return nil, fmt.Errorf("no cluster %s", name)
	}
	out := &cluster.Cluster{}
	if err := a.UnmarshalTo(out); err != nil {
		return nil, fmt.Errorf("decode cluster %s: %w", name, err)
	}
	return out, nil
}

// lbEndpoints are the "address:port" of cla's endpoints, sorted.
func lbEndpoints(cla *endpoint.ClusterLoadAssignment) []string {
	var out []string
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, hostPort(sa.GetAddress(), sa.GetPortValue()))
		}
	}
	slices.Sort(out)
	return out
}

// namedEndpoints lists the workloads of the WDS service of host on
// servicePort as "address:target port", a workload with a hostname by its
// hostname, sorted.
func (v wds) namedEndpoints(ns, host string, servicePort uint32) []string {
	var out []string
	for _, w := range v.workloads {
		for _, p := range w.GetServices()[ns+"/"+host].GetPorts() {
			if p.GetServicePort() != servicePort {
				continue
			}
			if w.GetHostname() != "" {
				out = append(out, hostPort(w.GetHostname(), p.GetTargetPort()))
			}
			for _, a := range w.GetAddresses() {
				ip, _ := netip.AddrFromSlice(a)
				out = append(out, hostPort(ip.String(), p.GetTargetPort()))
			}
		}
	}
	slices.Sort(out)
	return out
}

// proxyless is an ADS client with a proxyless gRPC client's node (GENERATOR
// grpc) subscribed to what grpc-go subscribes to for xds:///host:port: the
// Listener, its RouteConfiguration, the Cluster and its
// ClusterLoadAssignment. It records what istiod's grpc generator serves.
type proxyless struct {
	*ads.SotW
	listener, cluster string
}

func (a *ambient) proxylessProbe(t testing.TB, ns, host string, port uint32) *proxyless {
	t.Helper()
	conn, err := ads.Dial(a.istiod.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p := &proxyless{
		SotW: ads.NewSotW(t, conn, ads.Options{FollowLDS: true, FollowCDS: true,
			Node: probeNode(t, ns, "grpc-probe", map[string]any{"GENERATOR": "grpc"})}, nil),
		listener: hostPort(host, port),
		cluster:  "outbound|" + strconv.FormatUint(uint64(port), 10) + "||" + host,
	}
	for typeURL, name := range map[string]string{resourcev3.ListenerType: p.listener, resourcev3.ClusterType: p.cluster} {
		if err := p.Subscribe(typeURL, []string{name}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// awaitAssignment waits until the probe holds the listener, the route to
// the cluster, the cluster of type typ and its ClusterLoadAssignment with
// exactly the endpoints want ("address:port", sorted; nil for none).
func (p *proxyless) awaitAssignment(t testing.TB, typ cluster.Cluster_DiscoveryType, want []string) {
	t.Helper()
	p.Await(t, ambientWait, "istiod's grpc generator serves "+p.cluster, func() error {
		if p.Resources(resourcev3.ListenerType)[p.listener] == nil {
			return fmt.Errorf("no listener %s", p.listener)
		}
		if p.Resources(resourcev3.RouteType)[p.cluster] == nil {
			return fmt.Errorf("no route configuration %s (routes held: %v)", p.cluster,
				slices.Sorted(maps.Keys(p.Resources(resourcev3.RouteType))))
		}
		c, err := heldCluster(p.SotW, p.cluster)
		if err != nil {
			return err
		}
		if c.GetType() != typ {
			return fmt.Errorf("cluster %s has type %s, want %s", p.cluster, c.GetType(), typ)
		}
		a := p.Resources(resourcev3.EndpointType)[p.cluster]
		if a == nil {
			return fmt.Errorf("no ClusterLoadAssignment %s", p.cluster)
		}
		cla := &endpoint.ClusterLoadAssignment{}
		if err := a.UnmarshalTo(cla); err != nil {
			return err
		}
		if got := lbEndpoints(cla); !slices.Equal(got, want) {
			return fmt.Errorf("ClusterLoadAssignment %s has endpoints %v, want %v", p.cluster, got, want)
		}
		return nil
	})
}

// awaitUnavailable calls, without waiting for a ready connection, until
// streak calls in a row fail UNAVAILABLE (a call that reaches a backend
// meanwhile starts the count again: the client applies xDS updates
// asynchronously), and returns the last call's error; it fails at
// ambientWait.
func awaitUnavailable(t *testing.T, conn *grpc.ClientConn, streak int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ambientWait)
	defer cancel()
	run := 0
	var name string
	var err error
	for run < streak {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		name, err = echo.Whoami(callCtx, conn)
		callCancel()
		if ctx.Err() != nil {
			t.Fatalf("no %d calls in a row failed UNAVAILABLE; last: %q, %v", streak, name, err)
		}
		if status.Code(err) == codes.Unavailable {
			run++
		} else {
			run = 0
		}
	}
	return err
}

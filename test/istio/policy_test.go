package istio

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/xds/bootstrap"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// sideBySidePolicy is one set of Istio objects for hosts %[1]s (outlier
// detection and max requests), %[2]s (LEAST_REQUEST), %[3]s (ring hash on
// a header) and %[4]s (a VirtualService with a timeout and retries).
const sideBySidePolicy = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: outliers}
spec:
  host: %[1]s
  trafficPolicy:
    connectionPool: {http: {http2MaxRequests: 10}}
    outlierDetection: {consecutive5xxErrors: 3, interval: 1s, baseEjectionTime: 5s}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: least}
spec:
  host: %[2]s
  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ring}
spec:
  host: %[3]s
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x-user}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: routed}
spec:
  hosts: [%[4]s]
  http:
  - route:
    - destination: {host: %[4]s}
    timeout: 2s
    retries: {attempts: 2, retryOn: unavailable}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: tls}
spec:
  host: %[5]s
  trafficPolicy:
    tls: {mode: SIMPLE, subjectAltNames: [backend.example]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: istio-mtls}
spec:
  host: %[6]s
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
`

// TestProxylessPolicySideBySide: the same DestinationRules and
// VirtualService, read by istiod from Kubernetes and by meshbridge from
// policy.files, served to proxyless gRPC clients: an ADS client per
// server and client family (grpc-go 1.85 and gRPC C-core 1.51, by their
// user agents) subscribes as grpc-go does for xds:///<host>:8080 and
// records what each field became. The table is logged (docs/policy-istiod.md
// keeps it). meshbridge's side is asserted: outlier detection and
// max_requests for every client (istiod sends no outlier detection to
// proxyless clients, istio/api#3001), the locality priorities of a client
// in r1/z1 as istiod computes them (it sends them too, but without the
// outlier detection that would move calls off a failing priority), LEAST_REQUEST and ring hash where
// the client implements them and round robin where it would NACK or
// crash, the route's timeout and retries, and tls (SIMPLE, which istiod
// does not send: its proxyless clients call in plaintext; ISTIO_MUTUAL) as
// an UpstreamTlsContext from the certificate provider the node declares.
func TestProxylessPolicySideBySide(t *testing.T) {
	a := startAmbient(t)
	s := a.scenario(t)
	names := []string{"outliers", "least", "ring", "routed", "tls", "mtls"}
	hosts := make([]string, len(names))
	services := fileServices{}
	for i, n := range names {
		hosts[i] = s.host(n)
		// Two localities: the rule with outlier detection fails over
		// between them.
		one, two := startEcho(t, n+"-1"), startEcho(t, n+"-2")
		one.Locality, two.Locality = "r1/z1", "r1/z2"
		services[hosts[i]] = svc(hosts[i], 8080, "grpc", one, two)
	}
	writeServices(t, s.path, services)
	// The objects exist before the ServiceEntries: istiod has them when it
	// first serves the hosts.
	doc := fmt.Sprintf(sideBySidePolicy, hosts[0], hosts[1], hosts[2], hosts[3], hosts[4], hosts[5])
	applyYAML(t, a, s.ns, doc)
	b := a.startBridge(t, s.ns, s.path, bridgeOptions{})
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := policy.New(policy.Config{Globs: []string{policyFile}, Logger: quiet,
		OnChange: func(r *policy.Rules) { b.xds.SetPolicies(r) }})
	if err != nil {
		t.Fatal(err)
	}
	files.Read()

	agents := []struct{ family, name, version string }{
		{"grpc-go", "gRPC Go", "1.85.0"},
		{"c-core", "gRPC C-core linux Python", "C-core 29.0.0 Python 1.51.1"},
	}
	servers := []struct{ name, addr string }{{"istiod", a.istiod.GRPCAddr}, {"meshbridge", b.xds.Addr().String()}}
	got := map[string]map[string]string{} // "server family" → field → what it became
	for _, srv := range servers {
		for _, ag := range agents {
			// The node declares the certificate provider its bootstrap
			// holds, as meshbridge bootstrap --upstream-* writes it.
			node := probeNode(t, s.ns, "policy-"+ag.family, map[string]any{"GENERATOR": "grpc",
				bootstrap.MetadataCertificateProvider: bootstrap.CertificateProviderInstance})
			node.UserAgentName, node.UserAgentVersionType = ag.name, &core.Node_UserAgentVersion{UserAgentVersion: ag.version}
			// Its own locality: istiod takes a proxy's locality from a
			// workload at its address, and every backend is at 127.0.0.1.
			node.Locality = &core.Locality{Region: "r1", Zone: "z1"}
			node.Id = strings.Replace(node.GetId(), "~127.0.0.1~", "~127.0.0.99~", 1)
			got[srv.name+" "+ag.family] = servedPolicy(t, srv.addr, node, hosts)
		}
	}

	fields := []string{"outlier_detection", "locality priorities", "max_requests", "least_request", "ring_hash", "hash_policy", "timeout", "retries",
		"tls SIMPLE", "tls ISTIO_MUTUAL"}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| field |")
	for _, srv := range servers {
		for _, ag := range agents {
			fmt.Fprintf(&table, " %s → %s |", srv.name, ag.family)
		}
	}
	table.WriteString("\n|---|---|---|---|---|\n")
	for _, f := range fields {
		fmt.Fprintf(&table, "| %s |", f)
		for _, srv := range servers {
			for _, ag := range agents {
				fmt.Fprintf(&table, " %s |", got[srv.name+" "+ag.family][f])
			}
		}
		table.WriteString("\n")
	}
	t.Log(table.String())

	want := map[string]map[string]string{
		"meshbridge grpc-go": {"outlier_detection": "failure percentage, volume 3", "locality priorities": "r1/z1: 0, r1/z2: 1", "max_requests": "10",
			"least_request": "LEAST_REQUEST", "ring_hash": "RING_HASH", "hash_policy": "header x-user",
			"timeout": "2s", "retries": "2 on unavailable",
			"tls SIMPLE": "CA default/ROOTCA, SANs [backend.example]", "tls ISTIO_MUTUAL": "CA default/ROOTCA, certificate default/default"},
		"meshbridge c-core": {"outlier_detection": "failure percentage, volume 3", "locality priorities": "r1/z1: 0, r1/z2: 1", "max_requests": "10",
			"least_request": "ROUND_ROBIN", "ring_hash": "ROUND_ROBIN", "hash_policy": "header x-user",
			"timeout": "2s", "retries": "2 on unavailable",
			"tls SIMPLE": "CA default/ROOTCA, SANs [backend.example]", "tls ISTIO_MUTUAL": "CA default/ROOTCA, certificate default/default"},
	}
	for who, fs := range want {
		for f, w := range fs {
			if g := got[who][f]; g != w {
				t.Errorf("%s %s: %q, want %q", who, f, g, w)
			}
		}
	}
	for _, ag := range agents {
		if g := got["istiod "+ag.family]["outlier_detection"]; g != "-" {
			t.Errorf("istiod now sends %s outlier detection (%s): update the docs' table", ag.family, g)
		}
		if g, m := got["istiod "+ag.family]["locality priorities"], got["meshbridge "+ag.family]["locality priorities"]; g != m {
			t.Errorf("%s locality priorities: istiod %q, meshbridge %q: the same rule gives other priorities", ag.family, g, m)
		}
		if g := got["istiod "+ag.family]["tls SIMPLE"]; g != "-" {
			t.Errorf("istiod now sends %s tls SIMPLE (%s): update the docs' table", ag.family, g)
		}
	}
}

// applyYAML creates the objects of the YAML documents doc in namespace ns.
func applyYAML(t *testing.T, a *ambient, ns, doc string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(a.kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader([]byte(doc))))
	for {
		part, err := r.Read()
		if err != nil {
			break
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(part, &obj.Object); err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1",
			Resource: strings.ToLower(obj.GetKind()) + "s"}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// servedPolicy subscribes on addr, as node, to what grpc-go subscribes to
// for xds:///<host>:8080 of each host (the listener, its route, the
// cluster), waits until each host's cluster and route are held and the
// ring hash shows (in the cluster or the route: the server read the
// objects), and describes each field.
func servedPolicy(t *testing.T, addr string, node *core.Node, hosts []string) map[string]string {
	t.Helper()
	conn, err := ads.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := ads.NewSotW(t, conn, ads.Options{FollowLDS: true, Node: node}, nil)
	var listeners, clusters []string
	for _, h := range hosts {
		listeners = append(listeners, hostPort(h, 8080))
		clusters = append(clusters, "outbound|8080||"+h)
	}
	if err := c.Subscribe(resourcev3.ListenerType, listeners); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(resourcev3.ClusterType, clusters); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(resourcev3.EndpointType, clusters[:1]); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	c.Await(t, ambientWait, "the policy served to "+node.GetUserAgentName()+" from "+addr, func() error {
		routes := map[string]*route.RouteAction{}
		for i, h := range hosts {
			ra, err := heldRoute(c, listeners[i])
			if err != nil {
				return err
			}
			routes[h] = ra
		}
		cs := map[string]*cluster.Cluster{}
		for i, h := range hosts {
			cl, err := heldCluster(c, clusters[i])
			if err != nil {
				return err
			}
			cs[h] = cl
		}
		if len(routes[hosts[2]].GetHashPolicy()) == 0 && cs[hosts[2]].GetLbPolicy() != cluster.Cluster_RING_HASH {
			return fmt.Errorf("the ring hash shows in neither the cluster nor the route yet")
		}
		prio, err := localityPriorities(c, clusters[0])
		if err != nil {
			return err
		}
		out["locality priorities"] = prio
		od := cs[hosts[0]].GetOutlierDetection()
		out["outlier_detection"] = "-"
		switch {
		case od.GetFailurePercentageRequestVolume() != nil:
			out["outlier_detection"] = fmt.Sprintf("failure percentage, volume %d", od.GetFailurePercentageRequestVolume().GetValue())
		case od != nil:
			out["outlier_detection"] = "consecutive errors only (gRPC implements neither)"
		}
		out["max_requests"] = "-"
		for _, th := range cs[hosts[0]].GetCircuitBreakers().GetThresholds() {
			out["max_requests"] = fmt.Sprint(th.GetMaxRequests().GetValue())
		}
		out["least_request"] = cs[hosts[1]].GetLbPolicy().String()
		out["ring_hash"] = cs[hosts[2]].GetLbPolicy().String()
		out["hash_policy"] = "-"
		if hp := routes[hosts[2]].GetHashPolicy(); len(hp) > 0 {
			out["hash_policy"] = "header " + hp[0].GetHeader().GetHeaderName()
		}
		out["timeout"] = "-"
		if d := routes[hosts[3]].GetMaxStreamDuration().GetMaxStreamDuration(); d != nil {
			out["timeout"] = d.AsDuration().String()
		} else if d := routes[hosts[3]].GetTimeout(); d != nil {
			out["timeout"] = "route timeout " + d.AsDuration().String() + " only (gRPC reads max_stream_duration)"
		}
		out["retries"] = "-"
		if rp := routes[hosts[3]].GetRetryPolicy(); rp != nil {
			out["retries"] = fmt.Sprintf("%d on %s", rp.GetNumRetries().GetValue(), rp.GetRetryOn())
		}
		out["tls SIMPLE"] = describeTLS(cs[hosts[4]])
		out["tls ISTIO_MUTUAL"] = describeTLS(cs[hosts[5]])
		return nil
	})
	return out
}

// localityPriorities describes the held ClusterLoadAssignment name (both
// endpoints) as "<locality>: <priority>, ..." by priority and locality.
func localityPriorities(c *ads.SotW, name string) (string, error) {
	a := c.Resources(resourcev3.EndpointType)[name]
	if a == nil {
		return "", fmt.Errorf("no ClusterLoadAssignment %s", name)
	}
	var cla endpoint.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		return "", err
	}
	if n := len(lbEndpoints(&cla)); n != 2 {
		return "", fmt.Errorf("%s has %d endpoints, want 2", name, n)
	}
	var parts []string
	for _, l := range cla.GetEndpoints() {
		loc := strings.TrimRight(l.GetLocality().GetRegion()+"/"+l.GetLocality().GetZone()+"/"+l.GetLocality().GetSubZone(), "/")
		parts = append(parts, fmt.Sprintf("%s: %d", loc, l.GetPriority()))
	}
	slices.SortFunc(parts, func(a, b string) int {
		_, pa, _ := strings.Cut(a, ": ")
		_, pb, _ := strings.Cut(b, ": ")
		return cmp.Or(strings.Compare(pa, pb), strings.Compare(a, b))
	})
	return strings.Join(parts, ", "), nil
}

// describeTLS describes the UpstreamTlsContext of c (gRFC A29): the
// certificate provider instances it names (instance/certificate, from the
// current fields or the deprecated ones gRPC also reads) and the SANs
// asked; "-" for none.
func describeTLS(c *cluster.Cluster) string {
	ts := c.GetTransportSocket()
	if ts == nil {
		if strings.HasPrefix(c.GetEdsClusterConfig().GetServiceName(), gen.RefusedEDSPrefix) {
			return "refused (no endpoint)"
		}
		return "-"
	}
	var utc tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&utc); err != nil {
		return "undecodable: " + err.Error()
	}
	common := utc.GetCommonTlsContext()
	instance := func(p *tlsv3.CertificateProviderPluginInstance) string {
		return p.GetInstanceName() + "/" + p.GetCertificateName()
	}
	var parts []string
	validation := common.GetValidationContext()
	if cv := common.GetCombinedValidationContext(); cv != nil {
		validation = cv.GetDefaultValidationContext()
		if p := cv.GetValidationContextCertificateProviderInstance(); p != nil {
			parts = append(parts, "CA "+p.GetInstanceName()+"/"+p.GetCertificateName()+" (deprecated field)")
		}
	}
	if p := validation.GetCaCertificateProviderInstance(); p != nil {
		parts = append(parts, "CA "+instance(p))
	}
	if p := common.GetTlsCertificateProviderInstance(); p != nil {
		parts = append(parts, "certificate "+instance(p))
	}
	if p := common.GetTlsCertificateCertificateProviderInstance(); p != nil {
		parts = append(parts, "certificate "+p.GetInstanceName()+"/"+p.GetCertificateName()+" (deprecated field)")
	}
	var sans []string
	for _, m := range validation.GetMatchSubjectAltNames() {
		sans = append(sans, cmp.Or(m.GetExact(), m.GetPrefix(), m.GetSuffix(), m.GetContains(), m.GetSafeRegex().GetRegex()))
	}
	if len(sans) > 0 {
		parts = append(parts, fmt.Sprintf("SANs %v", sans))
	}
	if len(parts) == 0 {
		return "an UpstreamTlsContext naming no certificate provider"
	}
	return strings.Join(parts, ", ")
}

// heldRoute returns the action of the first route of the route
// configuration the listener name names.
func heldRoute(c *ads.SotW, name string) (*route.RouteAction, error) {
	la := c.Resources(resourcev3.ListenerType)[name]
	if la == nil {
		return nil, fmt.Errorf("no listener %s", name)
	}
	var l listener.Listener
	if err := la.UnmarshalTo(&l); err != nil {
		return nil, err
	}
	var m hcm.HttpConnectionManager
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(&m); err != nil {
		return nil, err
	}
	rn := m.GetRds().GetRouteConfigName()
	ra := c.Resources(resourcev3.RouteType)[rn]
	if ra == nil {
		return nil, fmt.Errorf("no route configuration %s", rn)
	}
	var rc route.RouteConfiguration
	if err := ra.UnmarshalTo(&rc); err != nil {
		return nil, err
	}
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			return r.GetRoute(), nil
		}
	}
	return nil, fmt.Errorf("route configuration %s has no route", rn)
}

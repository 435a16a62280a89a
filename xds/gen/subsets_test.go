package gen

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// TestLabelsCanonicalForm: canonLabels' string round-trips, compares as
// the set, and hasLabels is a subset test (an empty selector selects
// every endpoint), on random label sets.
func TestLabelsCanonicalForm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	set := func() map[string]string {
		m := map[string]string{}
		for range r.IntN(4) {
			m[[]string{"app", "version", "group", "zone", "a.b/c"}[r.IntN(5)]] = []string{"", "v1", "v2", "x"}[r.IntN(4)]
		}
		return m
	}
	subsetOf := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if w, ok := labels[k]; !ok || w != v {
				return false
			}
		}
		return true
	}
	for range 5000 {
		a, b := set(), set()
		ca := canonLabels(a)
		if !sameLabels(ca, a) {
			t.Fatalf("sameLabels(canonLabels(%v)) is false", a)
		}
		if got, want := sameLabels(ca, b), maps.Equal(a, b); got != want {
			t.Fatalf("sameLabels(%q, %v) = %v, want %v", ca, b, got, want)
		}
		if got, want := ca == canonLabels(b), maps.Equal(a, b); got != want {
			t.Fatalf("canonLabels(%v) == canonLabels(%v): %v, want %v", a, b, got, want)
		}
		if got, want := hasLabels(ca, b), subsetOf(b, a); got != want {
			t.Fatalf("hasLabels(%v, selector %v) = %v, want %v", a, b, got, want)
		}
	}
}

// TestSubsetClusters: a DestinationRule's subsets give each port a cluster
// per subset, named as istiod names them, with the port's policy and the
// subset's over it (per setting, port-level first), as Istio merges them;
// a client lacking a subset's balancer gets its substitute.
func TestSubsetClusters(t *testing.T) {
	lr := &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_LEAST_REQUEST}}
	rr := &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_ROUND_ROBIN}}
	svc := &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: []model.Port{
		{Name: "grpc", Number: 80, Protocol: model.ProtocolGRPC}, {Name: "admin", Number: 90, Protocol: model.ProtocolGRPC}},
		Policy: &networking.DestinationRule{Host: "a.local",
			TrafficPolicy: &networking.TrafficPolicy{
				ConnectionPool: &networking.ConnectionPoolSettings{Http: &networking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 10}}},
			Subsets: []*networking.Subset{
				{Name: "v1", Labels: map[string]string{"version": "v1"}},
				{Name: "v2", Labels: map[string]string{"version": "v2"}, TrafficPolicy: &networking.TrafficPolicy{
					LoadBalancer: lr,
					PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
						Port: &networking.PortSelector{Number: 90}, LoadBalancer: rr}},
				}},
			}}}
	want := []string{"outbound|80||a.local", "outbound|80|v1|a.local", "outbound|80|v2|a.local",
		"outbound|90||a.local", "outbound|90|v1|a.local", "outbound|90|v2|a.local"}
	if got := ClusterNames(svc); !slices.Equal(got, want) {
		t.Fatalf("ClusterNames = %q, want %q", got, want)
	}
	clusters, _, _ := Resources(svc)
	var names []string
	for _, c := range clusters {
		names = append(names, c.(types.ResourceWithName).GetName())
	}
	if !slices.Equal(names, want) {
		t.Fatalf("Resources' clusters %q, want %q", names, want)
	}
	built := buildClusters([]*model.Service{svc})
	for name, wantLB := range map[string]cluster.Cluster_LbPolicy{
		"outbound|80|v1|a.local": cluster.Cluster_ROUND_ROBIN,
		"outbound|80|v2|a.local": cluster.Cluster_LEAST_REQUEST,
		"outbound|90|v2|a.local": cluster.Cluster_ROUND_ROBIN, // the subset's port-level setting
	} {
		c := built[name]
		if c.GetLbPolicy() != wantLB || c.GetEdsClusterConfig().GetServiceName() != name {
			t.Errorf("%s: lb %v, EDS service %q; want %v and its own name", name, c.GetLbPolicy(), c.GetEdsClusterConfig().GetServiceName(), wantLB)
		}
		// The DestinationRule's connection pool, which no subset replaces.
		if got := c.GetCircuitBreakers().GetThresholds()[0].GetMaxRequests(); !proto.Equal(got, wrapperspb.UInt32(10)) {
			t.Errorf("%s: max requests %v, want the rule's 10", name, got)
		}
	}
	// A client lacking least request gets v2 on port 80 as round robin.
	c, substituted := clusterFor(svc, svc.Ports[0], svc.Policy.GetSubsets()[1], LeastRequest)
	if c.GetLbPolicy() != cluster.Cluster_ROUND_ROBIN || !slices.Equal(substituted, []string{"loadBalancer.simple:LEAST_REQUEST"}) {
		t.Errorf("for a client lacking least request: %v, substituted %q", c.GetLbPolicy(), substituted)
	}
}

// TestSubsetLoadAssignments: a subset's ClusterLoadAssignment holds the
// port's endpoints whose labels hold the subset's (other labels are
// fine); a subset no endpoint matches has an empty one.
func TestSubsetLoadAssignments(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: []model.Port{{Name: portName(80), Number: 80, Protocol: model.ProtocolGRPC}},
		Policy: &networking.DestinationRule{Host: "a.local", Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "v2-gray", Labels: map[string]string{"version": "v2", "group": "gray"}},
			{Name: "v3", Labels: map[string]string{"version": "v3"}},
		}}}
	labelled := func(addr string, labels map[string]string) *model.Endpoint {
		e := ep(addr, 80, "r1")
		e.Labels = labels
		return e
	}
	got := encodeEveryPort(svc, encodeEach([]*model.Endpoint{
		labelled("10.0.0.1", map[string]string{"version": "v1", "app": "a"}),
		labelled("10.0.0.2", map[string]string{"version": "v2", "group": "gray"}),
		labelled("10.0.0.3", map[string]string{"version": "v2"}),
		labelled("10.0.0.4", nil),
	}))
	one := func(addrs ...string) []*endpoint.LbEndpoint {
		var out []*endpoint.LbEndpoint
		for _, a := range addrs {
			out = append(out, lbEndpoint(a, 80, 1))
		}
		return out
	}
	for name, addrs := range map[string][]string{
		"outbound|80||a.local":        {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"},
		"outbound|80|v1|a.local":      {"10.0.0.1"},
		"outbound|80|v2-gray|a.local": {"10.0.0.2"},
		"outbound|80|v3|a.local":      nil,
	} {
		want := &endpoint.ClusterLoadAssignment{ClusterName: name}
		if len(addrs) > 0 {
			want.Endpoints = []*endpoint.LocalityLbEndpoints{locality("r1", "", "", uint32(len(addrs)), one(addrs...)...)}
		}
		if got[name] == nil {
			t.Fatalf("no assignment %s", name)
		}
		assertEncodes(t, want, got[name])
	}
	if len(got) != 4 {
		t.Errorf("%d assignments, want 4", len(got))
	}
}

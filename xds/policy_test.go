package xds

import (
	"slices"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// hostPolicies is a Policies of one rule per host.
type hostPolicies map[string]*networking.DestinationRule

func (p hostPolicies) For(host string) *networking.DestinationRule { return p[host] }

func (p hostPolicies) RoutingFor(string) *networking.VirtualService { return nil }

// ejectAfter is a rule for host with outlier detection after n errors.
func ejectAfter(host string, n uint32) *networking.DestinationRule {
	return &networking.DestinationRule{Host: host, TrafficPolicy: &networking.TrafficPolicy{
		OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(n)}}}
}

// TestPolicyChangePushesOnlyItsClusters: SetPolicies pushes the clusters
// of the hosts whose rule changed, and only those (a Delta client gets
// nothing else); a rule left as it was (the same object) pushes nothing.
func TestPolicyChangePushesOnlyItsClusters(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	c := openDelta(t, rawClient(t, ts.Addr().String()))
	c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.ClusterType,
		ResourceNamesSubscribe: []string{"*"}})
	first := c.next(t)
	assertEqual(t, 2, len(first.GetResources()))
	c.ack(first)

	ruleA := ejectAfter("a.local", 3)
	ts.SetPolicies(hostPolicies{"a.local": ruleA})
	ts.waitPushes(t, 1)
	resp := c.next(t)
	if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != clusterA {
		t.Fatalf("after a rule for a.local: %v, want only %s", resp.GetResources(), clusterA)
	}
	var got cluster.Cluster
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	if got.GetOutlierDetection().GetFailurePercentageRequestVolume().GetValue() != 3 {
		t.Errorf("cluster %s: outlier detection %v", clusterA, got.GetOutlierDetection())
	}
	c.ack(resp)

	// The same rule object again, and a rule for b.local: only b's cluster.
	ts.SetPolicies(hostPolicies{"a.local": ruleA, "b.local": ejectAfter("b.local", 5)})
	ts.waitPushes(t, 1)
	resp = c.next(t)
	if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != clusterB {
		t.Fatalf("after a rule for b.local: %v, want only %s", resp.GetResources(), clusterB)
	}
	c.ack(resp)

	// No rules: both clusters lose their policy.
	ts.SetPolicies(nil)
	ts.waitPushes(t, 1)
	resp = c.next(t)
	assertEqual(t, 2, len(resp.GetResources()))
}

// routingPolicies gives hosts VirtualServices only.
type routingPolicies map[string]*networking.VirtualService

func (p routingPolicies) For(string) *networking.DestinationRule { return nil }

func (p routingPolicies) RoutingFor(host string) *networking.VirtualService { return p[host] }

// TestRoutingChangePushesOnlyItsRoutes: a VirtualService change pushes the
// route of the host it names, and only that one (a Delta client of both
// routes gets nothing else); a fault in it puts the fault filter in that
// host's listener only.
func TestRoutingChangePushesOnlyItsRoutes(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	names := []string{gen.ListenerName(80, "a.local"), gen.ListenerName(80, "b.local")}
	open := func(typeURL string) *deltaClient {
		c := openDelta(t, rawClient(t, ts.Addr().String()))
		c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: typeURL, ResourceNamesSubscribe: names})
		first := c.next(t)
		assertEqual(t, 2, len(first.GetResources()))
		c.ack(first)
		return c
	}
	rds, lds := open(resourcev3.RouteType), open(resourcev3.ListenerType)

	ts.SetPolicies(routingPolicies{"a.local": {Hosts: []string{"a.local"}, Http: []*networking.HTTPRoute{{
		Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "a.local"}}},
		Timeout: durationpb.New(time.Second),
		Fault: &networking.HTTPFaultInjection{Abort: &networking.HTTPFaultInjection_Abort{
			ErrorType: &networking.HTTPFaultInjection_Abort_GrpcStatus{GrpcStatus: "UNAVAILABLE"}}},
	}}}})
	ts.waitPushes(t, 1)
	for _, c := range []*deltaClient{rds, lds} {
		resp := c.next(t)
		if len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != names[0] {
			t.Fatalf("%s after a VirtualService for a.local: %v, want only %s", resp.GetTypeUrl(), resp.GetResources(), names[0])
		}
		c.ack(resp)
	}
	// Nothing else follows: a barrier on an unchanged name answers next.
	rds.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNamesUnsubscribe: names[1:]})
	rds.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNamesSubscribe: names[1:]})
	if resp := rds.next(t); len(resp.GetResources()) != 1 || resp.GetResources()[0].GetName() != names[1] {
		t.Fatalf("after the barrier: %v", resp.GetResources())
	}
}

// TestSubsetsComeAndGo: a DestinationRule with subsets adds a cluster and
// a ClusterLoadAssignment per subset, the latter holding the endpoints
// whose labels match; a label change then pushes the subsets'
// assignments; removing the subsets removes both (Delta: the names
// removed).
func TestSubsetsComeAndGo(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	ts := startReadyServer(t, src)
	labelled := func(addr, version string) *model.Endpoint {
		e := ep(addr, 80, "")
		e.Labels = map[string]string{"version": version}
		return e
	}
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{labelled("10.0.0.1", "v1"), labelled("10.0.0.2", "v2")}, time.Time{})
	ts.waitPushes(t, 1)
	c := openDelta(t, rawClient(t, ts.Addr().String()))
	c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"*"}})
	c.ack(c.next(t))
	v1, v2 := gen.SubsetClusterName(80, "v1", "a.local"), gen.SubsetClusterName(80, "v2", "a.local")
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, v1, v2}})
	first := c.next(t)
	assertEqual(t, 1, len(first.GetResources())) // the subsets' do not exist yet
	c.ack(first)

	addresses := func(res *discovery.Resource) []string {
		var cla endpoint.ClusterLoadAssignment
		if err := res.GetResource().UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range cla.GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
		return out
	}
	// Reads responses until it has seen every name of want (a cluster's
	// response and its assignments' may come apart).
	collect := func(typeURL string, want ...string) map[string]*discovery.Resource {
		got := map[string]*discovery.Resource{}
		for len(got) < len(want) {
			resp := c.next(t)
			c.ack(resp)
			if resp.GetTypeUrl() != typeURL {
				continue
			}
			for _, r := range resp.GetResources() {
				got[r.GetName()] = r
			}
			for _, name := range resp.GetRemovedResources() {
				got[name] = nil
			}
		}
		return got
	}

	rule := &networking.DestinationRule{Host: "a.local", Subsets: []*networking.Subset{
		{Name: "v1", Labels: map[string]string{"version": "v1"}}, {Name: "v2", Labels: map[string]string{"version": "v2"}}}}
	ts.SetPolicies(hostPolicies{"a.local": rule})
	ts.waitPushes(t, 1)
	got := collect(resourcev3.EndpointType, v1, v2)
	assertEqual(t, []string{"10.0.0.1"}, addresses(got[v1]))
	assertEqual(t, []string{"10.0.0.2"}, addresses(got[v2]))

	// 10.0.0.2 becomes v1: both subsets' assignments change, the port's
	// does not.
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{labelled("10.0.0.1", "v1"), labelled("10.0.0.2", "v1")}, time.Time{})
	ts.waitPushes(t, 1)
	got = collect(resourcev3.EndpointType, v1, v2)
	if _, ok := got[clusterA]; ok {
		t.Errorf("the port's assignment was pushed for a label change")
	}
	assertEqual(t, []string{"10.0.0.1", "10.0.0.2"}, addresses(got[v1]))
	assertEqual(t, []string(nil), addresses(got[v2]))

	// The subsets go: their assignments are removed.
	ts.SetPolicies(nil)
	ts.waitPushes(t, 1)
	got = collect(resourcev3.EndpointType, v1, v2)
	if got[v1] != nil || got[v2] != nil {
		t.Errorf("subset assignments after the rule went: %v", got)
	}
}

// TestRefusedTLSAssignments: a cluster asking for TLS has, besides its
// assignment, an empty one under its refused name (gen.RefusedEDSPrefix),
// which a client that cannot apply the TLS is pointed at, so its calls
// fail at once; the empty one goes when the rule stops asking for TLS.
func TestRefusedTLSAssignments(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	ts := startReadyServer(t, src)
	refused := gen.RefusedEDSPrefix + clusterA
	ts.SetPolicies(hostPolicies{"a.local": {Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
		Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE}}}})
	ts.waitPushes(t, 1)
	c := openDelta(t, rawClient(t, ts.Addr().String()))
	c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{refused}})
	resp := c.next(t)
	var cla endpoint.ClusterLoadAssignment
	if len(resp.GetResources()) != 1 {
		t.Fatalf("%d resources for %s, want one", len(resp.GetResources()), refused)
	}
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	if cla.GetClusterName() != refused || len(cla.GetEndpoints()) != 0 {
		t.Errorf("the refused assignment is %v, want %s without endpoints", &cla, refused)
	}
	c.ack(resp)

	ts.SetPolicies(nil)
	ts.waitPushes(t, 1)
	resp = c.next(t)
	if !slices.Equal(resp.GetRemovedResources(), []string{refused}) {
		t.Errorf("after the rule went: removed %v, want [%s]", resp.GetRemovedResources(), refused)
	}
}

package xds

import (
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

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

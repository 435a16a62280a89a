package xds

import (
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// placedNode is a proxyless gRPC node at locality ("region/zone") with
// labels in its metadata LABELS, as `meshbridge bootstrap` writes them.
func placedNode(id, region, zone string, labels map[string]any) *core.Node {
	n := grpcNode()
	n.Id = id
	n.Locality = &core.Locality{Region: region, Zone: zone}
	l, err := structpb.NewStruct(labels)
	if err != nil {
		panic(err)
	}
	n.Metadata.Fields["LABELS"] = structpb.NewStructValue(l)
	return n
}

// priorityZero returns the addresses of resp's assignment at priority 0,
// sorted.
func priorityZero(t *testing.T, resp *discovery.DeltaDiscoveryResponse) []string {
	t.Helper()
	if len(resp.GetResources()) != 1 {
		t.Fatalf("%d resources, want one ClusterLoadAssignment", len(resp.GetResources()))
	}
	var cla endpoint.ClusterLoadAssignment
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range cla.GetEndpoints() {
		if l.GetPriority() == 0 {
			for _, e := range l.GetLbEndpoints() {
				out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestLocalityFailoverPerClient: with a DestinationRule failing over by
// a label (failoverPriority, with outlier detection), each client is sent
// the assignment of its own labels; an endpoint whose label changes (and
// nothing else) is pushed to every client, since the labels decide the
// priorities; a rule failing over by locality sends each client its
// zone's endpoints first; a rule without locality load balancing sends
// every client one assignment.
func TestLocalityFailoverPerClient(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	ts := startReadyServer(t, src)
	ts.SetPolicies(hostPolicies{"a.local": {Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
		OutlierDetection: &networking.OutlierDetection{},
		LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
			FailoverPriority: []string{"tier"}}}}}})
	ts.waitPushes(t, 1)
	tiered := func(addr, zone, tier string) *model.Endpoint {
		e := ep(addr, 80, "r1/"+zone)
		e.Labels = map[string]string{"tier": tier}
		return e
	}
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{tiered("10.0.0.1", "z1", "gold"), tiered("10.0.0.2", "z2", "silver")}, time.Time{})
	ts.waitPushes(t, 1)

	gold := openDelta(t, rawClient(t, ts.Addr().String()))
	silver := openDelta(t, rawClient(t, ts.Addr().String()))
	for _, c := range []struct {
		c    *deltaClient
		node *core.Node
		want []string
	}{
		{gold, placedNode("gold", "r1", "z2", map[string]any{"tier": "gold"}), []string{"10.0.0.1"}},
		{silver, placedNode("silver", "r1", "z1", map[string]any{"tier": "silver"}), []string{"10.0.0.2"}},
	} {
		c.c.send(&discovery.DeltaDiscoveryRequest{Node: c.node, TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA}})
		resp := c.c.next(t)
		assertEqual(t, c.want, priorityZero(t, resp))
		c.c.ack(resp)
	}

	// 10.0.0.2 turns gold, a label change only: the gold client gets both
	// at priority 0, and so does the silver one, which has no match left.
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{tiered("10.0.0.1", "z1", "gold"), tiered("10.0.0.2", "z2", "gold")}, time.Time{})
	ts.waitPushes(t, 1)
	for _, c := range []*deltaClient{gold, silver} {
		resp := c.next(t)
		assertEqual(t, []string{"10.0.0.1", "10.0.0.2"}, priorityZero(t, resp))
		c.ack(resp)
	}

	// Failover by locality alone: each client's zone first.
	ts.SetPolicies(hostPolicies{"a.local": {Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
		OutlierDetection: &networking.OutlierDetection{}}}})
	ts.waitPushes(t, 1)
	for _, c := range []struct {
		c    *deltaClient
		want []string
	}{{gold, []string{"10.0.0.2"}}, {silver, []string{"10.0.0.1"}}} {
		resp := c.c.next(t)
		assertEqual(t, c.want, priorityZero(t, resp))
		c.c.ack(resp)
	}

	// No locality load balancing: one plain assignment for both.
	ts.SetPolicies(nil)
	ts.waitPushes(t, 1)
	var got [][]byte
	for _, c := range []*deltaClient{gold, silver} {
		resp := c.next(t)
		var cla endpoint.ClusterLoadAssignment
		if err := resp.GetResources()[0].GetResource().UnmarshalTo(&cla); err != nil {
			t.Fatal(err)
		}
		for _, l := range cla.GetEndpoints() {
			if l.GetPriority() != 0 {
				t.Errorf("without a rule, locality %v has priority %d", l.GetLocality(), l.GetPriority())
			}
		}
		got = append(got, resp.GetResources()[0].GetResource().GetValue())
	}
	if !slices.Equal(got[0], got[1]) {
		t.Errorf("without a rule, the clients were sent different assignments")
	}
}

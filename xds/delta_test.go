package xds

import (
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// Delta (incremental) ADS next to SotW on the same port (rules 9 and 11).

// fullPushNow requests a full push and waits for it.
func (ts *testServer) fullPushNow(t *testing.T) {
	t.Helper()
	ts.ConfigUpdate(&model.PushRequest{Full: true, Reason: model.NewReason(model.ServiceUpdate)})
	ts.waitPushes(t, 1)
}

// setEndpoints replaces the endpoints of host (one port, 80) and waits for
// the push.
func (ts *testServer) setEndpoints(t *testing.T, host string, addrs ...string) {
	t.Helper()
	var eps []*model.Endpoint
	for _, a := range addrs {
		eps = append(eps, ep(a, 80, ""))
	}
	ts.EDSUpdate("test", host, "mesh", eps, time.Time{})
	ts.waitPushes(t, 1)
}

// barrier returns once the server handled every request sent before: it
// handles a stream's requests in order, and a Delta unsubscription has no
// answer of its own, a CDS subscription does.
func (c *deltaClient) barrier() {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{clusterA}})
	if resp := c.next(c.t); resp.GetTypeUrl() != resourcev3.ClusterType {
		c.t.Fatalf("barrier got a %s response, want CDS", resp.GetTypeUrl())
	}
}

var (
	clusterA = gen.ClusterName(80, "a.local")
	clusterB = gen.ClusterName(80, "b.local")
	clusterC = gen.ClusterName(80, "c.local")
)

func TestDeltaEDSSubscribeReceiveUnsubscribeRemove(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	c := openDelta(t, rawClient(t, ts.Addr().String()))

	c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, clusterB}})
	first := c.next(t)
	assertEqual(t, sorted(clusterA, clusterB), deltaNames(first))
	c.ack(first)

	ts.setEndpoints(t, "a.local", "10.0.0.1")
	changed := c.next(t)
	assertEqual(t, sorted(clusterA), deltaNames(changed))
	if v := deltaVersions(changed)[clusterA]; v == "" || v == deltaVersions(first)[clusterA] {
		t.Errorf("changed assignment has version %q, want a new one (first was %q)", v, deltaVersions(first)[clusterA])
	}
	c.ack(changed)

	// Unsubscribing b asks for nothing new, so the next response is a's
	// change alone although b changed too.
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesUnsubscribe: []string{clusterB}})
	c.barrier()
	ts.setEndpoints(t, "b.local", "10.0.1.1")
	ts.setEndpoints(t, "a.local", "10.0.0.2")
	after := c.next(t)
	assertEqual(t, sorted(clusterA), deltaNames(after))
	c.ack(after)

	src.set(grpcService("b.local", 80))
	ts.fullPushNow(t)
	removed := c.next(t)
	assertEqual(t, sorted(clusterA), removed.GetRemovedResources())
	assertEqual(t, []string(nil), deltaNames(removed))
}

func TestDeltaWildcardClustersAndExplicitWildcardListeners(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())

	cds := openDelta(t, conn)
	cds.send(&discovery.DeltaDiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
	first := cds.next(t)
	assertEqual(t, sorted(clusterA, clusterB), deltaNames(first))
	cds.ack(first)

	// grpc-go never sends an empty Delta LDS request meaning "all"; a client
	// that wants every listener says "*".
	lds := openDelta(t, conn)
	lds.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.ListenerType, ResourceNamesSubscribe: []string{"*"}})
	listeners := lds.next(t)
	assertEqual(t, sorted("a.local:80", "b.local:80"), deltaNames(listeners))
	lds.ack(listeners)

	src.set(grpcService("a.local", 80), grpcService("b.local", 80), grpcService("c.local", 80))
	ts.fullPushNow(t)
	assertEqual(t, sorted(clusterC), deltaNames(cds.next(t)))
	added := lds.next(t)
	assertEqual(t, sorted("c.local:80"), deltaNames(added))
	lds.ack(added)

	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts.fullPushNow(t)
	assertEqual(t, sorted("c.local:80"), lds.next(t).GetRemovedResources())
}

func TestDeltaNACKedResourceIsNotResentUntilItChanges(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	c := openDelta(t, rawClient(t, ts.Addr().String()))

	c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, clusterB}})
	c.ack(c.next(t))
	ts.setEndpoints(t, "a.local", "10.0.0.1")
	bad := c.next(t)
	c.send(&discovery.DeltaDiscoveryRequest{
		TypeUrl: resourcev3.EndpointType, ResponseNonce: bad.GetNonce(),
		ErrorDetail: &status.Status{Code: 3, Message: "rejected by test"},
	})

	// b's change is the next thing sent: a's NACKed version was not re-sent.
	ts.setEndpoints(t, "b.local", "10.0.1.1")
	next := c.next(t)
	assertEqual(t, sorted(clusterB), deltaNames(next))
	c.ack(next)

	// Once a changes, its new version is sent.
	ts.setEndpoints(t, "a.local", "10.0.0.2")
	fixed := c.next(t)
	assertEqual(t, sorted(clusterA), deltaNames(fixed))
	if deltaVersions(fixed)[clusterA] == deltaVersions(bad)[clusterA] {
		t.Errorf("fixed assignment has the NACKed version %q", deltaVersions(bad)[clusterA])
	}
}

func TestDeltaCoalescesPushesWhileUnACKed(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	c := openDelta(t, rawClient(t, ts.Addr().String()))

	c.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, clusterB}})
	c.ack(c.next(t))
	ts.setEndpoints(t, "a.local", "10.0.0.1")
	pending := c.next(t) // not ACKed yet

	ts.setEndpoints(t, "a.local", "10.0.0.2")
	ts.setEndpoints(t, "b.local", "10.0.1.1")
	ts.setEndpoints(t, "a.local", "10.0.0.3")
	c.ack(pending)

	// Three pushes while un-ACKed: one response, with the latest of each.
	merged := c.next(t)
	assertEqual(t, sorted(clusterA, clusterB), deltaNames(merged))
	for _, r := range merged.GetResources() {
		if r.GetName() != clusterA {
			continue
		}
		got := claAddresses(t, r.GetResource())
		assertEqual(t, []string{"10.0.0.3"}, got)
	}
}

func TestDeltaReconnectGetsCurrentState(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())
	subscribe := &discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, clusterB}}

	c := openDelta(t, conn)
	c.send(subscribe)
	known := deltaVersions(c.next(t))
	c.cancel()
	ts.setEndpoints(t, "a.local", "10.0.0.1")

	t.Run("without initial versions the client gets everything", func(t *testing.T) {
		again := openDelta(t, conn)
		again.send(subscribe)
		assertEqual(t, sorted(clusterA, clusterB), deltaNames(again.next(t)))
	})
	t.Run("with initial versions the client gets what changed", func(t *testing.T) {
		again := openDelta(t, conn)
		again.send(&discovery.DeltaDiscoveryRequest{
			Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA, clusterB},
			InitialResourceVersions: known,
		})
		assertEqual(t, sorted(clusterA), deltaNames(again.next(t)))
	})
}

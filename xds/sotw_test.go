package xds

import (
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// SotW behaviour (rules 4, 7 and 11): subscriptions, removal, NACK,
// reconnect.

// barrier returns once the server handled every request sent before: it
// handles a stream's requests in order and answers a first CDS request at once.
func (c *sotwClient) barrier() {
	c.t.Helper()
	c.send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResourceNames: []string{clusterA}})
	if resp := c.next(c.t); resp.GetTypeUrl() != resourcev3.ClusterType {
		c.t.Fatalf("barrier got a %s response, want CDS", resp.GetTypeUrl())
	}
}

func TestSotWWildcardClustersDropRemovedOnes(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	c := openSotW(t, rawClient(t, ts.Addr().String()))

	c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
	first := c.next(t)
	assertEqual(t, sorted(clusterA, clusterB), resourceNames(t, first))
	c.ack(first)

	src.set(grpcService("a.local", 80))
	ts.fullPushNow(t)
	assertEqual(t, sorted(clusterA), resourceNames(t, c.next(t)))
}

func TestSotWListeners(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())
	tests := map[string]struct {
		names []string
		want  []string
	}{
		"an explicit wildcard gets every listener":                           {names: []string{"*"}, want: sorted("a.local:80", "b.local:80")},
		"a name gets its listener":                                           {names: []string{"b.local:80"}, want: sorted("b.local:80")},
		"no name is no subscription for grpc-go (empty, no legacy wildcard)": {want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := openSotW(t, conn)
			c.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.ListenerType, ResourceNames: tc.names})
			assertEqual(t, tc.want, resourceNames(t, c.next(t)))
		})
	}
}

func TestSotWEDSUnsubscribe(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	c := openSotW(t, rawClient(t, ts.Addr().String()))

	c.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{clusterA, clusterB}})
	first := c.next(t)
	assertEqual(t, sorted(clusterA, clusterB), resourceNames(t, first))
	c.ack(first, clusterA) // drops b
	c.barrier()

	ts.setEndpoints(t, "b.local", "10.0.1.1")
	ts.setEndpoints(t, "a.local", "10.0.0.1")
	assertEqual(t, sorted(clusterA), resourceNames(t, c.next(t)))
}

func TestSotWNACKedVersionIsNotResentUntilItChanges(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())

	t.Run("a NACK of the first CDS response is not answered with the same clusters", func(t *testing.T) {
		c := openSotW(t, conn)
		c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
		first := c.next(t)
		// Nothing accepted yet: the NACK's version_info is empty.
		c.send(&discovery.DiscoveryRequest{
			TypeUrl: resourcev3.ClusterType, ResponseNonce: first.GetNonce(),
			ErrorDetail: &status.Status{Code: 3, Message: "rejected by test"},
		})
		src.set(grpcService("a.local", 80), grpcService("b.local", 80), grpcService("c.local", 80))
		ts.fullPushNow(t)
		assertEqual(t, sorted(clusterA, clusterB, clusterC), resourceNames(t, c.next(t)))
	})
	t.Run("a NACKed assignment is sent again only once changed", func(t *testing.T) {
		c := openSotW(t, conn)
		names := []string{clusterA, clusterB}
		c.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: names})
		accepted := c.next(t)
		c.ack(accepted, names...)
		ts.setEndpoints(t, "a.local", "10.0.0.1")
		bad := c.next(t)
		c.send(&discovery.DiscoveryRequest{
			TypeUrl: resourcev3.EndpointType, ResourceNames: names,
			VersionInfo: accepted.GetVersionInfo(), ResponseNonce: bad.GetNonce(),
			ErrorDetail: &status.Status{Code: 3, Message: "rejected by test"},
		})

		ts.setEndpoints(t, "b.local", "10.0.1.1")
		next := c.next(t)
		assertEqual(t, sorted(clusterB), resourceNames(t, next))
		c.ack(next, names...)

		ts.setEndpoints(t, "a.local", "10.0.0.2")
		fixed := c.next(t)
		assertEqual(t, sorted(clusterA), resourceNames(t, fixed))
		assertEqual(t, []string{"10.0.0.2"}, claAddresses(t, fixed.GetResources()[0]))
	})
}

func TestSotWReconnectGetsFullState(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())
	names := []string{clusterA, clusterB}

	c := openSotW(t, conn)
	c.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: names})
	old := c.next(t)
	c.cancel()
	ts.setEndpoints(t, "a.local", "10.0.0.1")

	// A reconnecting client announces the version it holds; SotW cannot tell
	// which resources that covers, so it gets all it names.
	again := openSotW(t, conn)
	again.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: names, VersionInfo: old.GetVersionInfo()})
	assertEqual(t, sorted(clusterA, clusterB), resourceNames(t, again.next(t)))
}

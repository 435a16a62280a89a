package xds

import (
	"fmt"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// TestSotWADSSendsClustersBeforeTheirEndpoints: a full push that adds a
// service answers an ADS stream in the order the caches were updated,
// Clusters before their ClusterLoadAssignments, as istiod orders a push
// (go-control-plane's ordered ADS). A client is never sent the endpoints of
// a cluster it has not been sent yet. An unordered server passes this too
// most of the time (a push updates the Clusters well before the
// ClusterLoadAssignments), so it checks the contract, not the option.
func TestSotWADSSendsClustersBeforeTheirEndpoints(t *testing.T) {
	src := &staticSource{}
	services := []*model.Service{grpcService("a.local", 80)}
	src.set(services...)
	ts := startReadyServer(t, src)
	c := openSotW(t, rawClient(t, ts.Addr().String()))

	var names []string
	for i := range 8 {
		names = append(names, gen.ClusterName(80, fmt.Sprintf("s%d.local", i)))
	}
	c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
	c.ack(c.next(t))
	// Subscribed before the clusters exist, as a proxyless client that
	// knows its target's name is: answered at once, with none of them.
	c.send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: names})
	first := c.next(t)
	assertEqual(t, []string(nil), resourceNames(t, first))
	c.ack(first, names...)

	for i := range 8 {
		host := fmt.Sprintf("s%d.local", i)
		services = append(services, grpcService(host, 80))
		src.set(services...)
		ts.setEndpoints(t, host, "10.0.0.1") // a new service key: a full push
		// ACKs go in the order of receipt, so whether or not the server
		// has handled them when the push comes, the CDS watch is there
		// before the EDS one.
		var got []string
		for range 2 {
			resp := c.next(t)
			got = append(got, resp.GetTypeUrl())
			if resp.GetTypeUrl() == resourcev3.EndpointType {
				c.ack(resp, names...)
			} else {
				c.ack(resp)
			}
		}
		assertEqual(t, []string{resourcev3.ClusterType, resourcev3.EndpointType}, got)
	}
}

package gen

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/model"
)

// Resources returns the Clusters, Listeners and RouteConfigurations of
// svc, one of each per port and a cluster per port and subset of its
// DestinationRule (ClusterNames' order), each encoded once (Encode); a cluster whose
// policy uses a feature some clients lack is a Varied, with the form each
// of them is served. They depend only on the service's hostname, ports
// (name, number, protocol), DestinationRule (svc.Policy) and
// VirtualService (svc.Routing): a service whose inputs are unchanged
// (model.Service.SameGeneratorInputs) generates the same bytes.
//
// A port's Listener and RouteConfiguration share one name string, which
// the caches keep as their keys.
func Resources(svc *model.Service) (clusters, listeners, routes []types.Resource) {
	listeners = make([]types.Resource, 0, len(svc.Ports))
	routes = make([]types.Resource, 0, len(svc.Ports))
	subsets := svc.Policy.GetSubsets()
	clusters = make([]types.Resource, 0, len(svc.Ports)*(1+len(subsets)))
	for _, port := range svc.Ports {
		clusters = append(clusters, vary(ClusterName(port.Number, svc.Hostname),
			featuresUsed(servedPolicy(svc, port.Number)),
			func(lacks Features) (proto.Message, []string) { return clusterFor(svc, port, nil, lacks) }))
		for _, sub := range subsets {
			clusters = append(clusters, vary(SubsetClusterName(port.Number, sub.GetName(), svc.Hostname),
				featuresUsed(subsetPolicy(svc, sub, port.Number)),
				func(lacks Features) (proto.Message, []string) { return clusterFor(svc, port, sub, lacks) }))
		}
		name := ListenerName(port.Number, svc.Hostname)
		rc, faults := routeFor(svc, port.Number)
		listeners = append(listeners, Encode(name, buildListener(name, faults)))
		routes = append(routes, Encode(name, rc))
	}
	return clusters, listeners, routes
}

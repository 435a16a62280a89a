package gen

import (
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshbridge/meshbridge/model"
)

// buildRoutes returns the proxyless gRPC RouteConfigurations, one per service
// port, keyed by name ("<host>:<port>", the listener's route_config_name).
func buildRoutes(services []*model.Service) map[string]*route.RouteConfiguration {
	out := make(map[string]*route.RouteConfiguration)
	for _, svc := range services {
		for _, port := range svc.Ports {
			r, _ := routeFor(svc, port.Number)
			out[r.Name] = r
		}
	}
	return out
}

// routeFor returns the RouteConfiguration of svc's port: one virtual host
// matching the host with and without the port, named ListenerName(port,
// host), whose routes are svc's VirtualService's (routing.go), or, when it
// has none, one sending every request (prefix "/") to the port's cluster,
// hashing as the port's DestinationRule policy says; and whether a route
// injects faults.
func routeFor(svc *model.Service, port uint32) (*route.RouteConfiguration, bool) {
	host, name := svc.Hostname, ListenerName(port, svc.Hostname)
	routes, faults := virtualHostRoutes(host, port, svc.Routing, routeHashPolicy(servedPolicy(svc, port)))
	if svc.Routing == nil {
		applyRouteDefaults(routes[0].GetRoute(), svc.Defaults)
	}
	return &route.RouteConfiguration{
		Name: name,
		VirtualHosts: []*route.VirtualHost{{
			Name:    name,
			Domains: []string{host, name},
			Routes:  routes,
		}},
	}, faults
}

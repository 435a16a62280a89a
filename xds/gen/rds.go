package gen

import (
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// buildRoutes returns the proxyless gRPC RouteConfigurations, one per service
// port, keyed by name ("<host>:<port>", the listener's route_config_name).
func buildRoutes(services []*model.Service) map[string]*route.RouteConfiguration {
	out := make(map[string]*route.RouteConfiguration)
	for _, svc := range services {
		for _, port := range svc.Ports {
			r, _ := buildRouteNamed(ListenerName(port.Number, svc.Hostname), svc.Hostname, port.Number, svc.Routing)
			out[r.Name] = r
		}
	}
	return out
}

// buildRouteNamed returns the RouteConfiguration name (ListenerName(port,
// host)): one virtual host matching the host with and without the port,
// whose routes are the VirtualService vs's (routing.go), or, when vs is
// nil, one sending every request (prefix "/") to the port's cluster; and
// whether a route injects faults.
func buildRouteNamed(name, host string, port uint32, vs *networking.VirtualService) (*route.RouteConfiguration, bool) {
	routes, faults := virtualHostRoutes(host, port, vs)
	return &route.RouteConfiguration{
		Name: name,
		VirtualHosts: []*route.VirtualHost{{
			Name:    name,
			Domains: []string{host, name},
			Routes:  routes,
		}},
	}, faults
}

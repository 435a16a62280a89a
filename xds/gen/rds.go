package gen

import (
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshbridge/meshbridge/model"
)

// buildRoutes returns the proxyless gRPC RouteConfigurations, one per service
// port, keyed by name ("<host>:<port>", the listener's route_config_name). Each
// has one virtual host matching the host with and without the port and sends
// every request (prefix "/") to the port's cluster.
func buildRoutes(services []*model.Service) map[string]*route.RouteConfiguration {
	out := make(map[string]*route.RouteConfiguration)
	for _, svc := range services {
		for _, port := range svc.Ports {
			r := buildRoute(svc.Hostname, port.Number)
			out[r.Name] = r
		}
	}
	return out
}

func buildRoute(host string, port uint32) *route.RouteConfiguration {
	return buildRouteNamed(ListenerName(port, host), host, port)
}

// buildRouteNamed is buildRoute with its name, ListenerName(port, host).
func buildRouteNamed(name, host string, port uint32) *route.RouteConfiguration {
	return &route.RouteConfiguration{
		Name: name,
		VirtualHosts: []*route.VirtualHost{{
			Name:    name,
			Domains: []string{host, name},
			Routes: []*route.Route{{
				Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{
					ClusterSpecifier: &route.RouteAction_Cluster{Cluster: ClusterName(port, host)},
				}},
			}},
		}},
	}
}

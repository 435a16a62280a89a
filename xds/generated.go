package xds

import (
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// serviceResources is what full pushes generate for one service: its
// Clusters, Listeners and RouteConfigurations, each held only as its
// encoding (gen.Encoded), and the inputs they were generated from. The
// generators read nothing of a service but its hostname and ports (name,
// number, protocol), so a service whose hostname and ports are unchanged
// keeps its resources from one full push to the next: a full push encodes
// only the services that changed, and the caches hold one encoding per
// resource instead of a message tree.
type serviceResources struct {
	host                        string
	ports                       []model.Port
	clusters, listeners, routes []types.Resource
}

// sameInputs reports whether svc would generate these resources.
func (r *serviceResources) sameInputs(svc *model.Service) bool {
	return r.host == svc.Hostname && slices.Equal(r.ports, svc.Ports)
}

// generateService builds and encodes svc's resources.
func generateService(svc *model.Service) *serviceResources {
	r := &serviceResources{host: svc.Hostname, ports: slices.Clone(svc.Ports)}
	r.clusters, r.listeners, r.routes = gen.Resources(svc)
	return r
}

// generatedResources is every service's resources as of the last full
// push, by service key; the full push owns it (DiscoveryServer.pushMu).
type generatedResources map[model.ConfigKey]*serviceResources

// generate returns the resources of services by type, reusing last's for a
// service whose inputs are unchanged, and the new generatedResources.
func (last generatedResources) generate(services []*model.Service) (clusters, listeners, routes map[string]types.Resource, next generatedResources) {
	clusters = make(map[string]types.Resource, len(services))
	listeners = make(map[string]types.Resource, len(services))
	routes = make(map[string]types.Resource, len(services))
	next = make(generatedResources, len(services))
	for _, svc := range services {
		key := model.ServiceKey(svc.Namespace, svc.Hostname)
		r := last[key]
		if r == nil || !r.sameInputs(svc) {
			r = generateService(svc)
		}
		next[key] = r
		add := func(dst map[string]types.Resource, resources []types.Resource) {
			for _, res := range resources {
				dst[res.(types.ResourceWithName).GetName()] = res
			}
		}
		add(clusters, r.clusters)
		add(listeners, r.listeners)
		add(routes, r.routes)
	}
	return clusters, listeners, routes, next
}

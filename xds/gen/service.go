package gen

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
)

// Resources returns the Clusters, Listeners and RouteConfigurations of
// svc, one of each per port, each encoded once (Encode). They depend only
// on the service's hostname and ports (name, number, protocol): a service
// whose hostname and ports are unchanged generates the same bytes.
func Resources(svc *model.Service) (clusters, listeners, routes []types.Resource) {
	services := []*model.Service{svc}
	return encodeAll(buildClusters(services)), encodeAll(buildListeners(services)), encodeAll(buildRoutes(services))
}

func encodeAll[M types.Resource](in map[string]M) []types.Resource {
	out := make([]types.Resource, 0, len(in))
	for name, m := range in {
		out = append(out, Encode(name, m))
	}
	return out
}

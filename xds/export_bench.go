package xds

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/meshbridge/meshbridge/model"
)

// EDSPath is the EDS path of one service without a server, streams or cache:
// the endpoint shards and the build and encode of the service's
// ClusterLoadAssignments, as an EDS push runs them. It exists for benchmarks
// outside this package (test/istio runs it side by side with istiod's
// endpoint builder); BenchmarkEDSBuildEncode measures the same steps.
type EDSPath struct {
	s   *DiscoveryServer
	svc *model.Service
}

// NewEDSPath returns svc's EDS path with no endpoints.
func NewEDSPath(svc *model.Service) *EDSPath {
	return &EDSPath{s: &DiscoveryServer{shards: newEndpointShards()}, svc: svc}
}

// Update replaces the endpoints of shard, as DiscoveryServer.EDSUpdate does,
// and reports whether a client would see a change (a push is needed).
func (p *EDSPath) Update(shard string, endpoints []*model.Endpoint) bool {
	return p.s.shards.update(shard, p.svc.Hostname, p.svc.Namespace, endpoints) != noPush
}

// BuildEncode builds the service's ClusterLoadAssignments from the shards,
// one per port, and encodes each as the cache hands it to every stream
// (cachev3.MarshalResource). It returns the encodings by cluster name.
func (p *EDSPath) BuildEncode() (map[string][]byte, error) {
	cla := make(map[string]types.Resource, len(p.svc.Ports))
	p.s.addLoadAssignments(cla, p.svc)
	out := make(map[string][]byte, len(cla))
	for name, res := range cla {
		b, err := cachev3.MarshalResource(res)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

package xds

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/log"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// caches holds one go-control-plane LinearCache per resource type and the
// MuxCache that routes each request to one of them.
//
// Every type uses a LinearCache rather than a snapshot cache: a snapshot cache
// versions a node's whole snapshot, so a change of one ClusterLoadAssignment
// wakes every stream watching any of them; a LinearCache versions each
// resource and wakes only the watches of the resources it is handed (Contour
// internal/xdscache/v3/snapshot.go makes the same choice for EDS).
type caches struct {
	clusters  *resourceSet // CDS, every client
	endpoints *resourceSet // EDS, every client
	listeners *resourceSet // LDS, proxyless gRPC only
	routes    *resourceSet // RDS, proxyless gRPC only
	mcp       *mcpCache    // MCP types for istiod (mcp.go); nil unless Options.MCP
	// mux routes each request to one of the caches (MuxCache), behind
	// nackGuard; it is what the ADS server watches.
	mux cachev3.Cache
}

func newCaches(logger log.Logger, mcp *mcpCache) *caches {
	linear := func(typeURL string) *cachev3.LinearCache {
		return cachev3.NewLinearCache(typeURL, cachev3.WithLogger(logger))
	}
	c := &caches{
		clusters:  newResourceSet(linear(resourcev3.ClusterType)),
		endpoints: newResourceSet(linear(resourcev3.EndpointType)),
		listeners: newResourceSet(linear(resourcev3.ListenerType)),
		routes:    newResourceSet(linear(resourcev3.RouteType)),
		mcp:       mcp,
	}
	mux := &cachev3.MuxCache{
		Classify: func(r *cachev3.Request) string {
			return cacheKey(r.GetTypeUrl(), r.GetNode())
		},
		ClassifyDelta: func(r *cachev3.DeltaRequest) string {
			return cacheKey(r.GetTypeUrl(), r.GetNode())
		},
		// A type not listed here fails the stream (MuxCache's "no cache
		// defined"): meshbridge serves no SDS, RTDS or ECDS.
		Caches: map[string]cachev3.Cache{
			resourcev3.ClusterType:                          c.clusters.cache,
			resourcev3.EndpointType:                         c.endpoints.cache,
			keyFor(resourcev3.ListenerType, GeneratorGRPC):  c.listeners.cache,
			keyFor(resourcev3.RouteType, GeneratorGRPC):     c.routes.cache,
			keyFor(resourcev3.ListenerType, GeneratorEnvoy): linear(resourcev3.ListenerType),
			keyFor(resourcev3.RouteType, GeneratorEnvoy):    linear(resourcev3.RouteType),
		},
	}
	if mcp != nil {
		// Only SotW reaches it: istiod's MCP client does not use Delta.
		mux.Caches[mcpCacheKey] = mcp
	}
	c.mux = nackGuard{mux}
	return c
}

// mcpCacheKey classifies every MCP type (isMCPType): meshbridge's own and the
// ones it answers with an empty list.
const mcpCacheKey = "mcp"

// cacheKey classifies a request. Only LDS and RDS differ per generator: an
// Envoy gets their empty caches, because Envoy accepts an api_listener only
// from its bootstrap.
//
// In SotW and Delta only a stream's first request must carry the Node;
// go-control-plane's servers copy the first Node into every later request of
// the stream before it reaches the cache (server/sotw/v3 process, processADS;
// server/delta/v3 processDelta), so the classification holds for the stream.
func cacheKey(typeURL string, node *core.Node) string {
	return keyFor(typeURL, generatorOf(node))
}

func keyFor(typeURL string, gen Generator) string {
	if isMCPType(typeURL) {
		return mcpCacheKey
	}
	switch typeURL {
	case resourcev3.ListenerType, resourcev3.RouteType:
		return string(gen) + " " + typeURL
	}
	return typeURL
}

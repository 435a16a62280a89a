package xds

import (
	"log/slog"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/xds/ads"
	"github.com/meshbridge/meshbridge/xds/cache"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// caches holds one cache.Resources per resource type, shared by every
// listener; forListener builds the MuxCache a listener's ADS server watches.
//
// Every type is versioned per resource (cache.Resources, which keeps
// go-control-plane's LinearCache rules) rather than by snapshot: a snapshot
// cache versions a node's whole snapshot, so a change of one
// ClusterLoadAssignment wakes every stream watching any of them; a
// per-resource cache wakes only the watches of the resources it is handed
// (Contour internal/xdscache/v3/snapshot.go makes the same choice for EDS).
type caches struct {
	clusters  *resourceSet // CDS, every client
	endpoints *resourceSet // EDS, every client
	listeners *resourceSet // LDS, proxyless gRPC only
	routes    *resourceSet // RDS, proxyless gRPC only
	mcp       *cache.MCP   // MCP types for istiod; nil unless Options.MCP
	// xds maps the cache key of each served xDS type (keyFor) to its cache.
	xds map[string]cachev3.Cache
}

// newCaches returns the caches; clusters are served by client profile
// (clients.go), recording substitutions in subs, and endpoints by where
// the client runs (placeOf).
func newCaches(mcp *cache.MCP, subs *substitutions) *caches {
	set := func(typeURL string) *resourceSet {
		r := newResourceSet(cache.NewResources(typeURL))
		r.typeURL = typeURL
		return r
	}
	c := &caches{
		clusters:  set(resourcev3.ClusterType),
		endpoints: set(resourcev3.EndpointType),
		listeners: set(resourcev3.ListenerType),
		routes:    set(resourcev3.RouteType),
		mcp:       mcp,
	}
	c.clusters.cache.ServeProfiles(gen.NumProfiles, profileOf, subs.served)
	c.endpoints.cache.ServeLocalized(placeOf)
	c.xds = map[string]cachev3.Cache{
		resourcev3.ClusterType:                          c.clusters.cache,
		resourcev3.EndpointType:                         c.endpoints.cache,
		keyFor(resourcev3.ListenerType, GeneratorGRPC):  c.listeners.cache,
		keyFor(resourcev3.RouteType, GeneratorGRPC):     c.routes.cache,
		keyFor(resourcev3.ListenerType, GeneratorEnvoy): cache.NewResources(resourcev3.ListenerType),
		keyFor(resourcev3.RouteType, GeneratorEnvoy):    cache.NewResources(resourcev3.RouteType),
	}
	return c
}

// generated returns the resource sets pushes write.
func (c *caches) generated() []*resourceSet {
	return []*resourceSet{c.clusters, c.endpoints, c.listeners, c.routes}
}

// listenerRole is what a listener serves.
type listenerRole int

const (
	// serveXDSAndMCP: the xDS types, and the MCP types when MCP is on (the
	// ADS port without a separate MCP listener).
	serveXDSAndMCP listenerRole = iota
	// serveXDSOnly: the xDS types; MCP types are refused, as MCP has its own
	// listener.
	serveXDSOnly
	// serveMCPOnly: the MCP types; every other type is refused.
	serveMCPOnly
)

// forListener returns the cache a listener's ADS server watches: a MuxCache
// over the shared caches that routes each type URL as the listener's role
// says (types.go), behind nackGuard.
func (c *caches) forListener(role listenerRole, log *slog.Logger) cachev3.Cache {
	routes := map[string]cachev3.Cache{invalidTypeKey: invalidType(log)}
	if role == serveMCPOnly {
		routes[mcpCacheKey] = c.mcp
		routes[refusedTypeKey] = xdsElsewhere(log)
	} else {
		maps.Copy(routes, c.xds)
		routes[unknownTypeKey] = emptyCache{}
		switch {
		case c.mcp == nil:
			routes[mcpCacheKey] = mcpDisabled(log)
		case role == serveXDSOnly:
			routes[mcpCacheKey] = mcpElsewhere(log)
		default:
			// Only SotW reaches it: istiod's MCP client does not use Delta.
			routes[mcpCacheKey] = c.mcp
		}
	}
	classify := func(typeURL string, node *core.Node) string {
		key := cacheKey(typeURL, node)
		if role == serveMCPOnly && key != mcpCacheKey && key != invalidTypeKey {
			return refusedTypeKey
		}
		return key
	}
	return nackGuard{&cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return classify(r.GetTypeUrl(), r.GetNode()) },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return classify(r.GetTypeUrl(), r.GetNode()) },
		Caches:        routes,
	}}
}

// mcpCacheKey classifies every Istio config type (isMCPType): meshbridge's
// own and the ones it answers with an empty list.
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

// keyFor classifies a type URL for a generator (types.go): a served xDS
// type, mcpCacheKey, unknownTypeKey or invalidTypeKey.
func keyFor(typeURL string, gen Generator) string {
	switch {
	case typeURL == resourcev3.ListenerType, typeURL == resourcev3.RouteType:
		return string(gen) + " " + typeURL
	case servedXDSTypes[typeURL]:
		return typeURL
	case isProtoType(typeURL):
		return unknownTypeKey
	case isMCPType(typeURL):
		return mcpCacheKey
	}
	return invalidTypeKey
}

// route returns the ads.Server Route of a listener that serves the xDS
// types (serveXDSAndMCP, serveXDSOnly): each type URL is classified as
// forListener's MuxCache does, and an Istio config type is handed off to
// go-control-plane's server (MCP) where the listener serves MCP.
func (c *caches) route(role listenerRole, log *slog.Logger) func(typeURL string, node *core.Node, delta bool) (ads.Source, error) {
	sources := make(map[string]ads.Source, len(c.xds))
	for key, cc := range c.xds {
		sources[key] = cc.(*cache.Resources)
	}
	return func(typeURL string, node *core.Node, delta bool) (ads.Source, error) {
		key := cacheKey(typeURL, node)
		if src, ok := sources[key]; ok {
			return src, nil
		}
		switch key {
		case unknownTypeKey:
			return emptySource{}, nil
		case mcpCacheKey:
			switch {
			case c.mcp == nil:
				return nil, mcpDisabled(log).refuse(typeURL, node.GetId())
			case role == serveXDSOnly:
				return nil, mcpElsewhere(log).refuse(typeURL, node.GetId())
			case delta:
				return nil, status.Errorf(codes.Unimplemented, "Istio config type %q is served over SotW ADS only", typeURL)
			}
			return nil, ads.ErrHandOff
		}
		return nil, invalidType(log).refuse(typeURL, node.GetId())
	}
}

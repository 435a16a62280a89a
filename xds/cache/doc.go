// Package cache holds the caches meshbridge's ADS servers serve from:
// Resources, one per xDS type (Clusters, ClusterLoadAssignments,
// Listeners, RouteConfigurations), an ads.Source of meshbridge's ADS server
// and a go-control-plane cache (the oracle the ADS server's differential
// test runs), and MCP, the Istio config types for istiod, a
// go-control-plane cache.
//
// Rules:
//  1. Resources answers watches by the rules of go-control-plane's
//     LinearCache (pkg/cache/v3/linear.go, v0.14), checked against it on
//     random steps (TestResourceCacheMatchesLinearCache): SotW's empty
//     version answered at once; full state for CDS and LDS, changed
//     resources for EDS and RDS; Delta's new, changed, removed and
//     unsubscribed resources; wildcards. resources.go.
//  2. Each resource is versioned on its own: a response's version_info is
//     the cache's update count; Delta's resource version is
//     go-control-plane's HashResource of the encoding, so a client
//     reconnecting with initial_resource_versions is sent only what
//     differs. resources.go.
//  3. A resource is held as its encoding (an encoded resource's own bytes,
//     xds/gen), and its Any and Delta Resource are built once, on the first
//     response that carries the version, and shared by every stream.
//     resources.go.
//  4. A Varied resource is served in the form of the watch's profile
//     (ServeProfiles: the stream's node's), under the cache's one SotW
//     version; Delta's resource version hashes the form sent. resources.go.
//  5. A go-control-plane watch is answered without blocking: a full stream
//     channel is handed to a goroutine that gives up when the watch is
//     cancelled. resources.go, mcp.go.
//  6. As an ads.Source, Resources decides what a watch is sent by rules 1–4
//     (the same functions), keeps the ADS server's watches standing,
//     indexed by the names they subscribe to (the wildcard ones apart), and
//     wakes only those of the names an Update changed, after releasing its
//     lock (ads.Wake). A response body is encoded once (internal/wire
//     Response) for every watch that is sent the same forms and removals
//     until the next Update. source.go.
//  7. MCP answers SotW with the complete set of a kind under exactly the
//     requested type URL (networking.istio.io/v1 and v1alpha3 ServiceEntry,
//     WorkloadEntry), and any other Istio config type with an empty list,
//     as istiod syncs only after a response for every type it asked for.
//     Each object is an istio.mcp.v1alpha1.Resource ("<namespace>/<name>",
//     version = content hash), marshalled once per version; objects failing
//     the validation NewMCP is given (required; the pipeline gives
//     translate's, istiod's rules) are skipped. A stream is answered when
//     it was not yet sent the current set, read from its subscription, not
//     its request: istiod's first request carries a made-up nonce. Changes are
//     debounced (Run). mcp.go.
//
// Concurrency: every cache is safe for concurrent use; the ADS server's
// workers and handlers (and go-control-plane's stream goroutines) ask for
// responses while a push updates. Not here: what is
// pushed (package xds), how resources are built (xds/gen), MCP over Delta
// (Unimplemented).
package cache

// Package xds is meshbridge's xDS server: it takes push decisions from the
// ServiceEntry controller (the serviceentry.XDSUpdater methods) and the
// services of a ServiceSource, and serves Clusters and ClusterLoadAssignments
// to every client plus Listeners and RouteConfigurations to proxyless gRPC,
// over go-control-plane's ADS server (SotW and Delta).
//
// Rules:
//  1. Endpoints are kept per service (host, namespace) and per shard; the first
//     endpoints of a service nobody declared (SvcUpdate) and a change of its
//     service accounts push full, other changes push EDS, an unchanged set
//     pushes nothing, an empty set keeps the service key (Istio release-1.29
//     pilot/pkg/xds/eds.go edsCacheUpdate; DESIGN.md §5). A declared service's
//     first endpoints push EDS only: its clusters came with the ServiceEntry's
//     full push. shards.go, updater.go.
//  2. Requests are merged with PushRequest.Merge and pushed after a quiet
//     period (DebounceAfter) or a cap (DebounceMax), one push at a time; EDS
//     requests bypass the batch when EnableEDSDebounce is false (Istio
//     pilot/pkg/xds/discovery.go debounce). debounce.go.
//  3. Names follow istiod: cluster and ClusterLoadAssignment
//     "outbound|<port>||<host>", proxyless listener and route "<host>:<port>"
//     (DESIGN.md §6). names.go.
//  4. Clients are told apart by node metadata GENERATOR as istiod does: "grpc"
//     gets LDS/RDS/CDS/EDS, any other node CDS/EDS and empty LDS/RDS, because
//     Envoy accepts an api_listener only from its bootstrap (issue 2). caches.go.
//  5. Clusters are type EDS, also for DNS resolution: grpc-go supports only EDS,
//     LOGICAL_DNS and aggregate clusters (gRFC A27). cds.go.
//  6. A ClusterLoadAssignment has one locality per distinct locality, weights
//     ≥ 1 and no duplicate address, which grpc-go would NACK (gRFC A27). eds.go.
//  7. Resources are versioned one by one (a LinearCache per type) and only
//     changed ones are handed to the caches, so an EDS push sends only the
//     changed ClusterLoadAssignments, only to their subscribers; a full push
//     regenerates clusters, listeners and routes and removes vanished ones
//     (DESIGN.md §6). resources.go, push.go.
//  8. Nothing is served before the first full push, which Run does once its
//     ready channel closes; a grpc-go client treats a resource missing from a
//     SotW response as deleted, so a partial mesh must never be served
//     (issue 2). server.go.
//  9. SotW and Delta ADS share the port and the caches for every type;
//     go-control-plane copies a stream's first Node into later requests
//     (sotw process, delta processDelta), so caches.go's classification
//     holds. Delta clients get changed resources with per-resource versions
//     (hash of the marshalled bytes) and removed names (issue 3). caches.go.
//  10. Each resource version is marshalled once: a LinearCache keeps one
//     cachedResource per version whose bytes are memoized (sync.OnceValues)
//     and shared by every stream's response; only the envelope is per
//     stream (go-control-plane pkg/cache/v3 cached_resource.go). resources.go.
//  11. A stream is sent a type's next response only after it answered the
//     previous one: the cache answers a watch once and the next watch opens
//     with the next request (SotW and Delta), so pushes to an un-ACKed
//     stream coalesce. A NACKed version is not re-sent until it changes;
//     nackGuard closes SotW's gap for a NACK of the first response.
//     callbacks.go keeps the last ACKed version per stream and type. nack.go.
//  12. A push never waits for a client: a LinearCache hands responses to
//     per-stream buffered channels; each stream sends from its own
//     goroutine; at most 2×GOMAXPROCS (≥ 4) sends run at once, and one
//     blocked by flow control frees its slot after 50ms. sends.go.
//  13. Options.TLS serves the port over TLS, mTLS when a client CA is named;
//     every handshake gets the current files, re-read when their stamp
//     (mtime, size, through symlinks) changes, and a rotation that does not
//     load keeps the previous pair (issue 3). Plaintext is the default, for
//     loopback. tls.go.
//  14. With Options.MCP, the ADS port also serves istiod's MCP client
//     (issue 5; DESIGN.md §6): every type URL not starting with
//     "type.googleapis.com/" goes to one MCP cache that answers SotW with
//     the complete set of its kind under exactly the requested type URL
//     (networking.istio.io/v1 and v1alpha3 ServiceEntry, WorkloadEntry),
//     and any other type with an empty list, as istiod syncs only after a
//     response for every type it asked for. Each object is an
//     istio.mcp.v1alpha1.Resource ("<namespace>/<name>", version = content
//     hash), marshalled once per version; objects failing translate's
//     validation are skipped. A stream is answered when it was not yet
//     sent the current set, read from its subscription, not its request:
//     istiod's first request carries a made-up nonce. Store changes
//     (MCPConfigChanged) are debounced like pushes. mcp.go.
//
// Concurrency: the XDSUpdater methods may be called from any goroutine and
// never block; they update the endpoint shards and queue a request. One
// debounce goroutine batches requests; pushes run one at a time under a mutex
// that owns the caches' content. go-control-plane serves each stream in its
// own goroutines and reads the caches under their own locks.
//
// Not here: push decisions about ServiceEntries (serviceentry), MCP over
// Delta, authentication beyond TLS on the xDS port, SDS/RTDS/ECDS (requests
// for other type.googleapis.com types end the stream), the REST and per-type
// (non-ADS) xDS services.
package xds

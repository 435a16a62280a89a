// Package xds is meshbridge's xDS server: it takes push decisions from the
// ServiceEntry controller (the serviceentry.XDSUpdater methods) and the
// services of a ServiceSource, and serves Clusters and ClusterLoadAssignments
// to every client plus Listeners and RouteConfigurations to proxyless gRPC,
// over go-control-plane's ADS server (SotW and Delta).
//
// Rules:
//  1. Endpoints are kept per service (host, namespace) and per shard; the first
//     endpoints of a service nobody declared (SvcUpdate) push full, other
//     changes (service accounts included: no cluster carries them) push EDS,
//     an unchanged set
//     pushes nothing, an empty set keeps the service key (Istio release-1.29
//     pilot/pkg/xds/eds.go edsCacheUpdate; docs/design.md §5). A declared service's
//     first endpoints push EDS only: its clusters came with the ServiceEntry's
//     full push. shards.go, updater.go.
//  2. Requests are merged with PushRequest.Merge and pushed after a quiet
//     period (DebounceAfter) or a cap (DebounceMax), one push at a time; EDS
//     requests bypass the batch when EnableEDSDebounce is false (Istio
//     pilot/pkg/xds/discovery.go debounce). debounce.go.
//  3. Names follow istiod: cluster and ClusterLoadAssignment
//     "outbound|<port>||<host>", proxyless listener and route "<host>:<port>"
//     (docs/design.md §6). names.go.
//  4. Clients are told apart by node metadata GENERATOR as istiod does: "grpc"
//     gets LDS/RDS/CDS/EDS, any other node CDS/EDS and empty LDS/RDS, because
//     Envoy accepts an api_listener only from its bootstrap. caches.go.
//  5. Clusters are type EDS, also for DNS resolution: grpc-go supports only EDS,
//     LOGICAL_DNS and aggregate clusters (gRFC A27). cds.go.
//  6. A ClusterLoadAssignment has one locality per distinct locality, weights
//     ≥ 1 and no duplicate address, which grpc-go would NACK (gRFC A27), and
//     weights whose sum fits in a uint32 (grpc-go and Envoy refuse a larger
//     sum per locality and per priority): past it every weight is scaled
//     down by one factor, ratios kept, logged once per service and counted.
//     eds.go, weights.go.
//  7. Resources are versioned one by one (a resourceCache per type, which
//     keeps go-control-plane's LinearCache rules; rescache.go) and only
//     changed ones are handed to the caches, so an EDS push sends only the
//     changed ClusterLoadAssignments, only to their subscribers; a full push
//     regenerates clusters, listeners and routes and removes vanished ones
//     (docs/design.md §6). The push log line counts the services pushed, the
//     resources changed and the request's ConfigsUpdated (0 for a global
//     push) apart. resources.go, push.go.
//  8. Nothing is served before the first full push, which Run does once its
//     ready channel closes; both listeners open after it. A grpc-go client
//     treats a resource missing from a SotW response as deleted and istiod
//     reports ready on an empty list, so a partial mesh must never be
//     served. server.go.
//  9. SotW and Delta ADS share each listener and the caches for every type;
//     go-control-plane copies a stream's first Node into later requests
//     (sotw process, delta processDelta), so caches.go's classification
//     holds. Delta clients get changed resources with per-resource versions
//     (SHA-256 of the encoding, as go-control-plane's) and removed names.
//     caches.go, rescache.go.
//  10. Each resource version is marshalled once: the cache keeps the
//     encoding it was handed and, from the first response that carries it,
//     one Any (SotW) and one Delta Resource shared by every stream's
//     response; only the envelope is per stream. resources.go, rescache.go.
//     A ClusterLoadAssignment reaches its cache already encoded: the
//     endpoint shards encode an endpoint's LbEndpoint when it arrives and
//     keep the bytes while its address, port and weight stay; a push
//     assembles each changed assignment from them (protowire), byte for
//     byte what proto.Marshal gives for buildLoadAssignment's message, and
//     the cache's marshal returns those bytes without copying them.
//     Whether an assignment changed is decided on its bytes. Where a string
//     is not valid UTF-8 the push hands over the message itself, whose
//     marshal fails as proto.Marshal's does. shards.go, edswire.go.
//  11. A stream is sent a type's next response only after it answered the
//     previous one: the cache answers a watch once and the next watch opens
//     with the next request (SotW and Delta), so pushes to an un-ACKed
//     stream coalesce. A NACKed version is not re-sent until it changes;
//     nackGuard closes SotW's gap for a NACK of the first response.
//     callbacks.go keeps the last ACKed version per stream and type. nack.go.
//  12. A push never waits for a client: the cache hands responses to
//     per-stream buffered channels (a goroutine waits when one is full);
//     each stream sends from its own
//     goroutine; at most 2×GOMAXPROCS (≥ 4) sends run at once over both
//     listeners, and one blocked by flow control frees its slot after 50ms.
//     sends.go.
//  13. Options.TLS serves the xDS port over TLS, mTLS when a client CA is
//     named; Options.MCPTLS the MCP port over server TLS only, since
//     istiod's xds:// config source client presents no client certificate
//     (istio pilot/pkg/bootstrap/configcontroller.go): a client CA there is
//     an error. Every handshake gets the current files, re-read when their
//     stamp (mtime, size, through symlinks) changes, and a rotation that
//     does not load keeps the previous pair. Plaintext is the default, for
//     loopback. A refused handshake is counted per listener
//     (meshbridge_xds_tls_handshake_errors_total) and logged with the peer
//     and the error at most once per 10s per listener, with the number left
//     out; a connection closed before its first TLS record (a TCP probe) is
//     neither. tls.go, handshake.go.
//  14. Type URLs (types.go): CDS, EDS, LDS and RDS are served; any other
//     proto type ("type.googleapis.com/...") gets an empty response, SotW
//     and Delta, once per subscribed name, as istiod answers a type it has
//     no generator for, and the stream stays usable; an Istio config type
//     (a GVK string "<group>/<version>/<Kind>", "core" for the core group)
//     goes to MCP where MCP is served, and elsewhere ends the stream with
//     FailedPrecondition naming the configuration key that serves it
//     (mcp.enabled, mcp.address, xds.address), since an empty list would let
//     istiod go ready without meshbridge's config; anything else ends it
//     with InvalidArgument naming the type. type_url metric labels name only
//     the types meshbridge produces ("other" for the rest): clients choose
//     type URLs freely.
//  15. With Options.MCP, istiod's MCP client is served on the ADS port, or
//     with Options.MCPAddress only on a listener of its own (its own gRPC
//     server over the same caches; the ADS port then refuses Istio config
//     types, the MCP port everything else). One MCP cache answers SotW
//     with the complete set of its kind under exactly the requested type
//     URL (networking.istio.io/v1 and v1alpha3 ServiceEntry,
//     WorkloadEntry), and any other Istio config type with an empty list,
//     as istiod syncs only after a response for every type it asked for.
//     Each object is an istio.mcp.v1alpha1.Resource ("<namespace>/<name>",
//     version = content hash), marshalled once per version; objects failing
//     translate's validation are skipped. A stream is answered when it was
//     not yet sent the current set, read from its subscription, not its
//     request: istiod's first request carries a made-up nonce. Store
//     changes (MCPConfigChanged) are debounced like pushes. mcp.go.
//  16. Each stream's first request is logged at info: listener, node ID,
//     generator (grpc, envoy, or mcp for istiod), peer address and, when
//     mTLS verified a client certificate, its URI and DNS SANs (an Istio
//     workload certificate's identity; its subject is empty and logged only
//     when set). The stream's end is logged at debug. callbacks.go.
//  17. Run stops both listeners when its context ends: the ADS streams end
//     with it, each gRPC server stops gracefully (GOAWAY, responses in
//     flight finish), and hard after 5s. server.go.
//  18. Per stream and type the callbacks keep the subscription (mirrored
//     by go-control-plane's own Subscription rules from the requests it
//     takes), the last response sent, ACK and NACK; SyncStatus shows them
//     (/debug/syncz). syncz.go.
//  19. A push is followed to the streams subscribed to what it changed,
//     noted before the caches can answer: meshbridge_convergence_seconds'
//     push stage is its first response with a cache version past the
//     push's, ack the last such stream's ACK, both from
//     PushRequest.Start. At most 8 pushes are followed at once, each for
//     at most 60s. convergence.go.
//
// Concurrency: the XDSUpdater methods may be called from any goroutine and
// never block; they update the endpoint shards and queue a request. One
// debounce goroutine batches requests; pushes run one at a time under a mutex
// that owns the caches' content. go-control-plane serves each stream in its
// own goroutines and reads the caches under their own locks.
//
// Not here: push decisions about ServiceEntries (serviceentry), MCP over
// Delta (Unimplemented), authentication beyond TLS, SDS/RTDS/ECDS (answered
// empty), the REST and per-type (non-ADS) xDS services.
package xds

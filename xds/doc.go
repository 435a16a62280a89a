// Package xds is meshbridge's xDS server, the DiscoveryServer: it takes push
// decisions from the ServiceEntry controller (the serviceentry.XDSUpdater
// methods) and the services of a ServiceSource, keeps the endpoint shards,
// debounces and pushes, and serves Clusters and ClusterLoadAssignments to
// every client plus Listeners and RouteConfigurations to proxyless gRPC,
// over meshbridge's ADS server (xds/ads, SotW and Delta), and MCP to
// istiod over go-control-plane's.
//
// Its subpackages, imported one way (xds → xds/cache → xds/ads →
// internal/wire, xds/gen → internal/wire): xds/ads serves the ADS streams
// from Sources (its rules: nonces, subscriptions, ACK gating, order, the
// slow path), xds/gen builds and encodes the resources (pure
// functions of a service and its endpoints), xds/cache holds them for the
// streams (a per-resource cache per type, and MCP's, which validates with
// the function MCPOptions.Validate gives it). Neither imports xds nor the
// other. xds/dns is the stage before the server: it wraps it as the
// ServiceEntry controller's XDSUpdater and hands it endpoints whose DNS
// names are resolved; xds does not import it. xds/bootstrap, the client's
// side (its bootstrap), imports no meshbridge package; xds and xds/gen
// read the names it declares (the certificate provider instance).
//
// Rules:
//  1. Endpoints are kept per service (host, namespace) and per shard; the
//     first endpoints of a service nobody declared (SvcUpdate) push full; a
//     declared service's first endpoints push EDS only, as its clusters came
//     with the ServiceEntry's full push; a set that is the same for clients
//     (gen.SameForClients) pushes nothing; every other change pushes EDS,
//     and an empty set keeps the service key (Istio release-1.29
//     pilot/pkg/xds/eds.go edsCacheUpdate; docs/design.md §5). Unlike
//     Istio, a changed set of service accounts never pushes full, and a
//     change of only service accounts or workload names pushes nothing,
//     nor does one of only labels unless the service's DestinationRule has
//     subsets (which select by labels): Istio's clusters carry the
//     accounts as TLS subject alt names and its LbEndpoints carry
//     metadata; meshbridge's carry neither. This
//     is the one statement of that rule; the XDSUpdater docs refer to it.
//     shards.go, updater.go.
//  2. Requests are merged with PushRequest.Merge and pushed after a quiet
//     period (DebounceAfter) or a cap (DebounceMax; DebounceEDSMax while the
//     batch is EDS-only, which istiod does not have), one push at a time;
//     EDS requests bypass the batch when EnableEDSDebounce is false (Istio
//     pilot/pkg/xds/discovery.go debounce). debounce.go.
//  3. What is generated, and how (names as istiod's, clusters of type EDS,
//     the ClusterLoadAssignment's localities, weights and encoding), is
//     xds/gen's rules.
//  4. Clients are told apart by node metadata GENERATOR as istiod does: "grpc"
//     gets LDS/RDS/CDS/EDS, any other node CDS/EDS and empty LDS/RDS, because
//     Envoy accepts an api_listener only from its bootstrap. caches.go,
//     generator.go.
//  5. A service whose assignments' weights gen scaled down to fit (their
//     sum past what clients accept) is logged once and counted, again only
//     after a push that needed no scaling. weights.go.
//  6. How each cache answers watches (go-control-plane's LinearCache rules,
//     and MCP's) is xds/cache's rules.
//  7. Resources are versioned one by one (a cache.Resources per type) and
//     only changed ones are handed to the caches, so an EDS push sends only
//     the changed ClusterLoadAssignments, only to their subscribers; a full
//     push regenerates clusters, listeners and routes and removes vanished
//     ones (docs/design.md §6). The push log line counts the services
//     pushed, the resources changed and the request's ConfigsUpdated (0 for
//     a global push) apart. resources.go, push.go.
//  8. Nothing is served before the first full push, which Run does once its
//     ready channel closes; both listeners are bound when Run starts (a taken
//     port fails at once) and served after it. A grpc-go client
//     treats a resource missing from a SotW response as deleted and istiod
//     reports ready on an empty list, so a partial mesh must never be
//     served. server.go.
//  9. SotW and Delta ADS share each listener and the caches for every type;
//     the ADS server reads a stream's later requests with its first Node
//     (ads rule 2), so caches.go's classification (route) holds for the
//     stream. An Istio config type is handed to go-control-plane's server
//     (MCP) when it is a SotW stream's first request on a listener that
//     serves MCP. Delta clients get changed resources with per-resource
//     versions and removed names (xds/cache). caches.go.
//  10. Each resource version is marshalled once: gen hands over encodings
//     (a ClusterLoadAssignment assembled from the LbEndpoints the endpoint
//     shards encoded when the endpoints arrived), the cache keeps them and
//     encodes each response body once for every stream it goes to
//     (xds/cache source.go, internal/wire Response); only the nonce is per
//     stream (ads.Codec). Whether a resource changed is decided on its
//     bytes. shards.go, resources.go.
//  11. A stream is sent a type's next response only after it answered the
//     previous one, so pushes to an un-ACKed stream coalesce, and a NACKed
//     version is not re-sent until it changes (ads rules 4–6; nackGuard
//     keeps the same for go-control-plane's MCP streams). callbacks.go
//     keeps the last ACKed version per stream and type. nack.go.
//  12. A push never waits for a client: the ADS server's workers send to
//     the streams a push woke, and a stream with too many un-answered bytes
//     or a send in progress is sent to from a goroutine of its own (ads
//     rule 9). The gRPC listeners use static HTTP/2 flow-control windows
//     (TransportOptions): no BDP ping per ACK, and at most 1 MiB a client
//     can make a connection buffer.
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
//     types, the MCP port everything else), from one cache.MCP (its rules:
//     xds/cache), which serves only the objects MCPOptions.Validate
//     accepts (required; the pipeline gives translate's). Store changes (MCPConfigChanged) are debounced like
//     pushes. mcp.go.
//  16. Each stream's first request is logged at info: listener, node ID,
//     generator (grpc, envoy, or mcp for istiod), peer address and, when
//     mTLS verified a client certificate, its URI and DNS SANs (an Istio
//     workload certificate's identity; its subject is empty and logged only
//     when set). The stream's end is logged at debug. callbacks.go.
//  17. Run stops both listeners when its context ends: the ADS streams end
//     with it (status Canceled from meshbridge's ADS server, whose
//     handlers are woken from reading by their context, ads rule 12; OK
//     from go-control-plane's), each gRPC server stops gracefully (GOAWAY,
//     responses in flight finish), and hard after 5s. server.go.
//  18. Per stream and type the callbacks keep the subscription (mirrored
//     by go-control-plane's own Subscription rules from the requests it
//     takes), the last response sent, ACK and NACK; SyncStatus shows them
//     (/debug/syncz). They observe the ADS server's streams through the
//     per-stream hooks it gets when a stream opens (ads.StreamHooks), and
//     count responses and bytes in per-stream-sharded slots summed when
//     scraped (responseTally), never a counter every stream writes.
//     syncz.go, metrics.go.
//  19. A push is followed to the streams subscribed to what it changed,
//     noted before the caches can answer: meshbridge_convergence_seconds'
//     push stage is its first response with a cache version past the
//     push's, ack the last such stream's ACK, both from
//     PushRequest.Start. At most 8 pushes are followed at once, each for
//     at most 60s. convergence.go.
//  20. A client is served only the optional features (gen.Features) its
//     family and version accept, told by its node's user_agent_name and
//     user_agent_version from one table with the version each row is
//     known from; a client no row names gets what every client accepts.
//     A resource using a feature it lacks is served in the form built for
//     it (gen.Varied; the CDS cache serves each stream its profile's form
//     under one version), each such resource counted
//     (meshbridge_xds_policy_substitutions_total) and shown on the stream
//     (SyncStatus). clients.go.
//
// Concurrency: the XDSUpdater methods may be called from any goroutine and
// never block; they update the endpoint shards and queue a request. One
// debounce goroutine batches requests; pushes run one at a time under a mutex
// that owns the caches' content. The ADS server reads each stream's
// requests in its handler goroutine and sends pushes from its workers;
// both read the caches under their own locks.
//
// Not here: push decisions about ServiceEntries (serviceentry), resource
// building (xds/gen), the caches' watch rules (xds/cache), resolving the
// DNS names in endpoints (xds/dns: endpoints are served as they arrive,
// and in the pipeline they arrive resolved), which objects are valid for
// MCP (given by MCPOptions.Validate), MCP over Delta (Unimplemented),
// authentication beyond TLS, SDS/RTDS/ECDS (answered empty), the REST and
// per-type (non-ADS) xDS services.
package xds

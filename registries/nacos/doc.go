// Package nacos is the Nacos registry: it follows the configured namespaces
// and groups of a Nacos 2.x deployment over its gRPC API and delivers, per
// service, an authoritative registries.Snapshot of its usable instances (or
// an error) to a registries.Sink. Services map to hosts
// <service>.<group>.<namespace>.nacos (HostTemplate): the default namespace
// is "public" (Service.Namespace) and translate turns DEFAULT_GROUP into
// default-group.
//
// Rules:
//  1. One gRPC connection per configured namespace (a Nacos naming request
//     is bound to one namespace), to Addresses at GRPCPort or each HTTP port
//     + 1000, built from nacos-sdk-go v2.3.5's transport:
//     nacos_server.NacosServer (server list, login and its refresh, RAM
//     signatures) and rpc.RpcClient (connection, reconnects, server pushes).
//     TLS settings are read and checked by New (the SDK calls log.Fatalf on
//     an unreadable client certificate and drops CA read errors), the login
//     then uses https, and TLSConfig.Appointed keeps the
//     nacos_remote_client_rpc_tls_* variables from overriding them. The
//     SDK's HTTP agent is replaced (httpAgent): it skips certificate
//     verification without a CA file. A connection that goes down is
//     closed and a new one dialled (runWatchdog, within 100 ms) rather than
//     reconnected by the SDK, and requests are sent only while it is up:
//     v2.3.5's reconnect of a client that had a connection writes
//     rpc.RpcClient's current connection while its other goroutines read
//     it unsynchronized (a data race); a new client has none to replace.
//     A new connection is used once the server answers a HealthCheckRequest,
//     sent a second after it came up, without the SDK reconnecting in
//     between (conn.settle, up to 5 dials): a busy server registers a
//     connection later than the SDK's fixed 100 ms wait after its setup,
//     and answers a request before that with "Connection is unregistered",
//     on which the SDK reconnects (racing with itself). This narrows the
//     SDK's races but cannot rule them out: a server that goes away makes
//     the SDK reconnect, and fail requests (reading its status
//     unsynchronized), before the watchdog replaces the connection; the
//     tests that take the server away run without the race detector
//     (reconnect_test.go).
//  2. The SDK's naming client (NamingClient, NamingGrpcProxy,
//     ServiceInfoHolder) is not used, because each of its defences loses
//     data here: a refused request that comes back as the expected response
//     type (Nacos's auth filter answers so) is returned as an empty service
//     or service list with no error; an empty instance list never reaches a
//     subscriber unless UpdateCacheWhenEmpty; a push with an older
//     lastRefTime than the cached one is dropped; callbacks run on the
//     caller's or the push stream's goroutine. Requests go through
//     RpcClient.Request here, and any result code other than 200 is an
//     error (serverError; "forbidden" when Nacos's auth refused it,
//     registries.Permanent).
//  3. Listing: Nacos 2.x has no watch on the service list, so every group is
//     listed (ServiceListRequest, pages of 1000) every RelistInterval and at
//     once after a (re)connection. Empty names are ignored (Polaris pads
//     pages with them). A listing that took several pages and holds fewer
//     names than the server's count is partial: it adds services, never
//     removes one. Polaris lists every group's services in DEFAULT_GROUP's
//     listing, another group's as "<group>__<service>": such a name is
//     dropped when that group lists the service (and the listing counts as
//     partial when that group cannot be listed).
//  4. Reads: a listed service that passes Services (path.Match globs) is
//     subscribed (SubscribeServiceRequest); the subscribe answer, every
//     push and every reconcile query is an authoritative read of all its
//     instances, queued for the namespace's emitter goroutine (the SDK's
//     goroutines never block on the Sink). The newest read wins; a
//     subscribe answer or query that started before a push arrived is
//     dropped, the push being at least as new. A service that leaves the
//     listing or the allow-list is unsubscribed and removed.
//  5. Reconcile: every subscribed service is queried (ServiceQueryRequest,
//     the SDK's ServiceInfoUpdater request) every ReconcileInterval ±10 %,
//     at most 20 per second per namespace: pushes get lost (Polaris pushes
//     only DEFAULT_GROUP subscribers), and only the server can tell. A
//     query that changes an emitted list counts in
//     Status.ReconcileCorrections. Failed subscribes and queries are
//     retried at the next listing.
//  6. Instance: ID "<namespace>/<group>/<service>/<cluster>/<ip>:<port>";
//     address ip; port; labels = metadata without the server's
//     internal-nacos-* keys, plus ClusterLabel (nacos.io/cluster) with the
//     cluster name unless it is empty (Polaris's cluster-less instances);
//     protocol from metadata "protocol", else http for an instance Spring
//     Cloud registered (metadata preserved.register.source=SPRING_CLOUD:
//     Spring registers its web server's port and no protocol), else none
//     (translate's tcp); weight by Weight (round(w × 100),
//     at least 1); locality "<region>/<zone>/<subzone>" from the metadata
//     keys region, zone and subzone ("" when none is set). An instance is
//     usable when enabled, healthy and of weight > 0; with Clusters, only
//     instances of those clusters are. Ephemeral and persistent instances
//     alike. Labels are raw: translate sanitizes them. Health is what the
//     server sends: while the share of a service's healthy instances is at
//     or below its protect threshold (0 by default, so also when none is
//     healthy), the server sends every enabled instance marked healthy with
//     reachProtectionThreshold set, as it does to every Nacos client, and
//     all of them are served; the unhealthy ones cannot be told apart. Such
//     a service counts in Status.Protected and
//     meshbridge_registry_protected_services, and each change is logged
//     (a warning when reached). Envoy's panic threshold does the same for
//     its own health checks.
//  7. Emission (registries rules 1-3) is registries.Reporter's: a Snapshot
//     per service when its usable instances differ from the last list sent
//     (order-independent), or after an error; Removed when it leaves the
//     listing or the allow-list; Err, once per run of failures, when a read
//     fails, and for every service of a group whose listing fails (with one
//     registry-wide Err, empty Service.Name, per group and run of the same
//     failure) — never an empty list. Synced once, after the first listing
//     of every namespace and group and the first read of each of their
//     services. After a reconnection, a failed listing or the server found
//     hung (rule 12), every service is subscribed again, and for
//     max(30s, 2 × RelistInterval) after the last such sign of trouble a
//     service that had instances treats an empty read as an error
//     (registries.ErrEmptyAfterReconnect), whether a push, a subscribe
//     answer or a query brought it, and is not removed for missing from a
//     listing: a restarted or resumed server knows an ephemeral instance
//     only once its client has re-registered. A push that arrives right
//     after a hung server answers again is within that grace too.
//  8. Dubbo (the dubbo block, registries/dubbo's Config and rules). Dubbo
//     services are the interface-level ones, named
//     "providers:<interface>:<version>:<group>" (or "providers:<interface>"),
//     and the Dubbo 3 application-level ones: a service any of whose
//     instances, usable or not, carries dubbo.metadata.revision or
//     dubbo.endpoints metadata is one, and stays one while listed.
//     "consumers:", "routers:" and "configurators:" names are Dubbo
//     registrations but not services. With dubbo.enabled false (the
//     default) Dubbo services, and the other three categories, are skipped:
//     each logged at debug and counted once per appearance in
//     meshbridge_registry_skipped_total{reason="dubbo"} and Status.Skipped;
//     a service found to be application-level when read is removed if it
//     was emitted. With dubbo.enabled true they are emitted as Dubbo
//     services (named by the Dubbo host templates, package registries/dubbo
//     rule 10, never under the Nacos host template), with the Nacos
//     namespace and group as Service.Namespace and Group and the Nacos name
//     as Service.Name. An interface-level service's usable instances (rule
//     6's filters) are providers: the instance metadata, less the server's
//     internal-nacos-* keys, are the URL parameters, the protocol metadata
//     (default dubbo) the protocol; the interface, version and group are
//     the name's (Dubbo consumers look providers up by it), the interface
//     also filling a missing interface parameter. An instance that side or
//     category says is no provider is ignored; one that is not a valid
//     provider (registries/dubbo rule 1), or an application-level instance
//     whose dubbo.endpoints cannot be read, is an instance with Invalid set
//     and ID "<ip>:<port>", rejected by translate as malformed. Instance
//     IDs, ports, labels and methods follow registries/dubbo's rules 4-7;
//     application-level instances have no methods (their MetadataInfo is
//     not read). The weight is the Dubbo weight parameter (metadata
//     "weight") when set and not 0, else the Nacos weight as in rule 6.
//     The other three categories are ignored, uncounted. dubbo.mode
//     interface leaves out the application-level services, application the
//     interface-level ones: uncounted, logged at debug once per appearance
//     (an application-level service found when read is removed if it was
//     emitted, and unsubscribed). Allow-list, clusters, reads, reconcile
//     and emission are those of every service.
//  9. Nothing is cached on disk: a restarted bridge reads the server. The
//     SDK gets CacheDir as its cache and log directory with
//     NotLoadCacheAtStart, and with its naming client unused writes nothing
//     there.
//  10. Read health (registries.Session): every failed connection, listing,
//     read and login is reported as its reader's, under its reason (connect,
//     list, read, login, forbidden); the Session's per-reader rule brings the
//     registry up when no reader's last attempt failed, so an outage logs one
//     line down and one up. A server
//     that does not answer on its gRPC port but whose HTTP API says it is
//     Nacos 1.x is a permanent error naming the address; that connection is
//     closed and dialled again each RelistInterval instead of being retried
//     by the SDK. A login the server refuses (the SDK only logs it) keeps
//     the registry down with that error even while reads succeed. While a
//     namespace's connection is down, each cycle connects to the gRPC
//     ports itself (with TLS as configured) and the listings' errors name
//     why, e.g. an untrusted certificate, which the SDK only logs.
//  11. Secrets: the password and secret key travel in the login form and
//     request signatures only; they never appear in a log line, Status or an
//     error (redacted if one echoes them), nor do the access tokens logins
//     return (the SDK prints them with every request it logs). The SDK's
//     process-wide logger is routed into every running registry's slog
//     logger at debug (sdkLevel keeps its level: it logs each retry at
//     error), with credentials redacted.
//  12. A hung server is a down server (registries.Liveness): a
//     HealthCheckRequest on each namespace's connection every 2 s, which a
//     hung server leaves unanswered for 5 s (or a connection that went
//     away), takes the registry down as of when it was sent (reason
//     "hung"), with the error snapshots of rule 7; its answer brings the
//     registry up and the list loop relists and subscribes again at once.
//     Every request has its own deadline too (requestTimeoutMs), but the
//     listings and queries that would meet it come only every
//     RelistInterval and ReconcileInterval.
//
// Concurrency: per namespace, one goroutine lists and subscribes, one
// reconciles, one emits, one probes liveness; the SDK's goroutines only
// queue. Run waits for all
// of them and closes every connection before returning.
//
// Not here: host naming, label sanitizing, ports (package translate); the
// outage policy beyond "an error is not an empty list" (docs/design.md §8);
// Nacos 1.x (HTTP API only); label selectors on service lists; the SDK's
// endpoint (address server) discovery; re-reading rotated TLS or secret
// files (a new Registry reads them); the Dubbo model (registries/dubbo);
// Dubbo's MetadataInfo, configurator and router rules.
package nacos

// Package consul is the Consul registry: it follows one Consul datacenter
// through an agent's HTTP API with blocking queries and delivers, per service,
// an authoritative registries.Snapshot of its usable instances (or an error)
// to a registries.Sink.
//
// Rules:
//  1. The service set comes from a blocking query on /v1/catalog/services
//     (typical kinds only: ServiceKind == ""); each service's instances from
//     /v1/health/service/<name>, so node checks count too (Consul HTTP API,
//     "Catalog" and "Health" endpoints).
//  2. Index handling follows Consul's "Blocking Queries" doc: reset to 0 when
//     X-Consul-Index goes backwards, never wait on an index below 1, skip a
//     result whose index did not move (nextIndex). api/watch/plan.go documents
//     the reset but does not implement it. An answer whose index went
//     backwards is not applied but confirmed by a consistent read
//     (blockState.consistent).
//  3. Every loop waits for a token of its own bucket (Config.RateLimit/Burst)
//     and backs off exponentially on errors, up to 10 s, keeping its index
//     (api/watch/plan.go backs off too, but drops the index: its watch
//     functions return none with an error). After a failure a loop reads
//     without blocking, so the first answer clears the error; a loop that
//     gets through wakes the others out of their backoff, and sends again
//     their reads still in flight: a server without a leader holds a read
//     for seconds after it elects one (rpc_hold_timeout). The catalog,
//     service and state/any loops are one loop (blockingQuery).
//  4. An agent accepts 200 concurrent HTTP connections per client IP
//     (limits.http_max_conns_per_client). The first Config.MaxWatches services
//     by name get their own blocking query; the rest (polled) are followed by
//     one blocking query on /v1/health/state/any: a service whose fingerprint
//     of (node, checkID, ModifyIndex) over its checks and its nodes'
//     node-level checks differs from its baseline is re-read with a
//     non-blocking health query. A service's baseline is the fingerprint of
//     what its last re-read returned, computed from that read's checks, not
//     from the state/any answer that prompted it: a service that changed
//     between the answer and the re-read and changed back before the next
//     answer (deregister, register, deregister) differs from its baseline and
//     is read again. A polled service without a baseline (new, or whose read
//     failed) is read by a loop of its own, as are, when the catalog index
//     moves, those with no service-level checks, which state/any cannot see
//     come and go. Nothing cancels the state/any query but the agent hanging
//     (rule 13): under churn a query cancelled at every catalog change would
//     rarely complete. Reads of one polled service are serialized, so the
//     last one reported is the newest.
//  5. Instance: ID node "/" service ID; address Service.Address, else
//     Node.Address; port Service.Port; labels from tags ("k=v" → k: v, a bare
//     tag → tag: "") overlaid by ServiceMeta; protocol ServiceMeta["protocol"],
//     else http when one of the service's own checks is an HTTP check (Spring
//     Cloud Consul's /actuator/health), grpc when one is a gRPC check
//     without TLS, else none (tcp) — a check whose target is known and on
//     another port says nothing;
//     weight Weights.Passing (Weights.Warning for a warning instance, as
//     Consul's DNS does), at least 1; locality "<dc>/<zone>/<subzone>" with
//     zone and subzone from ServiceMeta, else node meta. Labels are raw:
//     package translate sanitizes them.
//  6. Health: an instance is emitted when its checks aggregate to passing, or
//     to warning with HealthyOnly false; critical and maintenance never
//     (api.HealthChecks.AggregatedStatus).
//  7. Emission (registries rules 1-3) is registries.Reporter's: a snapshot
//     per service when its list differs from the last one sent
//     (order-independent); Removed when it leaves the catalog or the
//     allow-list, after the listing; Err, once per run of failures, when a
//     read fails — never an empty list. A failed catalog listing (or
//     datacenter lookup) is one registry-wide Err snapshot (an empty
//     Service.Name) per run of the same failure (an error names the path it
//     read, not the query, whose index changes from one read to the next).
//     Synced once after the first listing and each of its services' first
//     successful read. A read right after a failed read of its service, or
//     after its own or the catalog's index went backwards, is marked Relist.
//  8. Read health (registries.Session): every failed read is reported as
//     its reader's, under the reason of its loop or status code
//     (meshbridge_registry_errors_total); the readers are the catalog loop,
//     the state/any loop, each service and the liveness probe, and the
//     Session's per-reader rule brings the registry up when none is failing,
//     so an outage logs one line down and one up whatever the number of reads.
//  9. Permanent errors (registries.Permanent), kept retrying while running:
//     401/403 (ACL not found, permission denied), a certificate refused on
//     either side of the TLS handshake, HTTPS to an HTTP port and HTTP to an
//     HTTPS port. Connection errors, 429 and 5xx are transient.
//  10. ACLs: a catalog listing the agent says it filtered
//     (X-Consul-Results-Filtered-By-ACLs), or an empty one under a deny
//     default policy (X-Consul-Default-ACL-Policy) with no token configured,
//     sets Status.ACLFiltered and logs once when that starts (warn; info
//     with an allow-list, where a token narrowed to it is expected) and once
//     when it ends. The anonymous token gets no filtered header, hence the
//     second rule.
//  11. Connection: as Consul's CLI, with its environment variables as
//     fallbacks (Config); any TLS setting implies https, plain HTTP with one
//     is an error, TLS files are read by New (errors name the setting), and
//     the client speaks HTTP/1.1 through its own transport (api.SetupTLSConfig
//     onto it: api.NewHttpClient ignores the TLS settings of a transport that
//     already has a TLS config).
//  12. Secrets: the token travels in the X-Consul-Token header and is never
//     logged nor shown in Status or an error (redacted if an error echoes
//     it).
//  13. A hung agent is a down agent (registries.Liveness): a probe of
//     /v1/status/leader on a connection of its own every 2 s, which a hung
//     agent leaves unanswered for 5 s, takes the registry down as of when
//     the probe was sent (reason "hung"), cancels every read in flight (each
//     reported as failed: last-known-good kept, one error snapshot per
//     service) and holds new ones; the probe's answer, the first thing a
//     resumed agent sends, lets them through again, each reading without
//     blocking. A probe that fails or answers that there is no leader takes
//     the registry down too, and the first that names one wakes every
//     reader out of its backoff. The blocking queries keep their long wait
//     and the HTTP client's timeouts stay above it: a liveness read on its
//     own connection, not per-request deadlines, tells a hung agent from a
//     quiet one.
//
// Concurrency: Run's goroutine runs the catalog loop; each watched service has
// a goroutine; one goroutine runs the state/any loop, one the read loop of
// polled services, each with at most 8 re-reads at once; one runs the
// liveness probe. Each service has one owner at a time, and the Reporter
// serializes what the Sink gets. Run waits for all of them before returning.
//
// Not here: host naming, label sanitizing, ports (package translate); the
// outage policy beyond "an error is not an empty list" (docs/design.md §8);
// Consul namespaces, partitions, peers; CONSUL_CAPATH; re-reading rotated TLS
// files (a new Registry reads them); an instance added without any check to
// a polled service that has checked instances on the same node is seen only
// with its service's next health change.
package consul

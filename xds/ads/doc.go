// Package ads is meshbridge's Aggregated Discovery Service stream server,
// SotW and Delta: it keeps each stream's subscriptions, nonces and
// ACKs, and sends each stream what its Sources (one per type) say it
// should have, when they change. It is push-driven: a Source that
// changes wakes the watches of the names it changed (Wake), and a pool of
// workers sends the streams their responses; a stream's handler goroutine
// reads its requests and answers them inline. go-control-plane's server,
// which opens a watch per request and serves each stream from two
// goroutines and a select, stays meshbridge's server for MCP and the
// oracle this one is tested against (differential_test.go).
//
// Rules (the ones go-control-plane's server keeps, SotW server/sotw/v3
// processADS and Delta server/delta/v3 processDelta, v0.14; and istiod's
// pilot/pkg/xds/ads.go):
//  1. A stream is numbered, and each response it is sent gets the stream's
//     next nonce ("1", "2", …): nonces are unique per stream, across types.
//  2. The first request of a stream carries the Node; later requests are
//     read as if they carried it (go-control-plane copies it in).
//  3. A type's subscription is go-control-plane's stream.Subscription,
//     created by the type's first request (legacy wildcard for the types
//     Options.LegacyWildcard allows) and changed by later ones: a SotW
//     request replaces the names, a Delta request subscribes and
//     unsubscribes, and a Delta stream's initial_resource_versions are
//     what the client holds.
//  4. A type has at most one response awaiting its answer per stream. A
//     change while one awaits marks the type dirty, and the answer (ACK or
//     NACK) sends it; pushes to a stream that has not answered coalesce,
//     as istiod's and go-control-plane's do. An ACK or NACK of a type
//     that is not dirty and keeps its names costs no Source call.
//  5. SotW: while a response of the type awaits its answer, a request
//     quoting another nonce is stale and ignored (but observed, Hooks).
//     Delta: every request answers the type's response (go-control-plane's
//     delta server keeps no nonce check).
//  6. A NACK answers like an ACK: what the Source says was sent (the
//     subscription's returned resources) is the rejected version, so it
//     is not sent again until it changes. A SotW request with an empty
//     version_info that is not a NACK is answered at once even when
//     nothing changed ("the client has no state"); a NACK of a stream's
//     first response has an empty version_info too and is not.
//  7. A Delta request of a wildcard subscription without a response nonce
//     (the stream's first) is answered at once, even with nothing.
//  8. Order on one stream: the responses a flush sends leave in the order
//     Clusters, ClusterLoadAssignments, Listeners, RouteConfigurations, then
//     other types, and a stream's responses leave one at a time in the
//     order they were built, so CDS before EDS and LDS before RDS as a push
//     updated them.
//  9. A push never waits for a client: workers send to a stream at once
//     while its un-answered bytes stay under Options.SlowBytes and no
//     other send to it is in progress; otherwise the stream's send moves to
//     a goroutine of its own (the slow path), which sends in order.
//  10. A response is encoded once per body (the Source's wire.Response,
//     shared by every stream it goes to) and sent with the stream's nonce
//     as its only own bytes (Codec); nothing on the per-send path marshals,
//     allocates a map, touches a shared counter or reads the clock (a
//     worker reads it once per batch of streams, and StreamHooks.Response
//     is told the flush's time).
//  11. Route says which Source serves a type on a stream; an error it
//     returns ends the stream with that error (a gRPC status). A stream
//     whose first request Route hands off (ErrHandOff) is served by
//     Options.HandOff from that request on: go-control-plane's server, for
//     istiod's MCP streams.
//  12. The server's context ending ends its streams: ServerOptions' tap
//     handle derives every stream's context from it, so a handler blocked
//     reading its client returns and the stream ends (status Canceled,
//     written by grpc-go when Recv fails on the ended context).
//  13. A request is applied while no response of the stream is built and
//     unsent (the handler holds the stream's send lock): once a request
//     unsubscribes a name, no response sent after it carries the name
//     (go-control-plane#1498), and a SotW request that changes the names
//     never races a response it would have made stale.
//
// Not here: what each type contains and which names a change wakes (the
// Sources: xds/cache), the encodings (internal/wire), observing the streams
// (Hooks: package xds's callbacks).
package ads

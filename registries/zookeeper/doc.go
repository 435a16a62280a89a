// Package zookeeper is the registry type "zookeeper": it follows the Dubbo
// providers registered in a ZooKeeper ensemble, interface-level and Dubbo 3
// application-level, with watches (never by polling), and reports each
// Dubbo service (registries/dubbo) to a registries.Sink; with layout
// spring-cloud, Spring Cloud Zookeeper's instances instead (below).
//
// What it reads (Dubbo 3 documentation, "ZooKeeper registry"; the layout
// Java Dubbo 3 documents and dubbo-go writes — the tested provider is
// dubbo-go v3.3.2):
//
//   - /<root>/<interface>/providers/<URL-encoded provider URL>: one
//     ephemeral node per provider, interface and protocol (mode interface or
//     both). /<root>/<interface>/consumers and the configurators and
//     routers nodes are not read; consumer URLs are ignored.
//   - /services/<application>/<ip:port>: a Curator ServiceInstance JSON per
//     Dubbo 3 process, ephemeral (mode application or both).
//   - /<root>/mapping/<interface> (the comma-joined applications of an
//     interface, persistent and never cleaned up) is not an interface and is
//     not read: a mapping alone never makes a service with endpoints, and
//     application-level hosts come from /services.
//
// Rules:
//
//  1. Watches: ChildrenW on /<root> (interfaces appear and go), on each
//     /<root>/<interface>/providers and on /services and /services/<app>;
//     GetW on each /services/<app>/<instance>. A path that does not exist
//     yet gets an ExistsW for its creation. Every watch is re-armed when it
//     fires, by the read that follows; a path is never watched twice.
//  2. The registry's contract is Consul's (registries.Registry): one
//     authoritative Snapshot per service whenever it changes, Removed when
//     a service has no provider left (its interface, group and version, or
//     its application, has no registration), Synced once, after the first
//     complete listing.
//  3. Every established session (the first, a reconnect within the session
//     timeout, and a new session after expiry) re-lists everything: a
//     change missed while disconnected is found, and watches the client
//     dropped with an expired session are set again. A watch dropped
//     (EventNotWatching) while a session is established is re-read at once.
//  4. Outages: a lost connection, a failed read or a hung server is a
//     registries.Snapshot with Err for the whole registry (once per run of
//     the same failure; registries.Health logs one line down and one up);
//     nothing is removed, so endpoints are kept until ZooKeeper answers
//     again and says otherwise. A failed read while connected is retried
//     with a re-list after an exponential backoff (0.5 s to 30 s). An ACL
//     refusal (NoAuth) is marked registries.Permanent. A connection lost is
//     an outage even when the client is already connecting again by the
//     time the loop looks.
//  5. Provider nodes are ephemeral: a provider that stops without
//     deregistering (SIGKILL, a partition) keeps its node, and its endpoint,
//     until ZooKeeper expires its session (the provider's session timeout).
//     A dubbo-go provider stopped with SIGTERM removes
//     /services/<app>/<ip:port> at once but leaves its interface-level
//     nodes to session expiry.
//  6. Authentication: auth.scheme digest with user:password, added once per
//     session (the client re-sends it on reconnect).
//  7. A hung server (a stopped process: the kernel still accepts
//     connections, so the client sits connected and waits) is a down server
//     (registries.Liveness): an exists("/") probe every 2 s, left
//     unanswered for 5 s, takes the registry down as of when it was sent
//     (reason "hung"); its answer has the loop re-list at once, and a good
//     re-list brings the registry up. The client pauses 100 ms, doubling
//     to 1 s, after a round of every server without a session
//     (go-zookeeper pauses a fixed second, which a server that resumes
//     after expiring the session made it take once or twice). Reads re-arm
//     their watch in the same request, so a change between a watch firing
//     and its read's answer fires again.
//  8. What is sent follows registries.Reporter: a listing of every service
//     when the set changes (and on every re-list), then the services that
//     changed, and the removals the listing brings.
//  9. An application-level service's methods come from its MetadataInfo
//     when its instances keep it remote (dubbo.metadata.storage-type
//     remote): read once per revision at /<root>/metadata/<app>/<revision>
//     (Apache Dubbo Java) or /<root>/<app>/<revision> (dubbo-go), whichever
//     exists (registries/dubbo rule 9). Local metadata is served by each
//     process's MetadataService over the Dubbo protocol, which meshbridge
//     does not speak: such a service has no methods annotation.
//
// The Dubbo model (provider URLs, ServiceInstance JSON, the merge of one
// process's protocols, labels and methods) and its naming (the block's
// dubbo.interfaceHostTemplate and applicationHostTemplate) are
// registries/dubbo's.
//
// Layout spring-cloud (layout: spring-cloud; layout dubbo, the default, is
// the above) reads Spring Cloud Zookeeper discovery instead (Curator
// x-discovery, spring.go): one ephemeral node per instance at
// /<root>/<application>/<id> (root default /services, Spring's
// spring.cloud.zookeeper.discovery.root), holding Curator's ServiceInstance
// JSON with a ZookeeperInstance payload. Rules 1-8 hold, the root read as
// /services is (ChildrenW on the root and on each application, GetW on
// each instance); nothing else is read (no /dubbo, no metadata). Its own
// rules:
//
//  10. One service per application, named by the application; no Host, so
//     the registry's hostTemplate names it (default
//     {{.Service}}.zookeeper). An application is listed while it has an
//     instance node, served or not; without one it is removed.
//  11. An instance: ID "<application>/<node>" (the node is Curator's
//     instance id, a UUID for Spring), address (IP or hostname), port with
//     the protocol of metadata "protocol", else http; without a port, its
//     sslPort as https. One port per instance, as Eureka's (registries/eureka
//     servedPort says why). Labels are the payload's
//     metadata as written; locality from its region, zone and subzone.
//  12. Served only when its metadata instance_status is UP (any case) or
//     absent (Spring Cloud Zookeeper's rule: OUT_OF_SERVICE and the rest
//     are not served) and Curator's enabled is not false; a status change
//     (Spring rewrites the node) is seen by the data watch.
//  13. A node that is not a usable ServiceInstance (not JSON, no address,
//     neither port nor sslPort, a port outside 1-65535, another
//     application's name) is passed on as registries.InvalidInstance:
//     translate rejects it as malformed, logged and counted
//     (meshbridge_translate_rejected_instances_total), and the
//     application's other instances are served.
package zookeeper

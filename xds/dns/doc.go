// Package dns is the data stage between the ServiceEntry controller and
// the DiscoveryServer that resolves the DNS names in endpoints: an Updater
// is a serviceentry.XDSUpdater that wraps another one (the
// xds.DiscoveryServer) and hands it every endpoint whose address is a DNS
// name (a DNS-resolution service's instances registered by hostname, such
// as Spring Cloud Consul's default) as the addresses the name resolves to.
// gRPC C-core and grpc-java accept only IP addresses in a
// ClusterLoadAssignment and NACK the whole assignment, its IP endpoints
// too, when one endpoint is a name; grpc-go would dial the name; a
// LOGICAL_DNS cluster (gRFC A37) holds one name, not a set of instances
// with their weights and localities. So, as Envoy's STRICT_DNS cluster does
// for a sidecar:
//  1. an endpoint whose address is a name becomes one endpoint per address
//     the name resolves to, each with the endpoint's port, weight, locality
//     and labels; until the name first resolves it contributes none
//     (EDSUpdate, EDSCacheUpdate; the result goes to the wrapped updater by
//     the same method);
//  2. every name in use is resolved again every Options.RefreshRate (config
//     key xds.dnsRefreshRate, after Envoy's dns_refresh_rate; 0 looks a
//     name up once, when first used); a changed set of addresses is handed
//     on as an EDSUpdate, started now, of every shard using it;
//  3. a lookup that fails keeps the name's last addresses (a DNS outage
//     never removes endpoints, as a registry outage does not), is logged
//     once per failure run and counted (meshbridge_xds_dns_lookups_total);
//  4. a name no endpoint uses any more is forgotten at the next refresh; a
//     service's shards are dropped with SvcUpdate(EventDelete).
//
// Everything else passes through as it is: a shard without names (the same
// slice), SvcUpdate and ConfigUpdate. Which push a change needs is the
// wrapped server's rule (package xds, doc rule 1).
//
// The Kubernetes and MCP outputs carry the names as they are, with
// resolution DNS: the sidecars resolve them.
//
// Concurrency: the XDSUpdater methods may be called from any goroutine and
// never block on DNS (a name not yet resolved is handed on when it is);
// a shard is handed on under one mutex, so that an update from the
// controller and a re-resolution never reach the wrapped updater out of
// order. Run does the lookups, one at a time. Not here: push decisions
// (serviceentry, xds), serving (xds).
package dns

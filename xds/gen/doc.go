// Package gen builds the xDS resources meshbridge serves, as pure
// functions of a service (model.Service) and its endpoints: Clusters,
// Listeners and RouteConfigurations (Resources) and ClusterLoadAssignments
// (EncodeEndpoints, LoadAssignments), each held as its encoding (Encoded)
// so that the caches marshal nothing again.
//
// Rules:
//  1. Names follow istiod: cluster and ClusterLoadAssignment
//     "outbound|<port>||<host>", proxyless listener and route
//     "<host>:<port>" (docs/design.md §6). names.go.
//  2. Clusters are type EDS, also for DNS resolution: grpc-go supports only
//     EDS, LOGICAL_DNS and aggregate clusters (gRFC A27); HTTP/2 upstream
//     options for grpc and http2 ports. cds.go.
//  3. Listeners (an HttpConnectionManager api_listener fetching the route of
//     the same name over ADS, router filter last, gRFC A39; the fault filter
//     before it when the routes inject faults) and routes (one virtual
//     host: the VirtualService's HTTP routes in order, else prefix "/" to
//     the port's cluster) are built for every port: proxyless gRPC clients
//     ask by name. lds.go, rds.go, routing.go.
//  7. Traffic policy: a DestinationRule's traffic policy in the port's
//     cluster (policy.go) and a VirtualService's routes (routing.go), in
//     fields every gRPC client accepts, except the Features some lack: a
//     resource using one is a Varied, built once more per set of lacking
//     features (features.go). What is not served is named (Unserved,
//     UnservedRouting).
//  4. A ClusterLoadAssignment has one locality per distinct locality, sorted,
//     weights ≥ 1 (lbWeight, the one place a weight is normalised), no
//     duplicate address:port (the first in shard order wins), and weights
//     whose sum fits in a uint32 (grpc-go and Envoy refuse a larger sum per
//     locality and per priority): past it every weight is scaled down by
//     one factor, ratios kept, each at least 1 (weightScale). A port without
//     endpoints gets an empty assignment. eds.go.
//  5. An endpoint's LbEndpoint is encoded when it arrives and kept while its
//     address, port and weight stay (EncodeEndpoints); "the same endpoint
//     for clients" is SameForClients, the one definition the endpoint
//     shards push by. An assignment is assembled from those encodings
//     (internal/wire), byte for byte what proto.Marshal gives for
//     BuildLoadAssignments' message; where a string is not valid UTF-8, or
//     the weights are scaled, the message itself is returned, so the
//     cache's marshal fails as proto.Marshal's does, or carries the scaled
//     weights. endpoint.go, eds.go.
//  6. An Encoded marshals as its encoding, shared, without a copy; every
//     other use of the proto API decodes it once; it is read-only.
//     encoded.go.
//
// Concurrency: every function is pure; Endpoints and Encoded resources are
// immutable and safe to share. Not here: which services and endpoints there
// are, push decisions and caches (package xds, xds/cache).
package gen

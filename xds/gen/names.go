package gen

import (
	"net"
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshbridge/meshbridge/model"
)

// ClusterName returns the name of the cluster (and of its
// ClusterLoadAssignment) for one service port: "outbound|<port>||<host>",
// istiod's naming (Istio pilot/pkg/model.BuildSubsetKey with no subset), so
// that dashboards and tooling written for istiod keep working.
func ClusterName(port uint32, host string) string {
	return SubsetClusterName(port, "", host)
}

// SubsetClusterName returns the name of the cluster (and of its
// ClusterLoadAssignment) of one DestinationRule subset of a service port:
// "outbound|<port>|<subset>|<host>", Istio's BuildSubsetKey; ClusterName's
// for subset "".
func SubsetClusterName(port uint32, subset, host string) string {
	return "outbound|" + strconv.FormatUint(uint64(port), 10) + "|" + subset + "|" + host
}

// ClusterNames returns the names of every cluster of svc: per port (in
// svc.Ports' order) the port's cluster, then one per subset of its
// DestinationRule, in the rule's order. It is the one list the
// generators (Resources, LoadAssignments) and the xDS server's removals
// of vanished clusters follow.
func ClusterNames(svc *model.Service) []string {
	subsets := svc.Policy.GetSubsets()
	out := make([]string, 0, len(svc.Ports)*(1+len(subsets)))
	for _, p := range svc.Ports {
		out = append(out, ClusterName(p.Number, svc.Hostname))
		for _, sub := range subsets {
			out = append(out, SubsetClusterName(p.Number, sub.GetName(), svc.Hostname))
		}
	}
	return out
}

// ListenerName returns the name of the proxyless gRPC Listener and of its
// RouteConfiguration for one service port: "<host>:<port>", the name a
// grpc-go client asks for when it dials xds:///<host>:<port>.
func ListenerName(port uint32, host string) string {
	return net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
}

// adsConfigSource points a cluster's EDS or a listener's RDS at the ADS stream
// the client already has open.
func adsConfigSource() *core.ConfigSource {
	return &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
	}
}

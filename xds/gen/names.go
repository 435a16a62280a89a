package gen

import (
	"net"
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// ClusterName returns the name of the cluster (and of its
// ClusterLoadAssignment) for one service port: "outbound|<port>||<host>",
// istiod's naming (Istio pilot/pkg/model.BuildSubsetKey with no subset), so
// that dashboards and tooling written for istiod keep working.
func ClusterName(port uint32, host string) string {
	return "outbound|" + strconv.FormatUint(uint64(port), 10) + "||" + host
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

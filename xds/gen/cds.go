package gen

import (
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// connectTimeout is istiod's default cluster connect timeout (MeshConfig
// connectTimeout 10s); Envoy's own default of 5s would differ from istiod's.
const connectTimeout = 10 * time.Second

// httpProtocolOptionsKey is the typed_extension_protocol_options key Envoy
// reads upstream HTTP options from.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// buildClusters returns one EDS cluster per service port and per port and
// DestinationRule subset, keyed by name.
//
// Every cluster is type EDS, also for DNS resolution: grpc-go supports only
// EDS, LOGICAL_DNS and aggregate clusters (gRFC A27/A37), so STRICT_DNS would
// be NACKed; a DNS-resolution service's endpoints go into its
// ClusterLoadAssignment, resolved by the bridge (package xds/dns).
func buildClusters(services []*model.Service) map[string]*cluster.Cluster {
	out := make(map[string]*cluster.Cluster)
	for _, svc := range services {
		for _, port := range svc.Ports {
			c, _ := clusterFor(svc, port, nil, 0)
			out[c.Name] = c
			for _, sub := range svc.Policy.GetSubsets() {
				c, _ := clusterFor(svc, port, sub, 0)
				out[c.Name] = c
			}
		}
	}
	return out
}

// clusterFor returns the cluster of svc's port, or of that port's subset
// sub (nil: the port's own), for a client lacking the features lacks:
// buildCluster's, with the port's traffic policy of svc's DestinationRule,
// the subset's over it (policy.go); substituted names what the client is
// served instead of what the policy asks.
func clusterFor(svc *model.Service, port model.Port, sub *networking.Subset, lacks Features) (c *cluster.Cluster, substituted []string) {
	if sub == nil {
		c = buildCluster(ClusterName(port.Number, svc.Hostname), port)
		return c, applyTrafficPolicy(c, servedPolicy(svc, port.Number), lacks)
	}
	c = buildCluster(SubsetClusterName(port.Number, sub.GetName(), svc.Hostname), port)
	return c, applyTrafficPolicy(c, subsetPolicy(svc, sub, port.Number), lacks)
}

func buildCluster(name string, port model.Port) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{
			EdsConfig:   adsConfigSource(),
			ServiceName: name,
		},
		LbPolicy:       cluster.Cluster_ROUND_ROBIN,
		ConnectTimeout: durationpb.New(connectTimeout),
	}
	if port.Protocol == model.ProtocolGRPC || port.Protocol == model.ProtocolHTTP2 {
		// Envoy speaks HTTP/1.1 upstream unless told otherwise; gRPC needs
		// HTTP/2. grpc-go ignores this field.
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: http2Options}
	}
	return c
}

// http2Options is shared read-only by every HTTP/2 cluster.
var http2Options = mustAny(&upstreamhttp.HttpProtocolOptions{
	UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
				Http2ProtocolOptions: &core.Http2ProtocolOptions{},
			},
		},
	},
})

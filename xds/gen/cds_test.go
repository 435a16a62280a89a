package gen

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshbridge/meshbridge/model"
)

func TestClusterName(t *testing.T) {
	assertEqual(t, "outbound|8080||web.service.consul", ClusterName(8080, "web.service.consul"))
	assertEqual(t, "web.service.consul:8080", ListenerName(8080, "web.service.consul"))
}

func TestBuildClusters(t *testing.T) {
	edsCluster := func(name string, http2 bool) *cluster.Cluster {
		c := &cluster.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource(), ServiceName: name},
			LbPolicy:             cluster.Cluster_ROUND_ROBIN,
			ConnectTimeout:       durationpb.New(connectTimeout),
		}
		if http2 {
			c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: http2Options}
		}
		return c
	}
	tests := map[string]struct {
		services []*model.Service
		want     map[string]*cluster.Cluster
	}{
		"no services give no clusters": {
			want: map[string]*cluster.Cluster{},
		},
		"one EDS cluster per port, HTTP/2 options only for grpc and http2": {
			services: []*model.Service{{Hostname: "a.local", Ports: []model.Port{
				{Name: "grpc-80", Number: 80, Protocol: model.ProtocolGRPC},
				{Name: "http-81", Number: 81, Protocol: model.ProtocolHTTP},
				{Name: "http2-82", Number: 82, Protocol: model.ProtocolHTTP2},
				{Name: "tcp-83", Number: 83, Protocol: model.ProtocolTCP},
			}}},
			want: map[string]*cluster.Cluster{
				"outbound|80||a.local": edsCluster("outbound|80||a.local", true),
				"outbound|81||a.local": edsCluster("outbound|81||a.local", false),
				"outbound|82||a.local": edsCluster("outbound|82||a.local", true),
				"outbound|83||a.local": edsCluster("outbound|83||a.local", false),
			},
		},
		"DNS resolution still gives an EDS cluster, which grpc-go supports": {
			services: []*model.Service{{Hostname: "d.local", Resolution: model.ResolutionDNS, Ports: []model.Port{
				{Name: "tcp-90", Number: 90, Protocol: model.ProtocolTCP},
			}}},
			want: map[string]*cluster.Cluster{"outbound|90||d.local": edsCluster("outbound|90||d.local", false)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, buildClusters(tc.services))
		})
	}
}

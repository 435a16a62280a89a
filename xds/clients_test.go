package xds

import (
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/xds/bootstrap"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// TestClientTable: each client family and version is served the features
// its row accepts from the version it is known from, and TLS clusters only
// when its node also declares the certificate provider they name; any
// other client only what every client accepts.
func TestClientTable(t *testing.T) {
	grpcOnly := gen.RandomLB // what every gRPC client lacks: RANDOM
	noLR := gen.RandomLB | gen.LeastRequest
	tls := gen.UpstreamTLS
	cases := []struct {
		name, version string
		provider      string // node metadata CERTIFICATE_PROVIDER
		family        string
		lacks         gen.Features
	}{
		{"gRPC Go", "1.85.0", "default", "grpc-go", grpcOnly},
		{"gRPC Go", "1.85.0", "", "grpc-go", grpcOnly | tls},
		{"gRPC Go", "1.85.0", "other", "grpc-go", grpcOnly | tls},
		{"gRPC Go", "1.73.0", "", "grpc-go", grpcOnly | tls},
		{"gRPC Go", "1.73.0-dev", "", "grpc-go", grpcOnly | tls},
		{"gRPC Go", "1.72.2", "", "grpc-go", noLR | tls},
		{"gRPC Go", "1.41.0", "default", "grpc-go", noLR},
		{"gRPC Go", "1.40.0", "default", "grpc-go", gen.AllFeatures},
		{"gRPC Go", "", "default", "grpc-go", gen.AllFeatures},
		{"gRPC Java", "1.85.1", "default", "grpc-java", grpcOnly},
		{"gRPC Java", "1.85.1", "", "grpc-java", grpcOnly | tls},
		{"gRPC Java", "1.48.0", "default", "grpc-java", grpcOnly | tls},
		{"gRPC Java", "1.47.1", "", "grpc-java", noLR | tls},
		{"gRPC C-core linux Python", "C-core 29.0.0 Python 1.51.1", "default", "grpc-c-core", gen.AllFeatures &^ tls},
		{"gRPC C-core linux Python", "C-core 29.0.0 Python 1.51.1", "", "grpc-c-core", gen.AllFeatures},
		{"gRPC C-core linux", "C-core 28.0.0", "default", "grpc-c-core", gen.AllFeatures},
		{"gRPC C-core linux", "C-core 45.0.0", "default", "grpc-c-core", noLR},
		{"gRPC Node Pure JS", "1.14.1", "default", "grpc-js", noLR},
		{"gRPC Node Pure JS", "1.14.1", "", "grpc-js", noLR | tls},
		{"gRPC Node Pure JS", "1.10.1", "default", "grpc-js", noLR | tls},
		{"gRPC Node Pure JS", "1.9.0", "", "grpc-js", gen.AllFeatures},
		{"envoy", "", "", "envoy", tls},
		{"", "", "default", familyUnknown, gen.AllFeatures},
		{"gRPC Rust", "0.1.0", "", familyUnknown, gen.AllFeatures},
		{"grpc go", "1.85.0", "default", familyUnknown, gen.AllFeatures},
	}
	for _, tc := range cases {
		n := &core.Node{UserAgentName: tc.name, UserAgentVersionType: &core.Node_UserAgentVersion{UserAgentVersion: tc.version}}
		if tc.provider != "" {
			n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{
				bootstrap.MetadataCertificateProvider: structpb.NewStringValue(tc.provider)}}
		}
		a := agentOf(n)
		if a.family != tc.family || a.lacks != tc.lacks {
			t.Errorf("%q %q provider %q: family %s lacking %v, want %s lacking %v", tc.name, tc.version, tc.provider,
				a.family, a.lacks.Names(), tc.family, tc.lacks.Names())
		}
	}
}

// TestLoadBalancerPerClient: a DestinationRule asking LEAST_REQUEST
// reaches a client whose row accepts it (grpc-go ≥ 1.73) as lb_policy
// LEAST_REQUEST, and one lacking it (grpc-js) as ROUND_ROBIN; the
// substitution is counted and shown on the stream.
func TestLoadBalancerPerClient(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	ts.SetPolicies(hostPolicies{"a.local": {Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
		LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
			Simple: networking.LoadBalancerSettings_LEAST_REQUEST}}}}})
	ts.waitPushes(t, 1)
	node := func(id, agent, version string) *core.Node {
		n := grpcNode()
		n.Id, n.UserAgentName, n.UserAgentVersionType = id, agent, &core.Node_UserAgentVersion{UserAgentVersion: version}
		return n
	}
	substitutedBefore := testutil.ToFloat64(policySubstitutions.WithLabelValues("grpc-js", "loadBalancer.simple:LEAST_REQUEST"))
	var jsStreams []*deltaClient
	lbOf := func(n *core.Node) map[string]cluster.Cluster_LbPolicy {
		c := openDelta(t, rawClient(t, ts.Addr().String()))
		if n.GetId() == "js" {
			jsStreams = append(jsStreams, c)
		}
		c.send(&discovery.DeltaDiscoveryRequest{Node: n, TypeUrl: resourcev3.ClusterType, ResourceNamesSubscribe: []string{"*"}})
		resp := c.next(t)
		out := map[string]cluster.Cluster_LbPolicy{}
		for _, r := range resp.GetResources() {
			var got cluster.Cluster
			if err := r.GetResource().UnmarshalTo(&got); err != nil {
				t.Fatal(err)
			}
			out[got.GetName()] = got.GetLbPolicy()
		}
		return out
	}
	goLB := lbOf(node("go", "gRPC Go", "1.85.0"))
	jsLB := lbOf(node("js", "gRPC Node Pure JS", "1.14.1"))
	assertEqual(t, map[string]cluster.Cluster_LbPolicy{clusterA: cluster.Cluster_LEAST_REQUEST, clusterB: cluster.Cluster_ROUND_ROBIN}, goLB)
	assertEqual(t, map[string]cluster.Cluster_LbPolicy{clusterA: cluster.Cluster_ROUND_ROBIN, clusterB: cluster.Cluster_ROUND_ROBIN}, jsLB)
	if got := testutil.ToFloat64(policySubstitutions.WithLabelValues("grpc-js", "loadBalancer.simple:LEAST_REQUEST")) - substitutedBefore; got != 1 {
		t.Errorf("substitutions counted for grpc-js: %v, want 1", got)
	}
	for _, s := range ts.SyncStatus().Streams {
		var want []string
		if s.Node == "js" {
			want = []string{"loadBalancer.simple:LEAST_REQUEST"}
		}
		if !slices.Equal(s.Substituted, want) {
			t.Errorf("stream of %s shows substituted %q, want %q", s.Node, s.Substituted, want)
		}
		if s.Family == "" || s.UserAgent == "" {
			t.Errorf("stream of %s shows no client family or user agent: %+v", s.Node, s)
		}
	}

	// A node's streams share its record: a second stream of js closing
	// leaves it to the first; the last one closing drops it.
	substitutedOf := func(node string) (open int, substituted []string) {
		for _, s := range ts.SyncStatus().Streams {
			if s.Node == node {
				open++
				substituted = s.Substituted
			}
		}
		return open, substituted
	}
	lbOf(node("js", "gRPC Node Pure JS", "1.14.1"))
	jsStreams[1].cancel()
	eventually(t, "js's second stream closed", func() bool { n, _ := substitutedOf("js"); return n == 1 })
	if _, got := substitutedOf("js"); !slices.Equal(got, []string{"loadBalancer.simple:LEAST_REQUEST"}) {
		t.Errorf("js's first stream shows substituted %q once its second closed", got)
	}
	jsStreams[0].cancel()
	eventually(t, "js's streams closed", func() bool { n, _ := substitutedOf("js"); return n == 0 })
	// A closing stream leaves the streams' table before it releases its
	// node's record (callbacks.closed): wait for the record, bounded.
	subs := ts.listeners[listenerXDS].subs
	eventually(t, "js's record dropped after its streams closed", func() bool {
		subs.mu.Lock()
		defer subs.mu.Unlock()
		return len(subs.byNode["js"]) == 0 && subs.streams["js"] == 0
	})
}

package gen

import (
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// TestClusterTrafficPolicy: what a DestinationRule's traffic policy puts
// in a port's cluster (gRFC A50 outlier detection, A32 circuit breaking),
// port-level settings replacing the top-level ones per setting as in
// Istio.
func TestClusterTrafficPolicy(t *testing.T) {
	ejection := func(n uint32, interval, base time.Duration, maxPercent uint32) *cluster.OutlierDetection {
		od := &cluster.OutlierDetection{
			EnforcingSuccessRate:           wrapperspb.UInt32(0),
			FailurePercentageThreshold:     wrapperspb.UInt32(50),
			EnforcingFailurePercentage:     wrapperspb.UInt32(100),
			FailurePercentageMinimumHosts:  wrapperspb.UInt32(2),
			FailurePercentageRequestVolume: wrapperspb.UInt32(n),
		}
		if interval > 0 {
			od.Interval = durationpb.New(interval)
		}
		if base > 0 {
			od.BaseEjectionTime = durationpb.New(base)
		}
		if maxPercent > 0 {
			od.MaxEjectionPercent = wrapperspb.UInt32(maxPercent)
		}
		return od
	}
	maxRequests := func(n uint32) *cluster.CircuitBreakers {
		return &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
			Priority: core.RoutingPriority_DEFAULT, MaxRequests: wrapperspb.UInt32(n)}}}
	}
	u32 := wrapperspb.UInt32
	port := func(n uint32) *networking.PortSelector { return &networking.PortSelector{Number: n} }
	cases := map[string]struct {
		policy      *networking.TrafficPolicy
		wantOutlier *cluster.OutlierDetection
		wantCB      *cluster.CircuitBreakers
	}{
		"no policy": {},
		"consecutive 5xx errors, interval, ejection time and percent": {
			policy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{
				Consecutive_5XxErrors: u32(3), Interval: durationpb.New(time.Second),
				BaseEjectionTime: durationpb.New(30 * time.Second), MaxEjectionPercent: 50}},
			wantOutlier: ejection(3, time.Second, 30*time.Second, 50),
		},
		"an empty block ejects after Envoy's default of 5": {
			policy:      &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{}},
			wantOutlier: ejection(5, 0, 0, 0),
		},
		"the smaller of the 5xx and gateway counts": {
			policy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{
				Consecutive_5XxErrors: u32(7), ConsecutiveGatewayErrors: u32(4)}},
			wantOutlier: ejection(4, 0, 0, 0),
		},
		"a count of 0 turns ejection off": {
			policy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(0)}},
		},
		"0 for 5xx and a gateway count ejects on the gateway count": {
			policy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{
				Consecutive_5XxErrors: u32(0), ConsecutiveGatewayErrors: u32(2)}},
			wantOutlier: ejection(2, 0, 0, 0),
		},
		"http2MaxRequests is the cluster's max_requests": {
			policy: &networking.TrafficPolicy{ConnectionPool: &networking.ConnectionPoolSettings{
				Http: &networking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 100}}},
			wantCB: maxRequests(100),
		},
		"a port-level setting replaces the top-level one for its port": {
			policy: &networking.TrafficPolicy{
				OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(9)},
				ConnectionPool: &networking.ConnectionPoolSettings{
					Http: &networking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 100}},
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
					Port: port(8080), OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(2)}}},
			},
			wantOutlier: ejection(2, 0, 0, 0),
			wantCB:      maxRequests(100),
		},
		"another port's setting does not apply": {
			policy: &networking.TrafficPolicy{PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
				Port: port(9090), OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(2)}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 8080, Protocol: model.ProtocolGRPC}}}
			if tc.policy != nil {
				svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: tc.policy}
			}
			c := clusterFor(svc, svc.Ports[0])
			assertEqual(t, tc.wantOutlier, c.OutlierDetection)
			assertEqual(t, tc.wantCB, c.CircuitBreakers)
			assertEqual(t, cluster.Cluster_ROUND_ROBIN, c.LbPolicy)
		})
	}
}

// TestUnserved: every set field of a traffic policy that no cluster
// carries is named, as written in YAML; the served ones are not.
func TestUnserved(t *testing.T) {
	u32 := wrapperspb.UInt32
	cases := map[string]struct {
		policy *networking.TrafficPolicy
		want   []string
	}{
		"nothing": {},
		"served fields only": {policy: &networking.TrafficPolicy{
			LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
				Simple: networking.LoadBalancerSettings_ROUND_ROBIN}},
			OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(3), Interval: durationpb.New(time.Second)},
			PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 80},
				ConnectionPool: &networking.ConnectionPoolSettings{
					Http: &networking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 10}}}},
		}},
		"unserved fields and balancers": {
			policy: &networking.TrafficPolicy{
				LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
					Simple: networking.LoadBalancerSettings_LEAST_REQUEST}},
				OutlierDetection: &networking.OutlierDetection{MinHealthPercent: 50},
				ConnectionPool: &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{
					MaxConnections: 10}},
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 80},
					LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
						Simple: networking.LoadBalancerSettings_RANDOM}},
					Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE}}},
			},
			want: []string{
				"connectionPool.tcp.maxConnections",
				"loadBalancer.simple: LEAST_REQUEST (served as ROUND_ROBIN)",
				"outlierDetection.minHealthPercent",
				"portLevelSettings[0].loadBalancer.simple: RANDOM (served as ROUND_ROBIN)",
				"portLevelSettings[0].tls.mode",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, Unserved(tc.policy))
		})
	}
}

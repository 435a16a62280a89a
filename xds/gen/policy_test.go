package gen

import (
	"slices"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
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
		"an explicit locality failover ejects a priority's last address": {
			policy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(3)},
				LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
					FailoverPriority: []string{"tier"}}}},
			wantOutlier: func() *cluster.OutlierDetection {
				od := ejection(3, 0, 0, 0)
				od.FailurePercentageMinimumHosts = u32(1)
				return od
			}(),
		},
		"locality load balancing turned off keeps the minimum": {
			policy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: u32(3)},
				LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
					Enabled: wrapperspb.Bool(false)}}},
			wantOutlier: ejection(3, 0, 0, 0),
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
			c, substituted := clusterFor(svc, svc.Ports[0], nil, AllFeatures)
			assertEqual(t, []string(nil), substituted)
			assertEqual(t, tc.wantOutlier, c.OutlierDetection)
			assertEqual(t, tc.wantCB, c.CircuitBreakers)
			assertEqual(t, cluster.Cluster_ROUND_ROBIN, c.LbPolicy)
		})
	}
}

// TestUnserved: every set field of a traffic policy that no cluster
// carries is named, as written in YAML; the served ones are not.
func TestUnenforced(t *testing.T) {
	pool := func(n int32) *networking.ConnectionPoolSettings {
		return &networking.ConnectionPoolSettings{Http: &networking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: n}}
	}
	const grpcJava = " (not enforced by grpc-java, which counts calls in flight only with load reporting)"
	cases := map[string]struct {
		policy *networking.TrafficPolicy
		want   []string
	}{
		"nothing":         {},
		"no limit":        {policy: &networking.TrafficPolicy{ConnectionPool: pool(0)}},
		"top-level limit": {policy: &networking.TrafficPolicy{ConnectionPool: pool(10)}, want: []string{"connectionPool.http.http2MaxRequests" + grpcJava}},
		"port-level limits": {
			policy: &networking.TrafficPolicy{PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{
				{Port: &networking.PortSelector{Number: 80}},
				{Port: &networking.PortSelector{Number: 81}, ConnectionPool: pool(5)}}},
			want: []string{"portLevelSettings[1].connectionPool.http.http2MaxRequests" + grpcJava},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Unenforced(tc.policy); !slices.Equal(got, tc.want) {
				t.Errorf("Unenforced = %q, want %q", got, tc.want)
			}
		})
	}
}

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
		"locality load balancing is served": {policy: &networking.TrafficPolicy{
			OutlierDetection: &networking.OutlierDetection{},
			LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
				Enabled: wrapperspb.Bool(true), FailoverPriority: []string{"tier"},
				Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "r1", To: "r2"}}}},
		}},
		"locality failover without outlier detection does nothing": {
			policy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LocalityLbSetting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"tier"}}}},
			want: []string{"loadBalancer.localityLbSetting failover (applies only with outlierDetection, as in Istio)"},
		},
		"unserved fields and balancers": {
			policy: &networking.TrafficPolicy{
				LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
					Simple: networking.LoadBalancerSettings_PASSTHROUGH}},
				OutlierDetection: &networking.OutlierDetection{MinHealthPercent: 50},
				ConnectionPool: &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{
					MaxConnections: 10}},
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 80},
					LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
						Simple: networking.LoadBalancerSettings_RANDOM}},
					Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE, SubjectAltNames: []string{"a"},
						Sni: "backend.example", CaCertificates: "/etc/certs/ca.pem"}}},
			},
			want: []string{
				"connectionPool.tcp.maxConnections",
				"loadBalancer.simple: PASSTHROUGH (served as ROUND_ROBIN)",
				"outlierDetection.minHealthPercent",
				"portLevelSettings[0].tls.caCertificates (proxyless clients verify with their bootstrap's certificate provider)",
				"portLevelSettings[0].tls.sni (gRPC sets no SNI from xDS)",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, Unserved(tc.policy))
		})
	}
}

// TestClusterLoadBalancer: loadBalancer.simple per client: the asked
// policy to a client accepting its feature, round robin and a named
// substitution to one lacking it (gRFC A48: only some gRPC clients
// implement LEAST_REQUEST; none implements RANDOM).
func TestClusterLoadBalancer(t *testing.T) {
	simple := func(lb networking.LoadBalancerSettings_SimpleLB) *networking.TrafficPolicy {
		return &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
			LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: lb}}}
	}
	cases := map[string]struct {
		policy          *networking.TrafficPolicy
		lacks           Features
		want            cluster.Cluster_LbPolicy
		wantSubstituted []string
	}{
		"no policy":                              {want: cluster.Cluster_ROUND_ROBIN},
		"ROUND_ROBIN":                            {policy: simple(networking.LoadBalancerSettings_ROUND_ROBIN), lacks: AllFeatures, want: cluster.Cluster_ROUND_ROBIN},
		"LEAST_REQUEST to a client accepting it": {policy: simple(networking.LoadBalancerSettings_LEAST_REQUEST), lacks: RandomLB, want: cluster.Cluster_LEAST_REQUEST},
		"LEAST_REQUEST to a client lacking it":   {policy: simple(networking.LoadBalancerSettings_LEAST_REQUEST), lacks: LeastRequest, want: cluster.Cluster_ROUND_ROBIN, wantSubstituted: []string{"loadBalancer.simple:LEAST_REQUEST"}},
		"LEAST_CONN is LEAST_REQUEST":            {policy: simple(networking.LoadBalancerSettings_LEAST_CONN), want: cluster.Cluster_LEAST_REQUEST},
		"RANDOM to Envoy":                        {policy: simple(networking.LoadBalancerSettings_RANDOM), want: cluster.Cluster_RANDOM},
		"RANDOM to a gRPC client":                {policy: simple(networking.LoadBalancerSettings_RANDOM), lacks: RandomLB, want: cluster.Cluster_ROUND_ROBIN, wantSubstituted: []string{"loadBalancer.simple:RANDOM"}},
		"PASSTHROUGH is not served (Unserved)":   {policy: simple(networking.LoadBalancerSettings_PASSTHROUGH), want: cluster.Cluster_ROUND_ROBIN},
		"a port-level balancer replaces the top's": {
			policy: &networking.TrafficPolicy{
				LoadBalancer: simple(networking.LoadBalancerSettings_RANDOM).LoadBalancer,
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 8080},
					LoadBalancer: simple(networking.LoadBalancerSettings_LEAST_REQUEST).LoadBalancer}},
			},
			lacks: RandomLB, want: cluster.Cluster_LEAST_REQUEST,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 8080, Protocol: model.ProtocolGRPC}}}
			if tc.policy != nil {
				svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: tc.policy}
			}
			c, substituted := clusterFor(svc, svc.Ports[0], nil, tc.lacks)
			assertEqual(t, tc.want, c.LbPolicy)
			assertEqual(t, tc.wantSubstituted, substituted)
		})
	}
}

// TestVariedClusters: a cluster whose balancer some clients lack is a
// Varied: its own encoding is the cluster for a client lacking nothing,
// and each profile lacking a feature it uses gets the cluster built for
// it, byte for byte; a cluster using no such feature is a plain Encoded.
func TestVariedClusters(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Ports: []model.Port{
		{Name: "grpc", Number: 8080, Protocol: model.ProtocolGRPC}, {Name: "http", Number: 9090, Protocol: model.ProtocolHTTP}}}
	svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
		PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 8080},
			LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
				Simple: networking.LoadBalancerSettings_LEAST_REQUEST}}}}}}
	clusters, _, _ := Resources(svc)
	if _, ok := clusters[1].(*Encoded); !ok {
		t.Fatalf("the cluster of a port without a varying policy is a %T, want *Encoded", clusters[1])
	}
	v, ok := clusters[0].(*Varied)
	if !ok {
		t.Fatalf("the LEAST_REQUEST cluster is a %T, want *Varied", clusters[0])
	}
	marshal := func(c *cluster.Cluster) []byte {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	own, _ := clusterFor(svc, svc.Ports[0], nil, 0)
	assertEqual(t, marshal(own), v.Encoding())
	for p := range NumProfiles {
		wire, substituted := v.Variant(p)
		if Features(p)&LeastRequest == 0 {
			if wire != nil || substituted != nil {
				t.Errorf("profile %d (lacking %v) has a variant; want the own encoding", p, Features(p).Names())
			}
			continue
		}
		want, wantSubstituted := clusterFor(svc, svc.Ports[0], nil, Features(p))
		assertEqual(t, marshal(want), wire)
		assertEqual(t, wantSubstituted, substituted)
	}
}

// TestRingHash: a consistentHash load balancer is the cluster's RING_HASH
// with xxHash and the minimum ring size asked (Istio's 1024 by default,
// gRPC's 8M at most), and the route's hash_policy: the header asked, or
// the client channel for useSourceIp (gRFC A42); a client lacking ring
// hash gets round robin.
func TestRingHash(t *testing.T) {
	consistent := func(ch *networking.LoadBalancerSettings_ConsistentHashLB) *networking.TrafficPolicy {
		return &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
			LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{ConsistentHash: ch}}}
	}
	header := &networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName{HttpHeaderName: "X-User"}
	cases := map[string]struct {
		policy   *networking.TrafficPolicy
		wantSize uint64
		wantHash []*route.RouteAction_HashPolicy
	}{
		"a header, the default ring": {policy: consistent(&networking.LoadBalancerSettings_ConsistentHashLB{HashKey: header}),
			wantSize: 1024, wantHash: []*route.RouteAction_HashPolicy{{PolicySpecifier: &route.RouteAction_HashPolicy_Header_{
				Header: &route.RouteAction_HashPolicy_Header{HeaderName: "x-user"}}}}},
		"the source: the channel, ringHash's size": {policy: consistent(&networking.LoadBalancerSettings_ConsistentHashLB{
			HashKey:       &networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true},
			HashAlgorithm: &networking.LoadBalancerSettings_ConsistentHashLB_RingHash_{RingHash: &networking.LoadBalancerSettings_ConsistentHashLB_RingHash{MinimumRingSize: 4096}}}),
			wantSize: 4096, wantHash: []*route.RouteAction_HashPolicy{{PolicySpecifier: &route.RouteAction_HashPolicy_FilterState_{
				FilterState: &route.RouteAction_HashPolicy_FilterState{Key: "io.grpc.channel_id"}}}}},
		"a cookie hashes nothing; the deprecated size, capped": {policy: consistent(&networking.LoadBalancerSettings_ConsistentHashLB{
			HashKey:         &networking.LoadBalancerSettings_ConsistentHashLB_HttpCookie{HttpCookie: &networking.LoadBalancerSettings_ConsistentHashLB_HTTPCookie{Name: "c"}},
			MinimumRingSize: 1 << 30}),
			wantSize: 8 << 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 8080, Protocol: model.ProtocolGRPC}},
				Policy: &networking.DestinationRule{Host: "a.local", TrafficPolicy: tc.policy}}
			c, _ := clusterFor(svc, svc.Ports[0], nil, AllFeatures&^RingHash)
			assertEqual(t, cluster.Cluster_RING_HASH, c.LbPolicy)
			// A client lacking ring hash: round robin, named.
			rr, substituted := clusterFor(svc, svc.Ports[0], nil, RingHash)
			assertEqual(t, cluster.Cluster_ROUND_ROBIN, rr.LbPolicy)
			assertEqual(t, []string{"loadBalancer.consistentHash"}, substituted)
			assertEqual(t, &cluster.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(tc.wantSize),
				HashFunction: cluster.Cluster_RingHashLbConfig_XX_HASH}, c.GetRingHashLbConfig())
			rc, _ := routeFor(svc, 8080)
			assertEqual(t, tc.wantHash, rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetHashPolicy())
		})
	}
}

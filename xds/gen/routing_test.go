package gen

import (
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// TestVirtualServiceRoutes: what a VirtualService's HTTP routes become in
// a proxyless listener's routes (gRFC A28, A31, A44, A33).
func TestVirtualServiceRoutes(t *testing.T) {
	const host, port = "a.local", 8080
	dest := func(h string, p, w uint32) *networking.HTTPRouteDestination {
		d := &networking.HTTPRouteDestination{Destination: &networking.Destination{Host: h}, Weight: int32(w)}
		if p > 0 {
			d.Destination.Port = &networking.PortSelector{Number: p}
		}
		return d
	}
	prefix := func(p string) *route.RouteMatch {
		return &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: p}}
	}
	to := func(cluster string) *route.Route_Route {
		return &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: cluster}}}
	}
	sec := durationpb.New
	cases := map[string]struct {
		http       []*networking.HTTPRoute
		want       []*route.Route
		wantFaults bool
	}{
		"one destination, no match: every request": {
			http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{dest("b.local", 9090, 0)}}},
			want: []*route.Route{{Match: prefix("/"), Action: to("outbound|9090||b.local")}},
		},
		"a destination without a port is the listener's port": {
			http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{dest("b.local", 0, 0)}}},
			want: []*route.Route{{Match: prefix("/"), Action: to("outbound|8080||b.local")}},
		},
		"weights over hosts; a weight of 0 is left out": {
			http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{
				dest(host, 0, 90), dest("b.local", 0, 10), dest("c.local", 0, 0)}}},
			want: []*route.Route{{Match: prefix("/"), Action: &route.Route_Route{Route: &route.RouteAction{
				ClusterSpecifier: &route.RouteAction_WeightedClusters{WeightedClusters: &route.WeightedCluster{
					Clusters: []*route.WeightedCluster_ClusterWeight{
						{Name: "outbound|8080||a.local", Weight: wrapperspb.UInt32(90)},
						{Name: "outbound|8080||b.local", Weight: wrapperspb.UInt32(10)}}}}}}}},
		},
		"subsets: each destination's subset cluster, named as istiod names it": {
			http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{
				{Destination: &networking.Destination{Host: host, Subset: "v1"}, Weight: 90},
				{Destination: &networking.Destination{Host: host, Subset: "v2", Port: &networking.PortSelector{Number: 9090}}, Weight: 10}}}},
			want: []*route.Route{{Match: prefix("/"), Action: &route.Route_Route{Route: &route.RouteAction{
				ClusterSpecifier: &route.RouteAction_WeightedClusters{WeightedClusters: &route.WeightedCluster{
					Clusters: []*route.WeightedCluster_ClusterWeight{
						{Name: "outbound|8080|v1|a.local", Weight: wrapperspb.UInt32(90)},
						{Name: "outbound|9090|v2|a.local", Weight: wrapperspb.UInt32(10)}}}}}}}},
		},
		"matches: a route per match, in order; another port's match is left out; headers by name": {
			http: []*networking.HTTPRoute{{
				Name: "canary",
				Match: []*networking.HTTPMatchRequest{
					{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: "/pkg.Svc/Get"}},
						Headers: map[string]*networking.StringMatch{
							"x-user": {MatchType: &networking.StringMatch_Prefix{Prefix: "test-"}},
							"x-b":    {MatchType: &networking.StringMatch_Regex{Regex: "b+"}},
							"x-any":  {}},
						WithoutHeaders: map[string]*networking.StringMatch{"x-skip": {MatchType: &networking.StringMatch_Exact{Exact: "1"}}}},
					{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/pkg.Other/"}}, Port: 9999},
					{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "/pkg\\..*"}}, IgnoreUriCase: true},
				},
				Route: []*networking.HTTPRouteDestination{dest("b.local", 0, 0)},
			}, {
				Route: []*networking.HTTPRouteDestination{dest(host, 0, 0)},
			}},
			want: []*route.Route{{
				Name: "canary",
				Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Path{Path: "/pkg.Svc/Get"}, Headers: []*route.HeaderMatcher{
					{Name: "x-any", HeaderMatchSpecifier: &route.HeaderMatcher_PresentMatch{PresentMatch: true}},
					{Name: "x-b", HeaderMatchSpecifier: &route.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcher.RegexMatcher{Regex: "b+"}}},
					{Name: "x-user", HeaderMatchSpecifier: &route.HeaderMatcher_PrefixMatch{PrefixMatch: "test-"}},
					{Name: "x-skip", HeaderMatchSpecifier: &route.HeaderMatcher_ExactMatch{ExactMatch: "1"}, InvertMatch: true},
				}},
				Action: to("outbound|8080||b.local"),
			}, {
				Name: "canary",
				Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: "/pkg\\..*"}},
					CaseSensitive: wrapperspb.Bool(false)},
				Action: to("outbound|8080||b.local"),
			}, {
				Match: prefix("/"), Action: to("outbound|8080||a.local"),
			}},
		},
		"timeout, retries with gRPC conditions only, backoff": {
			http: []*networking.HTTPRoute{{
				Route:   []*networking.HTTPRouteDestination{dest(host, 0, 0)},
				Timeout: sec(200 * time.Millisecond),
				Retries: &networking.HTTPRetry{Attempts: 3, RetryOn: "5xx,unavailable,cancelled,unavailable", Backoff: sec(50 * time.Millisecond)},
			}},
			want: []*route.Route{{Match: prefix("/"), Action: &route.Route_Route{Route: &route.RouteAction{
				ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "outbound|8080||a.local"},
				MaxStreamDuration: &route.RouteAction_MaxStreamDuration{MaxStreamDuration: sec(200 * time.Millisecond),
					GrpcTimeoutHeaderMax: sec(200 * time.Millisecond)},
				RetryPolicy: &route.RetryPolicy{RetryOn: "cancelled,unavailable", NumRetries: wrapperspb.UInt32(3),
					RetryBackOff: &route.RetryPolicy_RetryBackOff{BaseInterval: sec(50 * time.Millisecond)}},
			}}}},
		},
		"retries without retryOn: Istio's default conditions' gRPC ones; none when no gRPC condition or 0 attempts": {
			http: []*networking.HTTPRoute{
				{Route: []*networking.HTTPRouteDestination{dest(host, 0, 0)}, Retries: &networking.HTTPRetry{Attempts: 2},
					Match: []*networking.HTTPMatchRequest{{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/a"}}}}},
				{Route: []*networking.HTTPRouteDestination{dest(host, 0, 0)}, Retries: &networking.HTTPRetry{Attempts: 2, RetryOn: "5xx"},
					Match: []*networking.HTTPMatchRequest{{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/b"}}}}},
				{Route: []*networking.HTTPRouteDestination{dest(host, 0, 0)}, Retries: &networking.HTTPRetry{Attempts: 0}},
			},
			want: []*route.Route{
				{Match: prefix("/a"), Action: &route.Route_Route{Route: &route.RouteAction{
					ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "outbound|8080||a.local"},
					RetryPolicy:      &route.RetryPolicy{RetryOn: "cancelled,unavailable", NumRetries: wrapperspb.UInt32(2)}}}},
				{Match: prefix("/b"), Action: to("outbound|8080||a.local")},
				{Match: prefix("/"), Action: to("outbound|8080||a.local")},
			},
		},
		"fault: delay and abort per million, the filter in the listener": {
			http: []*networking.HTTPRoute{{
				Route: []*networking.HTTPRouteDestination{dest(host, 0, 0)},
				Fault: &networking.HTTPFaultInjection{
					Delay: &networking.HTTPFaultInjection_Delay{HttpDelayType: &networking.HTTPFaultInjection_Delay_FixedDelay{
						FixedDelay: sec(time.Second)}, Percentage: &networking.Percent{Value: 12.5}},
					Abort: &networking.HTTPFaultInjection_Abort{ErrorType: &networking.HTTPFaultInjection_Abort_GrpcStatus{
						GrpcStatus: "UNAVAILABLE"}},
				},
			}},
			want: []*route.Route{{Match: prefix("/"), Action: to("outbound|8080||a.local"),
				TypedPerFilterConfig: map[string]*anypb.Any{faultFilterName: mustAny(&fault.HTTPFault{
					Delay: &faultcommon.FaultDelay{FaultDelaySecifier: &faultcommon.FaultDelay_FixedDelay{FixedDelay: sec(time.Second)},
						Percentage: &typev3.FractionalPercent{Numerator: 125000, Denominator: typev3.FractionalPercent_MILLION}},
					Abort: &fault.FaultAbort{ErrorType: &fault.FaultAbort_GrpcStatus{GrpcStatus: 14},
						Percentage: &typev3.FractionalPercent{Numerator: 1000000, Denominator: typev3.FractionalPercent_MILLION}},
				})}}},
			wantFaults: true,
		},
		"a redirect only routes nowhere": {
			http: []*networking.HTTPRoute{{Redirect: &networking.HTTPRedirect{Uri: "/x"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := &model.Service{Hostname: host, Ports: []model.Port{{Name: "grpc", Number: port, Protocol: model.ProtocolGRPC}},
				Routing: &networking.VirtualService{Hosts: []string{host}, Http: tc.http}}
			routes, faults := virtualHostRoutes(host, port, svc.Routing, nil)
			assertEqual(t, tc.want, routes)
			assertEqual(t, tc.wantFaults, faults)
			l := buildListeners([]*model.Service{svc})[ListenerName(port, host)]
			var manager hcm.HttpConnectionManager
			if err := l.GetApiListener().GetApiListener().UnmarshalTo(&manager); err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, f := range manager.GetHttpFilters() {
				names = append(names, f.GetName())
			}
			want := []string{routerFilterName}
			if tc.wantFaults {
				want = []string{faultFilterName, routerFilterName}
			}
			assertEqual(t, want, names)
		})
	}
}

// TestUnservedRouting: every set field of a VirtualService that no route
// carries is named, as written in YAML, and so is each value served
// otherwise than asked; the served ones are not.
func TestUnservedRouting(t *testing.T) {
	vs := &networking.VirtualService{
		Hosts: []string{"a.local"}, Gateways: []string{"mesh"},
		Http: []*networking.HTTPRoute{{
			Match: []*networking.HTTPMatchRequest{{
				Uri:     &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/"}},
				Headers: map[string]*networking.StringMatch{"x": {}}, QueryParams: map[string]*networking.StringMatch{"q": {}}}},
			Route: []*networking.HTTPRouteDestination{
				{Destination: &networking.Destination{Host: "a.local", Subset: "v1"}, Weight: 90},
				{Destination: &networking.Destination{Host: "a.local"}, Weight: 10, Headers: &networking.Headers{}}},
			Timeout: durationpb.New(time.Second),
			Retries: &networking.HTTPRetry{Attempts: 2, RetryOn: "unavailable,5xx", PerTryTimeout: durationpb.New(time.Second)},
			Mirror:  &networking.Destination{Host: "m.local"},
		}},
		Tcp: []*networking.TCPRoute{{}},
	}
	assertEqual(t, []string{
		"http[0].match[0].queryParams",
		"http[0].mirror.host",
		"http[0].retries.perTryTimeout",
		"http[0].retries.retryOn: 5xx (not a gRPC condition)",
		"http[0].route[1].headers",
		"tcp[0]",
	}, UnservedRouting(vs))
	assertEqual(t, []string(nil), UnservedRouting(nil))
}

// TestProviderDefaults: what a host's providers declare (Dubbo's timeout,
// retries and loadbalance) is its route's timeout and retries and its
// cluster's load balancer when no VirtualService or DestinationRule says
// otherwise.
func TestProviderDefaults(t *testing.T) {
	defaults := model.RouteDefaults{Timeout: 200 * time.Millisecond, Retries: 2, RetriesSet: true, LoadBalance: "leastactive"}
	svc := func(mut func(*model.Service)) *model.Service {
		s := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "tri", Number: 50051, Protocol: model.ProtocolGRPC}},
			Defaults: defaults}
		if mut != nil {
			mut(s)
		}
		return s
	}
	ms := durationpb.New(200 * time.Millisecond)
	withDefaults := &route.RouteAction{
		ClusterSpecifier:  &route.RouteAction_Cluster{Cluster: "outbound|50051||a.local"},
		MaxStreamDuration: &route.RouteAction_MaxStreamDuration{MaxStreamDuration: ms, GrpcTimeoutHeaderMax: ms},
		RetryPolicy:       &route.RetryPolicy{RetryOn: "cancelled,unavailable", NumRetries: wrapperspb.UInt32(2)},
	}
	cases := map[string]struct {
		svc       *model.Service
		wantRoute *route.RouteAction
		wantLB    cluster.Cluster_LbPolicy
	}{
		"the declared timeout, retries and balancer": {svc: svc(nil), wantRoute: withDefaults, wantLB: cluster.Cluster_LEAST_REQUEST},
		"0 retries: no retry policy": {svc: svc(func(s *model.Service) { s.Defaults.Retries = 0 }),
			wantRoute: &route.RouteAction{ClusterSpecifier: withDefaults.ClusterSpecifier, MaxStreamDuration: withDefaults.MaxStreamDuration},
			wantLB:    cluster.Cluster_LEAST_REQUEST},
		"random is round robin": {svc: svc(func(s *model.Service) { s.Defaults.LoadBalance = "random" }),
			wantRoute: withDefaults, wantLB: cluster.Cluster_ROUND_ROBIN},
		"a VirtualService overrides the route's": {svc: svc(func(s *model.Service) {
			s.Routing = &networking.VirtualService{Hosts: []string{"a.local"}, Http: []*networking.HTTPRoute{{
				Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "a.local"}}}}}}
		}), wantRoute: &route.RouteAction{ClusterSpecifier: withDefaults.ClusterSpecifier}, wantLB: cluster.Cluster_LEAST_REQUEST},
		"a DestinationRule's balancer overrides the declared one": {svc: svc(func(s *model.Service) {
			s.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
				LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
					Simple: networking.LoadBalancerSettings_ROUND_ROBIN}}}}
		}), wantRoute: withDefaults, wantLB: cluster.Cluster_ROUND_ROBIN},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rc, _ := routeFor(tc.svc, 50051)
			assertEqual(t, tc.wantRoute, rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute())
			c, _ := clusterFor(tc.svc, tc.svc.Ports[0], nil, RandomLB|RingHash)
			assertEqual(t, tc.wantLB, c.LbPolicy)
		})
	}
}

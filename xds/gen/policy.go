package gen

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// This file translates a DestinationRule's traffic policy into the cluster
// fields proxyless gRPC clients read (docs/design.md §6, README "Traffic
// policy"). Outlier detection and circuit breaking are accepted by every
// gRPC client family that reads xDS (grpc-go, grpc-java, gRPC C-core,
// grpc-js); a load balancer only some accept is one of the Features, and a
// client lacking it is served round robin instead (a Varied cluster). What
// is not translated is named by Unserved.

// Outlier detection (gRFC A50). Istio counts consecutive errors
// (consecutive5xxErrors, consecutiveGatewayErrors: Envoy's consecutive_5xx
// and consecutive_gateway_failure); gRPC clients implement only the
// success-rate and failure-percentage algorithms, which judge an address's
// share of failed calls over an interval. A DestinationRule asking for
// ejection after N consecutive errors is served as failure-percentage
// ejection: an address that had at least N calls in an interval, more than
// failurePercentageThreshold percent of which failed, is ejected. The
// success-rate algorithm is off, as istiod turns it off for Envoy.
const (
	// failurePercentageThreshold is the share of failed calls (percent,
	// exclusive) past which an address is ejected.
	failurePercentageThreshold = 50
	// failurePercentageMinimumHosts: a cluster of one address never ejects
	// it (gRPC clients have no panic routing: an ejected last address
	// fails every call). Not with locality failover (minimumHosts).
	failurePercentageMinimumHosts = 2
	// defaultConsecutiveErrors is Envoy's consecutive_5xx default, which
	// applies to an outlierDetection block that sets no error count.
	defaultConsecutiveErrors = 5
)

// portPolicy returns the traffic policy that applies to port of a host
// whose DestinationRule has policy tp (nil: none): the top-level settings,
// each of loadBalancer, connectionPool, outlierDetection and tls replaced
// by the port-level setting of that port when it sets one. Mirrors Istio's
// MergeTrafficPolicy (pilot/pkg/networking/core/cluster_traffic_policy.go).
func portPolicy(tp *networking.TrafficPolicy, port uint32) *networking.TrafficPolicy {
	if tp == nil {
		return nil
	}
	i := slices.IndexFunc(tp.GetPortLevelSettings(), func(p *networking.TrafficPolicy_PortTrafficPolicy) bool {
		return p.GetPort().GetNumber() == port
	})
	if i < 0 {
		return tp
	}
	pl := tp.GetPortLevelSettings()[i]
	out := &networking.TrafficPolicy{
		LoadBalancer:     tp.GetLoadBalancer(),
		ConnectionPool:   tp.GetConnectionPool(),
		OutlierDetection: tp.GetOutlierDetection(),
		Tls:              tp.GetTls(),
	}
	if pl.GetLoadBalancer() != nil {
		out.LoadBalancer = pl.GetLoadBalancer()
	}
	if pl.GetConnectionPool() != nil {
		out.ConnectionPool = pl.GetConnectionPool()
	}
	if pl.GetOutlierDetection() != nil {
		out.OutlierDetection = pl.GetOutlierDetection()
	}
	if pl.GetTls() != nil {
		out.Tls = pl.GetTls()
	}
	return out
}

// servedPolicy is the traffic policy of svc's port: its DestinationRule's
// (portPolicy), with the load balancer its providers declare (Dubbo's
// loadbalance, dubboBalancers) when the rule sets none.
func servedPolicy(svc *model.Service, port uint32) *networking.TrafficPolicy {
	tp := portPolicy(svc.Policy.GetTrafficPolicy(), port)
	lb, ok := dubboBalancers[svc.Defaults.LoadBalance]
	if !ok || tp.GetLoadBalancer() != nil {
		return tp
	}
	out := &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
		LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: lb}}}
	if tp != nil {
		out.ConnectionPool, out.OutlierDetection, out.Tls = tp.GetConnectionPool(), tp.GetOutlierDetection(), tp.GetTls()
	}
	return out
}

// subsetPolicy is the traffic policy of sub's cluster of svc's port: the
// port's (servedPolicy), each of loadBalancer, connectionPool,
// outlierDetection and tls replaced by the subset's when it sets one (its
// port-level setting of that port first). Mirrors Istio's
// MergeTrafficPolicy of a subset (pilot/pkg/networking/core/cluster_traffic_policy.go).
func subsetPolicy(svc *model.Service, sub *networking.Subset, port uint32) *networking.TrafficPolicy {
	tp := servedPolicy(svc, port)
	sp := portPolicy(sub.GetTrafficPolicy(), port)
	if sp == nil {
		return tp
	}
	out := &networking.TrafficPolicy{
		LoadBalancer:     cmp.Or(sp.GetLoadBalancer(), tp.GetLoadBalancer()),
		ConnectionPool:   cmp.Or(sp.GetConnectionPool(), tp.GetConnectionPool()),
		OutlierDetection: cmp.Or(sp.GetOutlierDetection(), tp.GetOutlierDetection()),
		Tls:              cmp.Or(sp.GetTls(), tp.GetTls()),
	}
	return out
}

// dubboBalancers are Dubbo's load balancers with a gRPC equivalent:
// leastactive (fewest calls in flight) is least request; roundrobin and
// random are round robin (gRPC has no random balancer; both spread calls
// evenly). The others (consistenthash on the first argument,
// shortestresponse, adaptive) have none, and clients round robin.
var dubboBalancers = map[string]networking.LoadBalancerSettings_SimpleLB{
	"leastactive": networking.LoadBalancerSettings_LEAST_REQUEST,
	"roundrobin":  networking.LoadBalancerSettings_ROUND_ROBIN,
	"random":      networking.LoadBalancerSettings_ROUND_ROBIN,
}

// applyRouteDefaults sets on a, the route of a host without a
// VirtualService, the timeout (max_stream_duration, as a VirtualService
// timeout is served) and the retries (num_retries on the gRPC part of
// Istio's default conditions) its providers declare (Dubbo's timeout and
// retries); none when retries is 0.
func applyRouteDefaults(a *route.RouteAction, d model.RouteDefaults) {
	if a == nil {
		return
	}
	if d.Timeout > 0 {
		t := durationpb.New(d.Timeout)
		a.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{MaxStreamDuration: t, GrpcTimeoutHeaderMax: t}
	}
	if d.RetriesSet && d.Retries > 0 {
		a.RetryPolicy = &route.RetryPolicy{RetryOn: strings.Join(defaultRetryOn, ","), NumRetries: wrapperspb.UInt32(d.Retries)}
	}
}

// applyTrafficPolicy sets on c what tp (a port's policy, portPolicy)
// asks for that proxyless clients read: outlier detection (gRFC A50), the
// maximum of concurrent requests (gRFC A32), the load balancer and TLS
// (gRFC A29, applyTLS: refused to a client lacking it), for a
// client lacking the features lacks. A balancer the client lacks is served
// as ROUND_ROBIN, which every client implements, and named in the result
// ("loadBalancer.simple:LEAST_REQUEST").
func applyTrafficPolicy(c *cluster.Cluster, tp *networking.TrafficPolicy, lacks Features) (substituted []string) {
	if tp == nil {
		return nil
	}
	if lb := tp.GetLoadBalancer().GetSimple(); balancers[lb].feature != 0 {
		if lacks&balancers[lb].feature == 0 {
			c.LbPolicy = balancers[lb].policy
		} else {
			substituted = append(substituted, "loadBalancer.simple:"+lb.String())
		}
	}
	if ch := tp.GetLoadBalancer().GetConsistentHash(); ch != nil && lacks&RingHash != 0 {
		substituted = append(substituted, "loadBalancer.consistentHash")
	} else if ch != nil {
		c.LbPolicy = cluster.Cluster_RING_HASH
		c.LbConfig = &cluster.Cluster_RingHashLbConfig_{RingHashLbConfig: &cluster.Cluster_RingHashLbConfig{
			MinimumRingSize: wrapperspb.UInt64(ringSize(ch)),
			HashFunction:    cluster.Cluster_RingHashLbConfig_XX_HASH,
		}}
	}
	c.OutlierDetection = outlierDetection(tp)
	if n := tp.GetConnectionPool().GetHttp().GetHttp2MaxRequests(); n > 0 {
		c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
			Priority:    core.RoutingPriority_DEFAULT,
			MaxRequests: wrapperspb.UInt32(uint32(n)),
		}}}
	}
	return append(substituted, applyTLS(c, tp.GetTls(), lacks)...)
}

// Ring hash (gRFC A42). A consistentHash load balancer is served as
// RING_HASH with the xxHash function (the one gRPC implements), whatever
// hash algorithm it names (gRPC has no Maglev), and the route's
// hash_policy (routeHashPolicy) says what is hashed.
const (
	// defaultRingSize is Istio's minimumRingSize default.
	defaultRingSize = 1024
	// maxRingSize is gRPC's upper bound of a ring's size (A42): a larger
	// minimum is served as this one, since clients NACK it.
	maxRingSize = 8 << 20
)

// ringSize is ch's minimum ring size: ringHash.minimumRingSize, else the
// deprecated minimumRingSize, else Istio's default; at most maxRingSize.
func ringSize(ch *networking.LoadBalancerSettings_ConsistentHashLB) uint64 {
	n := cmp.Or(ch.GetRingHash().GetMinimumRingSize(), ch.GetMinimumRingSize(), defaultRingSize)
	return min(n, maxRingSize)
}

// routeHashPolicy is the route hash_policy of a port whose policy is tp
// (gRFC A42): a header's value for httpHeaderName, the client channel
// for useSourceIp (filter_state io.grpc.channel_id: gRPC has no source
// address to hash, and a channel is one client's); nil when tp hashes
// nothing a gRPC client can (a cookie, a query parameter: calls then hash
// at random, and Unserved names the field).
func routeHashPolicy(tp *networking.TrafficPolicy) []*route.RouteAction_HashPolicy {
	switch key := tp.GetLoadBalancer().GetConsistentHash().GetHashKey().(type) {
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName:
		return []*route.RouteAction_HashPolicy{{PolicySpecifier: &route.RouteAction_HashPolicy_Header_{
			Header: &route.RouteAction_HashPolicy_Header{HeaderName: strings.ToLower(key.HttpHeaderName)}}}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp:
		if key.UseSourceIp {
			return []*route.RouteAction_HashPolicy{{PolicySpecifier: &route.RouteAction_HashPolicy_FilterState_{
				FilterState: &route.RouteAction_HashPolicy_FilterState{Key: grpcChannelIDKey}}}}
		}
	}
	return nil
}

// grpcChannelIDKey is the filter_state key gRPC clients hash a channel's
// ID by (gRFC A42).
const grpcChannelIDKey = "io.grpc.channel_id"

// balancers are the loadBalancer.simple values served other than as round
// robin: the cluster lb_policy of each, and the feature a client needs to
// accept it. ROUND_ROBIN and UNSPECIFIED are round robin; LEAST_CONN is
// LEAST_REQUEST's deprecated name in Istio's API.
var balancers = map[networking.LoadBalancerSettings_SimpleLB]struct {
	policy  cluster.Cluster_LbPolicy
	feature Features
}{
	networking.LoadBalancerSettings_LEAST_REQUEST: {cluster.Cluster_LEAST_REQUEST, LeastRequest},
	networking.LoadBalancerSettings_LEAST_CONN:    {cluster.Cluster_LEAST_REQUEST, LeastRequest},
	networking.LoadBalancerSettings_RANDOM:        {cluster.Cluster_RANDOM, RandomLB},
}

// featuresUsed returns the Features a cluster with port policy tp may use.
func featuresUsed(tp *networking.TrafficPolicy) Features {
	f := balancers[tp.GetLoadBalancer().GetSimple()].feature
	if tp.GetLoadBalancer().GetConsistentHash() != nil {
		f |= RingHash
	}
	if usesTLS(tp.GetTls()) {
		f |= UpstreamTLS
	}
	return f
}

// outlierDetection translates the outlier detection of tp (gRFC A50, see
// failurePercentageThreshold); nil when it has none or turns ejection off
// (an error count of 0).
func outlierDetection(tp *networking.TrafficPolicy) *cluster.OutlierDetection {
	od := tp.GetOutlierDetection()
	if od == nil {
		return nil
	}
	n := consecutiveErrors(od)
	if n == 0 {
		return nil
	}
	out := &cluster.OutlierDetection{
		Interval:                       od.GetInterval(),
		BaseEjectionTime:               od.GetBaseEjectionTime(),
		EnforcingSuccessRate:           wrapperspb.UInt32(0),
		FailurePercentageThreshold:     wrapperspb.UInt32(failurePercentageThreshold),
		EnforcingFailurePercentage:     wrapperspb.UInt32(100),
		FailurePercentageMinimumHosts:  wrapperspb.UInt32(minimumHosts(tp)),
		FailurePercentageRequestVolume: wrapperspb.UInt32(n),
	}
	if p := od.GetMaxEjectionPercent(); p > 0 {
		out.MaxEjectionPercent = wrapperspb.UInt32(uint32(min(p, 100)))
	}
	return out
}

// minimumHosts is the failure_percentage_minimum_hosts of a cluster with
// policy tp: failurePercentageMinimumHosts, but 1 when the rule's own
// localityLbSetting (not the mesh default that outlierDetection alone
// turns on) fails over by priority (localityLBOf): gRPC clients judge each
// priority on its own and count only the addresses that had calls in the
// interval, so with 2 a priority's last failing address, or its only one,
// would never be ejected and calls would never move to the next priority
// (Envoy's consecutive-error ejection has no such minimum, and Istio's
// locality failover example has one endpoint per region). The cost, which
// the explicit setting accepts: the last failing address of the lowest
// priority is ejected too, and its calls fail at once until the ejection
// ends (gRPC has no panic routing).
func minimumHosts(tp *networking.TrafficPolicy) uint32 {
	if lb := localityLBOf(tp); lb != nil && lb.failover && lb.explicit {
		return 1
	}
	return failurePercentageMinimumHosts
}

// consecutiveErrors is the error count od ejects after: the smaller of
// consecutive5xxErrors and consecutiveGatewayErrors that are set and not
// 0; 0 when every one set is 0 (ejection off, as in Istio);
// defaultConsecutiveErrors when none is set.
func consecutiveErrors(od *networking.OutlierDetection) uint32 {
	var n uint32
	set := false
	for _, v := range []*wrapperspb.UInt32Value{od.GetConsecutive_5XxErrors(), od.GetConsecutiveGatewayErrors()} {
		if v == nil {
			continue
		}
		set = true
		if v.GetValue() > 0 && (n == 0 || v.GetValue() < n) {
			n = v.GetValue()
		}
	}
	if !set {
		return defaultConsecutiveErrors
	}
	return n
}

// servedFields are the traffic-policy fields (proto names, dot-joined
// from TrafficPolicy; a port-level setting's the same under
// port_level_settings) that applyTrafficPolicy translates.
var servedFields = map[string]bool{
	"load_balancer.simple":                                      true, // checked by value in Unserved
	"load_balancer.consistent_hash.http_header_name":            true,
	"load_balancer.consistent_hash.use_source_ip":               true,
	"load_balancer.consistent_hash.ring_hash.minimum_ring_size": true,
	"load_balancer.consistent_hash.minimum_ring_size":           true,
	"load_balancer.consistent_hash.maglev":                      true, // named in Unserved: served as ring hash
	"connection_pool.http.http2_max_requests":                   true,
	"outlier_detection.consecutive_5xx_errors":                  true,
	"outlier_detection.consecutive_gateway_errors":              true,
	"outlier_detection.interval":                                true,
	"outlier_detection.base_ejection_time":                      true,
	"outlier_detection.max_ejection_percent":                    true,
	"load_balancer.locality_lb_setting.enabled":                 true,
	"load_balancer.locality_lb_setting.distribute.from":         true,
	"load_balancer.locality_lb_setting.distribute.to":           true,
	"load_balancer.locality_lb_setting.failover.from":           true,
	"load_balancer.locality_lb_setting.failover.to":             true,
	"load_balancer.locality_lb_setting.failover_priority":       true,
	"port_level_settings.port":                                  true,
	"tls.mode":                                                  true,
	"tls.subject_alt_names":                                     true,
}

// unservedTLSNotes say why a ClientTLSSettings field (its YAML name) is
// not served, and what proxyless clients do instead (tls.go).
var unservedTLSNotes = map[string]string{
	"caCertificates":     " (proxyless clients verify with their bootstrap's certificate provider)",
	"caCrl":              " (proxyless clients verify with their bootstrap's certificate provider)",
	"clientCertificate":  " (proxyless clients present their bootstrap's certificate provider's)",
	"privateKey":         " (proxyless clients present their bootstrap's certificate provider's)",
	"credentialName":     " (proxyless clients read certificates from their bootstrap's certificate provider)",
	"insecureSkipVerify": " (proxyless clients always verify the server)",
	"sni":                " (gRPC sets no SNI from xDS)",
}

// servedBalancers are the loadBalancer.simple values served as asked to
// the clients that accept them (balancers), and as round robin to the
// others.
var servedBalancers = map[networking.LoadBalancerSettings_SimpleLB]bool{
	networking.LoadBalancerSettings_UNSPECIFIED:   true,
	networking.LoadBalancerSettings_ROUND_ROBIN:   true,
	networking.LoadBalancerSettings_LEAST_REQUEST: true,
	networking.LoadBalancerSettings_LEAST_CONN:    true,
	networking.LoadBalancerSettings_RANDOM:        true,
}

// Unserved names, sorted, each field of tp that proxyless clients are not
// served (as written in YAML, e.g. "outlierDetection.minHealthPercent", or
// "loadBalancer.simple: LEAST_REQUEST (served as ROUND_ROBIN)"): the caller
// names them once, so that nothing in a policy is ignored silently.
func Unserved(tp *networking.TrafficPolicy) []string {
	if tp == nil {
		return nil
	}
	out := unservedFields(tp.ProtoReflect(), func(p string) bool {
		return servedFields[p] || servedFields[strings.TrimPrefix(p, "port_level_settings.")]
	}, func(p string) bool {
		// An empty outlierDetection ejects after Envoy's default count.
		return strings.TrimPrefix(p, "port_level_settings.") == "outlier_detection"
	})
	for i, f := range out {
		if at := strings.LastIndex(f, "tls."); at >= 0 {
			out[i] += unservedTLSNotes[f[at+len("tls."):]]
		}
	}
	for i, lb := range append([]*networking.LoadBalancerSettings{tp.GetLoadBalancer()}, loadBalancers(tp)...) {
		at := "loadBalancer"
		if i > 0 {
			at = fmt.Sprintf("portLevelSettings[%d].loadBalancer", i-1)
		}
		if simple := lb.GetSimple(); !servedBalancers[simple] {
			out = append(out, fmt.Sprintf("%s.simple: %s (served as ROUND_ROBIN)", at, simple))
		}
		if lb.GetConsistentHash().GetMaglev() != nil {
			out = append(out, at+".consistentHash.maglev (served as ring hash: gRPC has no Maglev)")
		}
	}
	if ls := tp.GetLoadBalancer().GetLocalityLbSetting(); tp.GetOutlierDetection() == nil && len(ls.GetDistribute()) == 0 &&
		(len(ls.GetFailover()) > 0 || len(ls.GetFailoverPriority()) > 0) && (ls.GetEnabled() == nil || ls.GetEnabled().GetValue()) {
		out = append(out, "loadBalancer.localityLbSetting failover (applies only with outlierDetection, as in Istio)")
	}
	slices.Sort(out)
	return out
}

// Unenforced names each setting of tp (as written in YAML, the port-level
// ones with their index) that is served but that some client accepts
// without applying it, and which: a DestinationRule's
// connectionPool.http.http2MaxRequests, served as circuit_breakers
// max_requests (gRFC A32), is applied by grpc-go, gRPC C-core and grpc-js,
// but grpc-java (1.85) counts the calls in flight only for a cluster with
// load reporting (LRS), which is not served, so it never refuses one
// (grpc-java ClusterImplLoadBalancer; e2e TestProxylessCircuitBreaking).
func Unenforced(tp *networking.TrafficPolicy) []string {
	const note = " (not enforced by grpc-java, which counts calls in flight only with load reporting)"
	var out []string
	if tp.GetConnectionPool().GetHttp().GetHttp2MaxRequests() > 0 {
		out = append(out, "connectionPool.http.http2MaxRequests"+note)
	}
	for i, p := range tp.GetPortLevelSettings() {
		if p.GetConnectionPool().GetHttp().GetHttp2MaxRequests() > 0 {
			out = append(out, fmt.Sprintf("portLevelSettings[%d].connectionPool.http.http2MaxRequests%s", i, note))
		}
	}
	return out
}

// unservedFields names, as written in YAML ("outlierDetection.interval",
// "portLevelSettings[0].tls.mode"), each field set in m whose path (proto
// names, dot-joined from m, without list indexes) served does not accept;
// a map, a well-known type (a Duration) and an empty message are one
// field; an empty message whose path servedEmpty accepts (nil: none) is
// served.
func unservedFields(m protoreflect.Message, served, servedEmpty func(path string) bool) []string {
	var out []string
	var walk func(m protoreflect.Message, path, shown string)
	walk = func(m protoreflect.Message, path, shown string) {
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := strings.TrimPrefix(path+"."+string(fd.Name()), ".")
			s := strings.TrimPrefix(shown+"."+fd.JSONName(), ".")
			switch {
			case served(p):
			case servedEmpty != nil && fd.Message() != nil && !fd.IsMap() && !fd.IsList() && isEmpty(v.Message()) && servedEmpty(p):
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					at := fmt.Sprintf("%s[%d]", s, i)
					if m := v.List().Get(i).Message(); isEmpty(m) {
						out = append(out, at)
					} else {
						walk(m, p, at)
					}
				}
			case fd.Message() != nil && !fd.IsMap() && !isEmpty(v.Message()) &&
				!strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf."):
				walk(v.Message(), p, s)
			default:
				out = append(out, s)
			}
			return true
		})
	}
	walk(m, "", "")
	return out
}

// isEmpty reports whether m sets no field.
func isEmpty(m protoreflect.Message) bool {
	empty := true
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		empty = false
		return false
	})
	return empty
}

// loadBalancers returns the port-level load balancer settings of tp, one
// per port-level setting (nil where it sets none).
func loadBalancers(tp *networking.TrafficPolicy) []*networking.LoadBalancerSettings {
	out := make([]*networking.LoadBalancerSettings, len(tp.GetPortLevelSettings()))
	for i, p := range tp.GetPortLevelSettings() {
		out[i] = p.GetLoadBalancer()
	}
	return out
}

package gen

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"
)

// This file translates a VirtualService's HTTP routes into the routes of a
// proxyless listener's RouteConfiguration (gRFC A28 matching and weighted
// clusters, A31 timeout, A44 retries, A33 fault injection), in the fields
// every gRPC client family accepts: header matchers use the exact_match,
// prefix_match and safe_regex_match fields, which gRPC C-core before 1.56
// reads (string_match, gRFC A63, came later). What is not translated is
// named by UnservedRouting.
//
// As istiod does for a host with a VirtualService, the routes are the
// VirtualService's only, in its order: a request none matches fails
// (gRPC: UNAVAILABLE), and no default route follows.

// faultFilterName is the well-known name of Envoy's fault filter (gRFC
// A33), in the listener's filter chain before the router when the
// host's routes inject faults.
const faultFilterName = "envoy.filters.http.fault"

// faultConfig is the fault filter's listener-level configuration, empty:
// the routes carry the faults. Shared read-only.
var faultConfig = mustAny(&fault.HTTPFault{})

// virtualHostRoutes returns the routes of host's listener on port: the
// VirtualService's when vs is not nil, else one sending every request
// (prefix "/") to the port's cluster; and whether a route injects faults.
// Every route hashes by hash (routeHashPolicy of the host's own
// DestinationRule, whichever host a route sends to).
func virtualHostRoutes(host string, port uint32, vs *networking.VirtualService, hash []*route.RouteAction_HashPolicy) (routes []*route.Route, faults bool) {
	if vs == nil {
		return []*route.Route{{
			Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: &route.RouteAction{
				ClusterSpecifier: &route.RouteAction_Cluster{Cluster: ClusterName(port, host)},
				HashPolicy:       hash,
			}},
		}}, false
	}
	for _, hr := range vs.GetHttp() {
		action := routeAction(hr, port)
		if action != nil {
			action.HashPolicy = hash
		}
		if action == nil {
			continue // a redirect, direct response or delegate only: UnservedRouting names it
		}
		var perFilter map[string]*anypb.Any
		if f := httpFault(hr.GetFault()); f != nil {
			perFilter = map[string]*anypb.Any{faultFilterName: mustAny(f)}
			faults = true
		}
		matches := hr.GetMatch()
		if len(matches) == 0 {
			matches = []*networking.HTTPMatchRequest{nil}
		}
		for _, m := range matches {
			if m.GetPort() != 0 && m.GetPort() != port {
				continue
			}
			routes = append(routes, &route.Route{
				Name:                 hr.GetName(),
				Match:                routeMatch(m),
				Action:               &route.Route_Route{Route: action},
				TypedPerFilterConfig: perFilter,
			})
		}
	}
	return routes, faults
}

// routeMatch translates m (nil: every request) into a RouteMatch: the
// uri as path, prefix or RE2 regex (prefix "/" when unset), case
// insensitive with ignoreUriCase; each header, in name order, as a
// HeaderMatcher, inverted for withoutHeaders.
func routeMatch(m *networking.HTTPMatchRequest) *route.RouteMatch {
	out := &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}}
	switch u := m.GetUri().GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		out.PathSpecifier = &route.RouteMatch_Path{Path: u.Exact}
	case *networking.StringMatch_Prefix:
		out.PathSpecifier = &route.RouteMatch_Prefix{Prefix: u.Prefix}
	case *networking.StringMatch_Regex:
		out.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: u.Regex}}
	}
	if m.GetIgnoreUriCase() {
		out.CaseSensitive = wrapperspb.Bool(false)
	}
	for _, h := range []struct {
		m      map[string]*networking.StringMatch
		invert bool
	}{{m.GetHeaders(), false}, {m.GetWithoutHeaders(), true}} {
		for _, name := range slices.Sorted(maps.Keys(h.m)) {
			hm := &route.HeaderMatcher{Name: name, InvertMatch: h.invert}
			switch v := h.m[name].GetMatchType().(type) {
			case *networking.StringMatch_Exact:
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_ExactMatch{ExactMatch: v.Exact}
			case *networking.StringMatch_Prefix:
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_PrefixMatch{PrefixMatch: v.Prefix}
			case *networking.StringMatch_Regex:
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcher.RegexMatcher{Regex: v.Regex}}
			default: // no value: the header is present (Istio's empty match)
				hm.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
			}
			out.Headers = append(out.Headers, hm)
		}
	}
	return out
}

// routeAction translates hr's destinations, timeout and retries for the
// listener on port; nil when hr routes nowhere (no destination).
//   - Destinations: one is its cluster; several are weighted clusters
//     (gRFC A28), those of weight 0 left out as Istio does. A destination
//     without a port is the listener's port. A destination's subset is
//     its subset's cluster (SubsetClusterName), as istiod names it,
//     whether or not the host's DestinationRule defines it: calls routed
//     to a subset that no rule defines fail (gRPC: UNAVAILABLE), as
//     they do behind istiod, and UnservedRouting does not see other
//     hosts' rules, so the policy's status names no such subset.
//   - timeout: max_stream_duration, which also caps the caller's deadline
//     (grpc_timeout_header_max), as istiod sends it (gRFC A31).
//   - retries: retry_policy with attempts as num_retries, the gRPC
//     conditions of retryOn (gRFC A44; Istio's default conditions'
//     gRPC ones, cancelled and unavailable, when retryOn is empty) and
//     backoff as the base interval; none when attempts is 0 or no gRPC
//     condition is asked.
func routeAction(hr *networking.HTTPRoute, port uint32) *route.RouteAction {
	var clusters []*route.WeightedCluster_ClusterWeight
	for _, dst := range hr.GetRoute() {
		if len(hr.GetRoute()) > 1 && dst.GetWeight() == 0 {
			continue
		}
		p := dst.GetDestination().GetPort().GetNumber()
		if p == 0 {
			p = port
		}
		clusters = append(clusters, &route.WeightedCluster_ClusterWeight{
			Name:   SubsetClusterName(p, dst.GetDestination().GetSubset(), dst.GetDestination().GetHost()),
			Weight: wrapperspb.UInt32(uint32(dst.GetWeight()))})
	}
	if len(clusters) == 0 {
		return nil
	}
	a := &route.RouteAction{}
	if len(clusters) == 1 {
		a.ClusterSpecifier = &route.RouteAction_Cluster{Cluster: clusters[0].Name}
	} else {
		a.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: &route.WeightedCluster{Clusters: clusters}}
	}
	if t := hr.GetTimeout(); t != nil {
		a.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{MaxStreamDuration: t, GrpcTimeoutHeaderMax: t}
	}
	if rt := hr.GetRetries(); rt.GetAttempts() > 0 {
		if on := grpcRetryOn(rt.GetRetryOn()); len(on) > 0 {
			rp := &route.RetryPolicy{RetryOn: strings.Join(on, ","), NumRetries: wrapperspb.UInt32(uint32(rt.GetAttempts()))}
			if b := rt.GetBackoff(); b != nil {
				rp.RetryBackOff = &route.RetryPolicy_RetryBackOff{BaseInterval: b}
			}
			a.RetryPolicy = rp
		}
	}
	return a
}

// GRPCRetryConditions are the retry_on conditions gRPC clients implement
// (gRFC A44): the gRPC status names Envoy's retry_on knows.
var GRPCRetryConditions = []string{"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

// defaultRetryOn is the gRPC part of Istio's default retryOn
// ("connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes").
var defaultRetryOn = []string{"cancelled", "unavailable"}

// grpcRetryOn returns the gRPC conditions of retryOn, sorted.
func grpcRetryOn(retryOn string) []string {
	if strings.TrimSpace(retryOn) == "" {
		return defaultRetryOn
	}
	var out []string
	for cond := range strings.SplitSeq(retryOn, ",") {
		if cond = strings.TrimSpace(cond); slices.Contains(GRPCRetryConditions, cond) && !slices.Contains(out, cond) {
			out = append(out, cond)
		}
	}
	slices.Sort(out)
	return out
}

// httpFault translates f (gRFC A33): a fixed delay and an abort with an
// HTTP or gRPC status, each for a percentage of requests (100 when
// unset); nil when f is nil.
func httpFault(f *networking.HTTPFaultInjection) *fault.HTTPFault {
	if f == nil {
		return nil
	}
	out := &fault.HTTPFault{}
	if d := f.GetDelay(); d.GetFixedDelay() != nil {
		out.Delay = &faultcommon.FaultDelay{
			FaultDelaySecifier: &faultcommon.FaultDelay_FixedDelay{FixedDelay: d.GetFixedDelay()},
			Percentage:         perMillion(d.GetPercentage(), d.GetPercent()),
		}
	}
	if a := f.GetAbort(); a != nil {
		abort := &fault.FaultAbort{Percentage: perMillion(a.GetPercentage(), 0)}
		switch e := a.GetErrorType().(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			abort.ErrorType = &fault.FaultAbort_HttpStatus{HttpStatus: uint32(e.HttpStatus)}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			if c, ok := GRPCCode(e.GrpcStatus); ok {
				abort.ErrorType = &fault.FaultAbort_GrpcStatus{GrpcStatus: uint32(c)}
			}
		}
		if abort.ErrorType != nil {
			out.Abort = abort
		}
	}
	return out
}

// perMillion is an Istio percentage (p, or the deprecated integer percent
// when p is unset; 100 when neither is) as a fraction per million.
func perMillion(p *networking.Percent, percent int32) *typev3.FractionalPercent {
	v := float64(100)
	switch {
	case p != nil:
		v = p.GetValue()
	case percent > 0:
		v = float64(percent)
	}
	return &typev3.FractionalPercent{Numerator: uint32(v*10000 + 0.5), Denominator: typev3.FractionalPercent_MILLION}
}

// GRPCCode returns the gRPC status code named name, as Istio's grpcStatus
// writes it ("UNAVAILABLE").
func GRPCCode(name string) (codes.Code, bool) {
	var c codes.Code
	if name == "" || strings.ContainsAny(name, `"\`) || c.UnmarshalJSON([]byte(`"`+name+`"`)) != nil {
		return 0, false
	}
	return c, true
}

// servedRoutingFields are the VirtualService fields (proto names,
// dot-joined from VirtualService) that virtualHostRoutes translates.
var servedRoutingFields = map[string]bool{
	"hosts": true, "gateways": true,
	"http.name": true, "http.match.name": true, "http.match.uri": true, "http.match.headers": true,
	"http.match.without_headers": true, "http.match.port": true, "http.match.ignore_uri_case": true,
	"http.route.destination.host": true, "http.route.destination.port": true, "http.route.weight": true,
	"http.route.destination.subset": true, "export_to": true,
	"http.timeout": true, "http.retries.attempts": true, "http.retries.retry_on": true, "http.retries.backoff": true,
	"http.fault.delay.fixed_delay": true, "http.fault.delay.percentage": true, "http.fault.delay.percent": true,
	"http.fault.abort.http_status": true, "http.fault.abort.grpc_status": true, "http.fault.abort.percentage": true,
}

// UnservedRouting names, sorted, each field of vs that proxyless clients
// are not served (as written in YAML, e.g. "http[0].mirror"), and each
// value served otherwise than asked ("http[0].retries.retryOn: 5xx (not a
// gRPC condition)").
func UnservedRouting(vs *networking.VirtualService) []string {
	if vs == nil {
		return nil
	}
	out := unservedFields(vs.ProtoReflect(), func(p string) bool { return servedRoutingFields[p] }, nil)
	for i, hr := range vs.GetHttp() {
		if rt := hr.GetRetries(); rt != nil {
			for cond := range strings.SplitSeq(rt.GetRetryOn(), ",") {
				if cond = strings.TrimSpace(cond); cond != "" && !slices.Contains(GRPCRetryConditions, cond) {
					out = append(out, fmt.Sprintf("http[%d].retries.retryOn: %s (not a gRPC condition)", i, cond))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

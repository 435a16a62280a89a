package pipelinetest

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"
)

// Policy is a traffic policy a Policy step gives a host: a DestinationRule
// or a VirtualService of one of a few shapes, each touching another part
// of what is generated.
type Policy int

const (
	// NoPolicy removes the host's policy.
	NoPolicy Policy = iota
	// Outliers: a DestinationRule with outlier detection (CDS).
	Outliers
	// LeastRequest: a DestinationRule asking LEAST_REQUEST (a cluster
	// served in another form to clients lacking it).
	LeastRequest
	// RingHash: a DestinationRule hashing on a header (CDS and RDS).
	RingHash
	// Timeout: a VirtualService with a timeout and a fault (RDS and LDS).
	Timeout
	numPolicies
)

var policyNames = [...]string{"NoPolicy", "Outliers", "LeastRequest", "RingHash", "Timeout"}

func (p Policy) String() string { return policyNames[p] }

// policies is the policy a harness serves: immutable once handed to the
// xDS server. It implements xds.Policies; host keys are exact hosts or
// "*.<suffix>" wildcards, the most specific winning.
type policies struct {
	rules   map[string]*networking.DestinationRule
	routing map[string]*networking.VirtualService
}

func (p *policies) For(host string) *networking.DestinationRule { return lookup(p.rules, host) }

func (p *policies) RoutingFor(host string) *networking.VirtualService { return lookup(p.routing, host) }

// lookup finds host's object: its own, else the longest wildcard's.
func lookup[T any](m map[string]*T, host string) *T {
	if v := m[host]; v != nil {
		return v
	}
	var best *T
	bestLen := -1
	for k, v := range m {
		if suffix, ok := strings.CutPrefix(k, "*"); ok && strings.HasSuffix(host, suffix) && len(suffix) > bestLen {
			best, bestLen = v, len(suffix)
		}
	}
	return best
}

// policyObject returns the object of policy p for host, the same one for
// the same (host, p) (package policy's rule 5: an unchanged rule is the
// same object).
func (h *Harness) policyObject(host string, p Policy) any {
	key := fmt.Sprintf("%s %d", host, p)
	if obj, ok := h.policyObjects[key]; ok {
		return obj
	}
	var obj any
	lb := func(s *networking.LoadBalancerSettings) *networking.DestinationRule {
		return &networking.DestinationRule{Host: host, TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: s}}
	}
	switch p {
	case Outliers:
		obj = &networking.DestinationRule{Host: host, TrafficPolicy: &networking.TrafficPolicy{
			OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)}}}
	case LeastRequest:
		obj = lb(&networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
			Simple: networking.LoadBalancerSettings_LEAST_REQUEST}})
	case RingHash:
		obj = lb(&networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{
			ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{
				HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName{HttpHeaderName: "x-user"}}}})
	case Timeout:
		obj = &networking.VirtualService{Hosts: []string{host}, Http: []*networking.HTTPRoute{{
			Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: strings.TrimPrefix(host, "*.")}}},
			Timeout: durationpb.New(time.Second),
			Fault: &networking.HTTPFaultInjection{Abort: &networking.HTTPFaultInjection_Abort{
				ErrorType:  &networking.HTTPFaultInjection_Abort_GrpcStatus{GrpcStatus: "UNAVAILABLE"},
				Percentage: &networking.Percent{Value: 1}}},
		}}}
	}
	if h.policyObjects == nil {
		h.policyObjects = map[string]any{}
	}
	h.policyObjects[key] = obj
	return obj
}

// SetPolicy gives host policy p (a DestinationRule and a VirtualService
// are kept apart: NoPolicy removes both) and hands the xDS server the new
// set, as the policy source does on a change.
func (h *Harness) SetPolicy(host string, p Policy) {
	next := &policies{rules: map[string]*networking.DestinationRule{}, routing: map[string]*networking.VirtualService{}}
	if h.policy != nil {
		maps.Copy(next.rules, h.policy.rules)
		maps.Copy(next.routing, h.policy.routing)
	}
	switch obj := h.policyObject(host, p).(type) {
	case *networking.DestinationRule:
		next.rules[host] = obj
	case *networking.VirtualService:
		next.routing[host] = obj
	default:
		delete(next.rules, host)
		delete(next.routing, host)
	}
	h.policy = next
	h.Pipeline.XDS.SetPolicies(next)
}

// SetPolicyStep gives host policy p (Harness.SetPolicy).
func SetPolicyStep(host string, p Policy) Step {
	return step{expr: fmt.Sprintf("pipelinetest.SetPolicyStep(%q, pipelinetest.%s)", host, p),
		play: func(s *Scene) { s.H.SetPolicy(host, p) }}
}

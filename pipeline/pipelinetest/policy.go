package pipelinetest

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/policy"
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
	// Subsets: a DestinationRule with subsets v1 and v2 selecting by the
	// version label the generator's instances carry (a cluster and a
	// ClusterLoadAssignment per subset; a label change pushes EDS).
	Subsets
	// SubsetSplit: a VirtualService splitting calls over subsets v1 and
	// v2 (weighted clusters named after subsets, defined or not).
	SubsetSplit
	numPolicies
)

var policyNames = [...]string{"NoPolicy", "Outliers", "LeastRequest", "RingHash", "Timeout", "Subsets", "SubsetSplit"}

func (p Policy) String() string { return policyNames[p] }

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
	case Subsets:
		obj = &networking.DestinationRule{Host: host, Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "v2", Labels: map[string]string{"version": "v2"},
				TrafficPolicy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(2)}}},
		}}
	case SubsetSplit:
		dst := strings.TrimPrefix(host, "*.")
		obj = &networking.VirtualService{Hosts: []string{host}, Http: []*networking.HTTPRoute{{
			Route: []*networking.HTTPRouteDestination{
				{Destination: &networking.Destination{Host: dst, Subset: "v1"}, Weight: 90},
				{Destination: &networking.Destination{Host: dst, Subset: "v2"}, Weight: 10},
			},
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
	if h.rules == nil {
		h.rules, h.routing = map[string]*networking.DestinationRule{}, map[string]*networking.VirtualService{}
	}
	switch obj := h.policyObject(host, p).(type) {
	case *networking.DestinationRule:
		h.rules[host] = obj
	case *networking.VirtualService:
		h.routing[host] = obj
	default:
		delete(h.rules, host)
		delete(h.routing, host)
	}
	// package policy's own matching (a host's object, else the longest
	// wildcard's), as the policy source hands it to the xDS server.
	h.policy = policy.NewRules(maps.Clone(h.rules), maps.Clone(h.routing))
	h.Pipeline.XDS.SetPolicies(h.policy)
}

// SetPolicyStep gives host policy p (Harness.SetPolicy).
func SetPolicyStep(host string, p Policy) Step {
	return step{expr: fmt.Sprintf("pipelinetest.SetPolicyStep(%q, pipelinetest.%s)", host, p),
		play: func(s *Scene) { s.H.SetPolicy(host, p) }}
}

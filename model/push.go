package model

import (
	"maps"
	"time"
)

// TriggerReason says why a push was requested. Values mirror Istio's
// pilot/pkg/model TriggerReason names.
type TriggerReason string

const (
	// EndpointUpdate: only endpoints changed (incremental EDS).
	EndpointUpdate TriggerReason = "endpoint"
	// ServiceUpdate: a service was added, removed or changed.
	ServiceUpdate TriggerReason = "service"
	// ConfigUpdate: some other config changed.
	ConfigUpdate TriggerReason = "config"
	// GlobalUpdate: everything must be re-sent (e.g. the first push after sync).
	GlobalUpdate TriggerReason = "global"
)

// ReasonStats counts the reasons merged into one PushRequest.
type ReasonStats map[TriggerReason]int

// PushRequest asks the xDS server to push. It mirrors Istio's
// pilot/pkg/model.PushRequest.
type PushRequest struct {
	// Full is true when clusters, listeners or routes may change. When false
	// the push is incremental: only the ClusterLoadAssignments of the services
	// in ConfigsUpdated are regenerated and sent, to their subscribers only.
	Full bool
	// ConfigsUpdated names the services (Kind ServiceEntry, Name = host,
	// Namespace = the object's namespace) the push is about. Empty on a full
	// push means "everything".
	ConfigsUpdated map[ConfigKey]struct{}
	// Reason counts why the push was requested.
	Reason ReasonStats
	// Start is when the first change merged into this request was
	// observed: for a change a registry made, the registry's observation
	// (Meta.Observed of the object written for it); for any other change,
	// when the ServiceEntry controller or the xDS server received it. Merge
	// keeps the oldest. The push's convergence stages
	// (meshbridge_convergence_seconds{stage="push"|"ack"}) are measured
	// from it.
	Start time.Time
}

// NewReason returns a ReasonStats holding one count of each reason.
func NewReason(reasons ...TriggerReason) ReasonStats {
	r := make(ReasonStats, len(reasons))
	for _, x := range reasons {
		r[x]++
	}
	return r
}

// Merge combines two requests into a new one: Full is ORed, ConfigsUpdated
// unioned, Reason counts summed and the oldest Start kept. Either side may be
// nil; neither is modified. Mirrors Istio's PushRequest.Merge.
func (pr *PushRequest) Merge(other *PushRequest) *PushRequest {
	if pr == nil {
		return other
	}
	if other == nil {
		return pr
	}
	out := &PushRequest{
		Full:  pr.Full || other.Full,
		Start: pr.Start,
	}
	if out.Start.IsZero() || (!other.Start.IsZero() && other.Start.Before(out.Start)) {
		out.Start = other.Start
	}
	if len(pr.Reason)+len(other.Reason) > 0 {
		out.Reason = make(ReasonStats, len(pr.Reason)+len(other.Reason))
		for k, v := range pr.Reason {
			out.Reason[k] += v
		}
		for k, v := range other.Reason {
			out.Reason[k] += v
		}
	}
	if len(pr.ConfigsUpdated)+len(other.ConfigsUpdated) > 0 {
		out.ConfigsUpdated = make(map[ConfigKey]struct{}, len(pr.ConfigsUpdated)+len(other.ConfigsUpdated))
		maps.Copy(out.ConfigsUpdated, pr.ConfigsUpdated)
		maps.Copy(out.ConfigsUpdated, other.ConfigsUpdated)
	}
	return out
}

// ServiceKey returns the ConfigKey that names a service (by host) in
// PushRequest.ConfigsUpdated.
func ServiceKey(namespace, host string) ConfigKey {
	return ConfigKey{Kind: KindServiceEntry, Namespace: namespace, Name: host}
}

// Clone returns a copy of pr whose maps are its own.
func (pr *PushRequest) Clone() *PushRequest {
	if pr == nil {
		return nil
	}
	out := *pr
	out.ConfigsUpdated = maps.Clone(pr.ConfigsUpdated)
	out.Reason = maps.Clone(pr.Reason)
	return &out
}

// Absorb merges other into pr in place, by Merge's rules. pr must belong to
// the caller (a Clone, or a request built for the purpose), never a request
// handed in by someone else. It costs O(len(other)), so accumulating n
// requests is linear where repeated Merge, which copies both sides, is
// quadratic (10,000 services in a cold sync).
func (pr *PushRequest) Absorb(other *PushRequest) {
	if other == nil {
		return
	}
	pr.Full = pr.Full || other.Full
	if pr.Start.IsZero() || (!other.Start.IsZero() && other.Start.Before(pr.Start)) {
		pr.Start = other.Start
	}
	if len(other.Reason) > 0 {
		if pr.Reason == nil {
			pr.Reason = make(ReasonStats, len(other.Reason))
		}
		for k, v := range other.Reason {
			pr.Reason[k] += v
		}
	}
	if len(other.ConfigsUpdated) > 0 {
		if pr.ConfigsUpdated == nil {
			pr.ConfigsUpdated = make(map[ConfigKey]struct{}, len(other.ConfigsUpdated))
		}
		maps.Copy(pr.ConfigsUpdated, other.ConfigsUpdated)
	}
}

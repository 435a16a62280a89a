package xds

import (
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
)

var _ serviceentry.XDSUpdater = (*DiscoveryServer)(nil)

// EDSUpdate replaces the endpoints shard contributes to (host, namespace) and
// requests the push doc.go's rule 1 decides (endpointShards.update). start
// is the request's Start (zero: now). Endpoints are served as given: a DNS
// name is resolved before it gets here (package xds/dns, which wraps the
// server in the pipeline).
func (s *DiscoveryServer) EDSUpdate(shard, host, namespace string, endpoints []*model.Endpoint, start time.Time) {
	if start.IsZero() {
		start = time.Now()
	}
	s.applyEndpoints(shard, host, namespace, endpoints, start)
}

// applyEndpoints replaces a shard's endpoints and requests the push they
// need; a zero start requests none.
func (s *DiscoveryServer) applyEndpoints(shard, host, namespace string, endpoints []*model.Endpoint, start time.Time) {
	kind := s.shards.update(shard, host, namespace, endpoints)
	s.log.Debug("Updated endpoints", "host", host, "namespace", namespace, "shard", shard, "count", len(endpoints), "push", kind)
	if start.IsZero() || kind == noPush || !s.queueing() {
		return
	}
	// Istio keeps reason EndpointUpdate also when it escalates to a full push.
	s.queue.add(&model.PushRequest{
		Full:           kind == fullPush,
		ConfigsUpdated: map[model.ConfigKey]struct{}{model.ServiceKey(namespace, host): {}},
		Reason:         model.NewReason(model.EndpointUpdate),
		Start:          start,
	})
}

// EDSCacheUpdate replaces the endpoints like EDSUpdate but requests no push:
// the caller follows it with a full push (ConfigUpdate) that picks them up.
func (s *DiscoveryServer) EDSCacheUpdate(shard, host, namespace string, endpoints []*model.Endpoint) {
	s.applyEndpoints(shard, host, namespace, endpoints, time.Time{})
}

// SvcUpdate drops the endpoints of (host, namespace) on EventDelete. On add
// and update it makes sure the service key exists: the full push that
// follows gives clients the service's clusters, so its first endpoints,
// even when they come later, change only ClusterLoadAssignments and are
// pushed as EDS (docs/design.md §5: a full push only when clusters, listeners or
// routes change). Istio instead creates the key with the first endpoints and
// pushes full then; for a server that generates clusters from services that
// push is redundant. shard is unused: a deleted service is gone from every
// shard, as in Istio's SvcUpdate.
func (s *DiscoveryServer) SvcUpdate(_, host, namespace string, event model.Event) {
	if event == model.EventDelete {
		s.shards.delete(host, namespace)
		return
	}
	s.shards.ensure(host, namespace)
}

// ConfigUpdate queues req for the debounced push. A zero req.Start is set to
// now, so the event-to-push latency is always measured. req is not modified.
// Never blocks.
func (s *DiscoveryServer) ConfigUpdate(req *model.PushRequest) {
	if req == nil || !s.queueing() {
		return
	}
	if req.Start.IsZero() {
		stamped := *req
		stamped.Start = time.Now()
		req = &stamped
	}
	s.queue.add(req)
}

// queueing reports whether push requests are queued. Before the first full
// push they are not: that push reads every shard and service, so a request
// queued earlier would only push the whole mesh a second time right after
// it. The order makes this safe: callers update the shards (or the
// ServiceSource) before asking, and initialPush sets live before it reads
// them, so an update that finds live false is read by the first push.
func (s *DiscoveryServer) queueing() bool { return s.live.Load() }

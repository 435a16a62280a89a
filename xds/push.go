package xds

import (
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// initialPush does the first full push, after which pushes are no longer
// dropped (see push).
func (s *DiscoveryServer) initialPush() {
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	// Set before this push reads the shards and services: an update that
	// saw live false wrote them earlier and is in this push (queueing).
	s.live.Store(true)
	s.synced = true
	s.pushLocked(&model.PushRequest{Full: true, Reason: model.NewReason(model.GlobalUpdate), Start: time.Now()})
}

// push is the debounce loop's push function. Before the first full push it
// drops the request: the endpoints are already in the shards and the first
// full push generates everything from them.
func (s *DiscoveryServer) push(req *model.PushRequest) {
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	if !s.synced {
		return
	}
	s.pushLocked(req)
}

func (s *DiscoveryServer) pushLocked(req *model.PushRequest) {
	began := time.Now()
	s.tracked = s.conv.begin(req.Start, began)
	defer func() {
		s.conv.seal(s.tracked)
		s.tracked = nil
	}()
	var services, changed int
	pushType := pushTypeEDS
	if req.Full {
		pushType = pushTypeFull
		services, changed = s.fullPush(req)
	} else {
		services, changed = s.edsPush(req)
	}
	reason := dominantReason(req.Reason)
	pushesTotal.WithLabelValues(pushType, reason).Inc()
	if !req.Start.IsZero() {
		eventToPush.Observe(time.Since(req.Start).Seconds())
	}
	level := s.log.Debug
	if req.Full {
		level = s.log.Info
	}
	// services: those the push generated from (every one for a full push,
	// those whose assignments were regenerated for EDS); changedResources:
	// Clusters, Listeners, Routes and ClusterLoadAssignments handed to the
	// caches; configsUpdated: the request's ConfigKeys, 0 for "everything".
	level("Pushed "+pushType, "reason", reason, "services", services, "changedResources", changed,
		"configsUpdated", len(req.ConfigsUpdated), "duration", time.Since(began))

	s.pushes++
	select {
	case <-s.seq:
	default:
	}
	s.seq <- s.pushes
}

// fullPush regenerates the Clusters, Listeners and Routes of the services
// that are new or whose hostname or ports changed since the last full push,
// and removes those of services and ports that vanished (generation); it
// regenerates the ClusterLoadAssignments of the services in ConfigsUpdated
// (all when empty) and of regenerated services, and removes those of
// vanished clusters. It returns the number of services and how many
// resources changed.
func (s *DiscoveryServer) fullPush(req *model.PushRequest) (services, changed int) {
	all := s.withPolicies(s.src.Services())
	prev, vanished := s.shards.swapPushed(all)
	g := diff(all, prev, vanished)
	changed = s.apply("clusters", func() (int, error) { return s.caches.clusters.apply(g.clusters, g.removed[0]) })
	changed += s.apply("listeners", func() (int, error) { return s.caches.listeners.apply(g.listeners, g.removed[1]) })
	changed += s.apply("routes", func() (int, error) { return s.caches.routes.apply(g.routes, g.removed[2]) })

	cla := make(map[string]types.Resource)
	if len(req.ConfigsUpdated) == 0 {
		for _, svc := range all {
			s.addLoadAssignments(cla, svc)
		}
	} else {
		for key := range req.ConfigsUpdated {
			if key.Kind != model.KindServiceEntry {
				continue // a DestinationRule's clusters are regenerated, below
			}
			if svc := s.shards.pushedService(key.Name, key.Namespace); svc != nil {
				s.addLoadAssignments(cla, svc)
			}
		}
		for _, svc := range g.regenerated {
			s.addLoadAssignments(cla, svc)
		}
	}
	return len(all), changed + s.apply("endpoints", func() (int, error) { return s.caches.endpoints.apply(cla, g.removed[3]) })
}

// edsPush regenerates the ClusterLoadAssignments of the services in
// ConfigsUpdated (all when empty) and hands only the changed ones to the
// cache, which wakes only the streams watching them. Services are looked up
// among those of the last full push, so the cost follows the change, not the
// mesh: services only come, go or change through a full push, and a service
// that push has not seen yet gets its assignments from the full push that
// follows it. It returns the number of services regenerated and how many
// assignments changed.
func (s *DiscoveryServer) edsPush(req *model.PushRequest) (services, changed int) {
	cla := make(map[string]types.Resource)
	if len(req.ConfigsUpdated) == 0 {
		all := s.shards.pushedServices()
		for _, svc := range all {
			s.addLoadAssignments(cla, svc)
		}
		services = len(all)
	}
	for key := range req.ConfigsUpdated {
		if svc := s.shards.pushedService(key.Name, key.Namespace); svc != nil {
			s.addLoadAssignments(cla, svc)
			services++
		}
	}
	return services, s.apply("endpoints", func() (int, error) { return s.caches.endpoints.apply(cla, nil) })
}

func (s *DiscoveryServer) addLoadAssignments(dst map[string]types.Resource, svc *model.Service) {
	cla, scaled := gen.LoadAssignments(svc, s.shards.encoded(svc.Hostname, svc.Namespace))
	for name, a := range cla {
		dst[name] = a
	}
	s.noteScaledWeights(svc, scaled)
}

// apply runs one cache update and logs its error. An error here means a
// resource could not be marshalled; the cache keeps what it held of it, so
// the next push hands it over again.
func (s *DiscoveryServer) apply(what string, update func() (int, error)) int {
	n, err := update()
	if err != nil {
		s.log.Error("Failed to update xDS cache", "kind", what, "err", err)
	}
	return n
}

// dominantReason returns the reason counted most often in r, ties broken
// towards the broader reason (global, service, config, endpoint), or
// "unknown" when r is empty. One label per push keeps
// sum(meshbridge_pushes_total) equal to the number of pushes.
func dominantReason(r model.ReasonStats) string {
	best, bestCount := reasonUnknownLabel, 0
	for _, reason := range []model.TriggerReason{model.GlobalUpdate, model.ServiceUpdate, model.ConfigUpdate, model.EndpointUpdate} {
		if r[reason] > bestCount {
			best, bestCount = string(reason), r[reason]
		}
	}
	return best
}

package xds

import (
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
)

// initialPush does the first full push, after which pushes are no longer
// dropped (see push).
func (s *DiscoveryServer) initialPush() {
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
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
	var changed int
	pushType := pushTypeEDS
	if req.Full {
		pushType = pushTypeFull
		changed = s.fullPush(req)
	} else {
		changed = s.edsPush(req)
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
	level("Pushed "+pushType, "reason", reason, "services", len(req.ConfigsUpdated), "count", changed, "duration", time.Since(began))

	s.pushes++
	select {
	case <-s.seq:
	default:
	}
	s.seq <- s.pushes
}

// fullPush regenerates Clusters, Listeners and Routes from every service and
// removes vanished ones; it regenerates the ClusterLoadAssignments of the
// services in ConfigsUpdated (all when empty) and of clusters new to the
// caches, and removes those of vanished clusters. It returns how many
// resources changed.
func (s *DiscoveryServer) fullPush(req *model.PushRequest) int {
	services := s.src.Services()
	clusters := asResources(buildClusters(services))
	changed := s.apply("clusters", func() (int, error) { return s.caches.clusters.replace(clusters) })
	changed += s.apply("listeners", func() (int, error) { return s.caches.listeners.replace(asResources(buildListeners(services))) })
	changed += s.apply("routes", func() (int, error) { return s.caches.routes.replace(asResources(buildRoutes(services))) })

	cla := make(map[string]types.Resource)
	for _, svc := range services {
		_, listed := req.ConfigsUpdated[model.ServiceKey(svc.Namespace, svc.Hostname)]
		if len(req.ConfigsUpdated) == 0 || listed || s.lacksLoadAssignment(svc) {
			s.addLoadAssignments(cla, svc)
		}
	}
	var vanished []string
	for _, name := range s.caches.endpoints.names() {
		if _, ok := clusters[name]; !ok {
			vanished = append(vanished, name)
		}
	}
	return changed + s.apply("endpoints", func() (int, error) { return s.caches.endpoints.apply(cla, vanished) })
}

// edsPush regenerates the ClusterLoadAssignments of the services in
// ConfigsUpdated (all when empty) and hands only the changed ones to the
// cache, which wakes only the streams watching them. A service the source no
// longer lists is skipped: the full push that removes it follows.
func (s *DiscoveryServer) edsPush(req *model.PushRequest) int {
	cla := make(map[string]types.Resource)
	for _, svc := range s.src.Services() {
		if _, listed := req.ConfigsUpdated[model.ServiceKey(svc.Namespace, svc.Hostname)]; listed || len(req.ConfigsUpdated) == 0 {
			s.addLoadAssignments(cla, svc)
		}
	}
	return s.apply("endpoints", func() (int, error) { return s.caches.endpoints.apply(cla, nil) })
}

func (s *DiscoveryServer) addLoadAssignments(dst map[string]types.Resource, svc *model.Service) {
	for name, cla := range buildLoadAssignments(svc, s.shards.endpoints(svc.Hostname, svc.Namespace)) {
		dst[name] = cla
	}
}

// lacksLoadAssignment reports whether a cluster of svc has no
// ClusterLoadAssignment in the cache yet (a new service or port).
func (s *DiscoveryServer) lacksLoadAssignment(svc *model.Service) bool {
	for _, port := range svc.Ports {
		if !s.caches.endpoints.has(ClusterName(port.Number, svc.Hostname)) {
			return true
		}
	}
	return false
}

// apply runs one cache update and logs its error. An error here means
// go-control-plane could not compute a response for some watch; the
// resourceSet then keeps its old record, so the next push hands the same
// resources over again.
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

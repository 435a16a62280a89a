package serviceentry

import (
	"log/slog"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/model"
)

// Controller is the ServiceEntry controller: it follows the store's
// ServiceEntries and WorkloadEntries, keeps the per-host services and their
// endpoints, and tells an XDSUpdater, per change, whether an incremental EDS
// push or a full push is needed. It mirrors Istio's ServiceEntry controller
// (pilot/pkg/serviceregistry/serviceentry/controller.go).
//
// Concurrency: handlers run on the store's single queue; Services may be
// called from any goroutine. XDSUpdater calls are made after the index lock
// is released, so the updater may call Services.
type Controller struct {
	xds XDSUpdater
	log *slog.Logger
	now func() time.Time

	mu  sync.RWMutex
	idx *index
}

// NewController registers the controller's handlers on store. Call it before
// store.Run.
func NewController(store *Store, xds XDSUpdater, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{xds: xds, log: log.With("component", "serviceentry"), now: time.Now, idx: newIndex()}
	store.RegisterEventHandler(model.KindServiceEntry, c.serviceEntryHandler)
	store.RegisterEventHandler(model.KindWorkloadEntry, c.workloadEntryHandler)
	return c
}

// Services returns every service (one per ServiceEntry host), sorted by
// namespace and host. The slice and its elements are read-only.
func (c *Controller) Services() []*model.Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idx.allServices()
}

// Endpoints returns the current endpoints of host in namespace, or nil.
func (c *Controller) Endpoints(namespace, host string) []*model.Endpoint {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.idx.definer(namespace, host)
	if e == nil {
		return nil
	}
	for _, svc := range e.services {
		if svc.Hostname == host {
			return c.idx.endpoints(svc)
		}
	}
	return nil
}

// startOf is the PushRequest.Start of an event on cfg: the registry
// observation that caused it (Meta.Observed), or now for a change no
// observation caused. So a registry-caused push measures its convergence
// from the registry, not from this handler.
func (c *Controller) startOf(obj model.Object) time.Time {
	if obs := obj.ObservedAt(); obs != nil {
		return *obs
	}
	return c.now()
}

// ShardKey is the one endpoint shard the controller writes
// (XDSUpdater's shard). The controller computes a host's endpoints from
// every WorkloadEntry and inline endpoint its index holds, whichever
// registry produced them, so each EDSUpdate is the host's whole set and one
// owner suffices. Istio keys shards by the registry that contributes them
// (model.ShardKeyFromRegistry: cluster and provider), fixed for the
// controller's life; a key taken from the object (its meshbridge.io/registry
// label) changes when another registry takes a ServiceEntry over, and the
// former owner's shard would stay behind, served.
const ShardKey = "serviceentry"

// hostEndpoints pairs a service with its endpoints, computed under the lock
// and handed to the XDSUpdater after it is released.
type hostEndpoints struct {
	svc       *model.Service
	endpoints []*model.Endpoint
}

func (c *Controller) endpointsOf(svcs []*model.Service) []hostEndpoints {
	out := make([]hostEndpoints, 0, len(svcs))
	for _, svc := range svcs {
		out = append(out, hostEndpoints{svc: svc, endpoints: c.idx.endpoints(svc)})
	}
	return out
}

package serviceentry

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/model"
)

// serviceEntryHandler applies a ServiceEntry event to the index and makes
// the push that decideServiceEntry calls for: SvcUpdate for every added,
// updated and deleted host; then either an incremental EDSUpdate per
// unchanged host, or an EDS cache update (no push) for the remaining hosts
// and one full PushRequest with Reason ServiceUpdate.
func (c *Controller) serviceEntryHandler(old, cur *model.Config, event model.Event) {
	key := cur.Key()
	curSvcs := convertServices(cur)

	c.mu.Lock()
	oldSvcs := c.idx.services[key]
	if event == model.EventDelete {
		c.idx.putEntry(key, nil, nil)
	} else {
		c.idx.putEntry(key, cur, curSvcs)
	}
	d := decideServiceEntry(oldSvcs, curSvcs, event, inlineEndpointsChanged(old, cur))
	var eds []hostEndpoints
	if d.Full() {
		eds = c.endpointsOf(slices.Concat(d.Added, d.Updated, d.Unchanged))
	} else {
		eds = c.endpointsOf(d.Unchanged)
	}
	c.mu.Unlock()

	shard, start := shardOf(cur), c.startOf(cur)
	for _, svc := range d.Added {
		c.xds.SvcUpdate(shard, svc.Hostname, svc.Namespace, model.EventAdd)
	}
	for _, svc := range d.Updated {
		c.xds.SvcUpdate(shard, svc.Hostname, svc.Namespace, model.EventUpdate)
	}
	for _, svc := range d.Deleted {
		c.xds.SvcUpdate(shard, svc.Hostname, svc.Namespace, model.EventDelete)
	}
	if !d.Full() {
		for _, he := range eds {
			c.xds.EDSUpdate(shard, he.svc.Hostname, he.svc.Namespace, he.endpoints, start)
		}
		return
	}
	for _, he := range eds {
		c.xds.EDSCacheUpdate(shard, he.svc.Hostname, he.svc.Namespace, he.endpoints)
	}
	c.xds.ConfigUpdate(&model.PushRequest{
		Full:           true,
		ConfigsUpdated: d.ConfigsUpdated,
		Reason:         model.NewReason(model.ServiceUpdate),
		Start:          start,
	})
	c.log.Debug("Handled ServiceEntry event", "name", cur.Name, "namespace", cur.Namespace,
		"event", event.String(), "count", len(d.ConfigsUpdated))
}

// inlineEndpointsChanged reports whether an update changed a ServiceEntry's
// inline endpoints (what decides rule 4 of decideServiceEntry).
func inlineEndpointsChanged(old, cur *model.Config) bool {
	if old == nil || cur == nil {
		return false
	}
	a, b := old.ServiceEntry().GetEndpoints(), cur.ServiceEntry().GetEndpoints()
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return true
		}
	}
	return false
}

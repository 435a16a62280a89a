package serviceentry

import (
	"slices"

	"github.com/meshbridge/meshbridge/model"
)

// serviceEntryHandler applies a ServiceEntry event to the index and makes
// the push that decideServiceEntry calls for: SvcUpdate for every added,
// updated and deleted host; an incremental EDSUpdate per unchanged host;
// and, when hosts were added or updated, an EDS cache update (no push) for
// them and one full PushRequest with Reason ServiceUpdate, which the
// debounce merges with the EDS requests of the same event.
func (c *Controller) serviceEntryHandler(_, curObj model.Object, event model.Event) {
	cur := curObj.(*model.Config)
	key := cur.Key()
	curSvcs := convertServices(cur)

	c.mu.Lock()
	oldSvcs := c.idx.servicesOf(key)
	if event == model.EventDelete {
		c.idx.putEntry(key, nil, nil)
	} else {
		c.idx.putEntry(key, cur, curSvcs)
	}
	d := decideServiceEntry(oldSvcs, curSvcs, event)
	unchanged := c.endpointsOf(d.Unchanged)
	var changed []hostEndpoints
	if d.Full() {
		changed = c.endpointsOf(slices.Concat(d.Added, d.Updated))
	}
	c.mu.Unlock()

	shard, start := ShardKey, c.startOf(cur)
	for _, svc := range d.Added {
		c.xds.SvcUpdate(shard, svc.Hostname, svc.Namespace, model.EventAdd)
	}
	for _, svc := range d.Updated {
		c.xds.SvcUpdate(shard, svc.Hostname, svc.Namespace, model.EventUpdate)
	}
	for _, svc := range d.Deleted {
		c.xds.SvcUpdate(shard, svc.Hostname, svc.Namespace, model.EventDelete)
	}
	for _, he := range unchanged {
		c.xds.EDSUpdate(shard, he.svc.Hostname, he.svc.Namespace, he.endpoints, start)
	}
	if !d.Full() {
		return
	}
	for _, he := range changed {
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

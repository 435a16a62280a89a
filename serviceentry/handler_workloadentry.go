package serviceentry

import (
	"github.com/meshbridge/meshbridge/model"
)

// workloadEntryHandler applies a WorkloadEntry event to the index and pushes
// the endpoints of every service that selects the workload before or after
// the event (decideWorkloadEntry): incrementally, or, when a DNS-resolution
// service is among them, as an EDS cache update plus one full push for those
// hosts with Reason EndpointUpdate.
//
// meshbridge's watchers never emit unhealthy instances, so a WorkloadEntry
// carries no health condition and Istio's "unhealthy counts as delete" rule
// has nothing to act on.
func (c *Controller) workloadEntryHandler(old, cur *model.Config, event model.Event) {
	c.mu.Lock()
	var oldSel, newSel []*model.Service
	switch event {
	case model.EventDelete:
		oldSel = c.idx.selecting(cur.Namespace, cur.Labels)
		c.idx.putWorkload(cur, true)
	case model.EventUpdate:
		oldSel = c.idx.selecting(old.Namespace, old.Labels)
		c.idx.putWorkload(cur, false)
		newSel = c.idx.selecting(cur.Namespace, cur.Labels)
	default:
		c.idx.putWorkload(cur, false)
		newSel = c.idx.selecting(cur.Namespace, cur.Labels)
	}
	d := decideWorkloadEntry(oldSel, newSel)
	eds := c.endpointsOf(d.Hosts)
	shards := make([]string, len(d.Hosts))
	for i, svc := range d.Hosts {
		shards[i] = shardOf(c.idx.entries[c.idx.hosts[labelKey(svc.Namespace, svc.Hostname)]])
	}
	c.mu.Unlock()

	full, start := len(d.ConfigsUpdated) > 0, c.startOf(cur)
	for i, he := range eds {
		if full {
			c.xds.EDSCacheUpdate(shards[i], he.svc.Hostname, he.svc.Namespace, he.endpoints)
		} else {
			c.xds.EDSUpdate(shards[i], he.svc.Hostname, he.svc.Namespace, he.endpoints, start)
		}
	}
	if full {
		c.xds.ConfigUpdate(&model.PushRequest{
			Full:           true,
			ConfigsUpdated: d.ConfigsUpdated,
			Reason:         model.NewReason(model.EndpointUpdate),
			Start:          start,
		})
	}
}

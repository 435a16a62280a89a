package serviceentry

import (
	"github.com/meshbridge/meshbridge/model"
)

// workloadEntryHandler applies a WorkloadEntry event to the index and pushes
// the endpoints of every service that selects the workload before or after
// the event (decideWorkloadEntry), incrementally.
//
// meshbridge's watchers never emit unhealthy instances, so a WorkloadEntry
// carries no health condition and Istio's "unhealthy counts as delete" rule
// has nothing to act on.
func (c *Controller) workloadEntryHandler(oldObj, curObj model.Object, event model.Event) {
	cur := curObj.(*model.WorkloadEntry)
	c.mu.Lock()
	var oldSel, newSel []*model.Service
	switch event {
	case model.EventDelete:
		oldSel = c.idx.selecting(cur.Namespace(), cur.Group.MetaLabel)
		c.idx.putWorkload(cur, nil)
	case model.EventUpdate:
		old := oldObj.(*model.WorkloadEntry)
		oldSel = c.idx.selecting(old.Namespace(), old.Group.MetaLabel)
		c.idx.putWorkload(old, cur)
		newSel = c.idx.selecting(cur.Namespace(), cur.Group.MetaLabel)
	default:
		c.idx.putWorkload(nil, cur)
		newSel = c.idx.selecting(cur.Namespace(), cur.Group.MetaLabel)
	}
	hosts := decideWorkloadEntry(oldSel, newSel)
	eds := c.endpointsOf(hosts)
	c.mu.Unlock()

	start := c.startOf(cur)
	for _, he := range eds {
		c.xds.EDSUpdate(ShardKey, he.svc.Hostname, he.svc.Namespace, he.endpoints, start)
	}
}

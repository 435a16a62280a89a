package serviceentry

import (
	"maps"
	"slices"

	"github.com/meshbridge/meshbridge/model"
)

// serviceEntryDecision is what one ServiceEntry event asks of the xDS server.
type serviceEntryDecision struct {
	Added, Updated, Deleted, Unchanged []*model.Service
	// ConfigsUpdated names every host whose clusters, listeners or routes
	// may change. Empty means the event only touches endpoints.
	ConfigsUpdated map[model.ConfigKey]struct{}
}

// Full reports whether the decision needs a full push.
func (d serviceEntryDecision) Full() bool { return len(d.ConfigsUpdated) > 0 }

// decideServiceEntry mirrors Istio's serviceEntryHandler
// (pilot/pkg/serviceregistry/serviceentry/controller.go, release-1.29):
//
//  1. add: every host is added; delete: every host is deleted;
//  2. update: hosts are diffed by service equality (servicesEqual: ports,
//     labels, selector, exportTo, addresses, resolution, location — never
//     endpoints);
//  3. added, updated and deleted hosts go into ConfigsUpdated;
//  4. an unchanged host of a DNS-resolution entry whose endpoints changed goes
//     into ConfigsUpdated too (its clusters carry the endpoints);
//  5. no ConfigsUpdated: the event is an incremental EDS push for every
//     unchanged host; otherwise one full push.
func decideServiceEntry(old, cur []*model.Service, event model.Event, endpointsChanged bool) serviceEntryDecision {
	var d serviceEntryDecision
	switch event {
	case model.EventAdd:
		d.Added = cur
	case model.EventDelete:
		d.Deleted = cur
	default:
		d.Added, d.Deleted, d.Updated, d.Unchanged = servicesDiff(old, cur)
	}
	d.ConfigsUpdated = make(map[model.ConfigKey]struct{})
	for _, group := range [][]*model.Service{d.Added, d.Updated, d.Deleted} {
		for _, svc := range group {
			d.ConfigsUpdated[model.ServiceKey(svc.Namespace, svc.Hostname)] = struct{}{}
		}
	}
	if endpointsChanged {
		for _, svc := range d.Unchanged {
			if svc.Resolution == model.ResolutionDNS {
				d.ConfigsUpdated[model.ServiceKey(svc.Namespace, svc.Hostname)] = struct{}{}
			}
		}
	}
	return d
}

// servicesDiff splits two host lists of one ServiceEntry into added, deleted,
// updated and unchanged services, comparing by host.
func servicesDiff(old, cur []*model.Service) (added, deleted, updated, unchanged []*model.Service) {
	oldByHost := make(map[string]*model.Service, len(old))
	for _, s := range old {
		oldByHost[s.Hostname] = s
	}
	for _, s := range cur {
		o, ok := oldByHost[s.Hostname]
		switch {
		case !ok:
			added = append(added, s)
		case servicesEqual(o, s):
			unchanged = append(unchanged, s)
		default:
			updated = append(updated, s)
		}
		delete(oldByHost, s.Hostname)
	}
	for _, s := range old {
		if _, gone := oldByHost[s.Hostname]; gone {
			deleted = append(deleted, s)
		}
	}
	return added, deleted, updated, unchanged
}

// servicesEqual reports whether two services generate the same clusters,
// listeners and routes (Istio model.Service.Equals without endpoints).
func servicesEqual(a, b *model.Service) bool {
	return a.Hostname == b.Hostname && a.Namespace == b.Namespace &&
		a.Resolution == b.Resolution && a.MeshExternal == b.MeshExternal &&
		slices.Equal(a.Ports, b.Ports) && slices.Equal(a.ExportTo, b.ExportTo) &&
		slices.Equal(a.Addresses, b.Addresses) &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Selector, b.Selector)
}

// workloadEntryDecision is what one WorkloadEntry event asks of the xDS
// server: recompute the endpoints of Hosts, then push them incrementally, or
// fully when a DNS-resolution entry selects the workload.
type workloadEntryDecision struct {
	Hosts []*model.Service
	// ConfigsUpdated is non-empty when a full push is needed.
	ConfigsUpdated map[model.ConfigKey]struct{}
}

// decideWorkloadEntry mirrors Istio's workloadEntryHandler: the services a
// workload is selected by before or after the event (union of old and new
// selection, so an entry that stops matching loses the instance) get their
// endpoints recomputed; a DNS-resolution service among them needs a full
// push for its hosts, the others an incremental EDS push.
func decideWorkloadEntry(oldSelected, newSelected []*model.Service) workloadEntryDecision {
	var d workloadEntryDecision
	seen := make(map[model.ConfigKey]bool, len(oldSelected)+len(newSelected))
	for _, group := range [][]*model.Service{oldSelected, newSelected} {
		for _, svc := range group {
			key := model.ServiceKey(svc.Namespace, svc.Hostname)
			if seen[key] {
				continue
			}
			seen[key] = true
			d.Hosts = append(d.Hosts, svc)
			if svc.Resolution == model.ResolutionDNS {
				if d.ConfigsUpdated == nil {
					d.ConfigsUpdated = make(map[model.ConfigKey]struct{})
				}
				d.ConfigsUpdated[key] = struct{}{}
			}
		}
	}
	return d
}

package serviceentry

import (
	"github.com/meshbridge/meshbridge/model"
)

// serviceEntryDecision is what one ServiceEntry event asks of the xDS server.
type serviceEntryDecision struct {
	Added, Updated, Deleted, Unchanged []*model.Service
	// ConfigsUpdated names every host whose clusters, listeners or routes
	// change. Empty means the event only touches endpoints.
	ConfigsUpdated map[model.ConfigKey]struct{}
}

// Full reports whether the decision needs a full push.
func (d serviceEntryDecision) Full() bool { return len(d.ConfigsUpdated) > 0 }

// decideServiceEntry follows Istio's serviceEntryHandler
// (pilot/pkg/serviceregistry/serviceentry/controller.go, release-1.29),
// stricter where Istio pushes fully for a change no generated resource
// shows (docs/design.md §5: a full push exactly when some client's clusters,
// listeners or routes must change):
//
//  1. add: every host is added; delete: every host is deleted;
//  2. update: hosts are diffed by what the CDS, LDS and RDS generators read
//     (model.Service.SameGeneratorInputs: host, namespace, ports), not by Istio's service
//     equality: a change of labels, workload selector, exportTo, addresses,
//     resolution or location changes no Cluster, Listener or
//     RouteConfiguration meshbridge serves (every cluster is type EDS), so
//     the host is unchanged;
//  3. added, updated and deleted hosts go into ConfigsUpdated (one full
//     push);
//  4. every unchanged host gets its endpoints recomputed and pushed as EDS
//     (new inline endpoints, a new selector, DNS-resolution endpoints alike:
//     Istio pushes a DNS entry's endpoint change fully because its clusters
//     carry them, meshbridge's do not).
func decideServiceEntry(old, cur []*model.Service, event model.Event) serviceEntryDecision {
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
		case o.SameGeneratorInputs(s):
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

// decideWorkloadEntry follows Istio's workloadEntryHandler: the services a
// workload is selected by before or after the event (union of old and new
// selection, so an entry that stops matching loses the instance) get their
// endpoints recomputed and pushed as EDS. Istio pushes fully for a
// DNS-resolution service (its clusters carry the endpoints); meshbridge's
// clusters are type EDS, so a workload never needs a full push.
func decideWorkloadEntry(oldSelected, newSelected []*model.Service) []*model.Service {
	var hosts []*model.Service
	seen := make(map[model.ConfigKey]bool, len(oldSelected)+len(newSelected))
	for _, group := range [][]*model.Service{oldSelected, newSelected} {
		for _, svc := range group {
			key := model.ServiceKey(svc.Namespace, svc.Hostname)
			if seen[key] {
				continue
			}
			seen[key] = true
			hosts = append(hosts, svc)
		}
	}
	return hosts
}

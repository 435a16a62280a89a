package xds

import (
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// A full push diffs the services against those of the last full push
// (endpointShards.swapPushed): what the caches' Clusters, Listeners and
// RouteConfigurations were generated from. The generators read nothing of a
// service but its generator inputs (model.Service.SameGeneratorInputs:
// hostname, ports, DestinationRule, VirtualService, providers' defaults),
// so a full push generates only the services whose inputs differ, removes
// the resources of those gone (a port's, a subset's: gen.ClusterNames), and hands
// the caches nothing for the others: the caches hold the one encoding of
// each resource, and nothing else keeps a copy.

// generation is what a full push hands the caches for services: the
// Clusters, Listeners and RouteConfigurations of the services that are new
// or whose inputs changed, the names of those that vanished (with the
// ClusterLoadAssignments of vanished clusters), and the services whose
// clusters are new, which need their ClusterLoadAssignments.
type generation struct {
	clusters, listeners, routes map[string]types.Resource
	// removed are the names of vanished resources: clusters, listeners,
	// routes, ClusterLoadAssignments; removedHosts their hosts.
	removed      [4][]string
	removedHosts map[string]bool
	regenerated  []*model.Service
}

// diff returns the generation that takes the caches from the last full
// push's services to services: prev[i] is the last push's service under
// services[i]'s (host, namespace), nil when none; vanished are the last
// push's services that services lacks.
func diff(services, prev, vanished []*model.Service) generation {
	g := generation{
		clusters:  map[string]types.Resource{},
		listeners: map[string]types.Resource{},
		routes:    map[string]types.Resource{},
	}
	for i, svc := range services {
		if prev[i] != nil && prev[i].SameGeneratorInputs(svc) {
			continue
		}
		clusters, listeners, routes := gen.Resources(svc)
		add(g.clusters, clusters)
		add(g.listeners, listeners)
		add(g.routes, routes)
		g.regenerated = append(g.regenerated, svc)
		if prev[i] != nil {
			g.removeVanished(prev[i], svc)
		}
	}
	for _, svc := range vanished {
		g.removeVanished(svc, nil)
	}
	g.keepNamesInUse(services)
	return g
}

// keepNamesInUse drops from the removals the names a service still
// generates: a cluster is named after host and port, not namespace, so a
// host moving to another namespace keeps its names.
func (g *generation) keepNamesInUse(services []*model.Service) {
	if len(g.removedHosts) == 0 {
		return
	}
	inUse := map[string]bool{}
	for _, svc := range services {
		if !g.removedHosts[svc.Hostname] {
			continue
		}
		for _, name := range gen.AssignmentNames(svc) {
			inUse[name] = true
		}
		for _, p := range svc.Ports {
			inUse[gen.ListenerName(p.Number, svc.Hostname)] = true
		}
	}
	for i, names := range g.removed {
		g.removed[i] = slices.DeleteFunc(names, func(name string) bool { return inUse[name] })
	}
}

func add(dst map[string]types.Resource, resources []types.Resource) {
	for _, res := range resources {
		dst[res.(types.ResourceWithName).GetName()] = res
	}
}

// removeVanished notes the resources of prev that cur (nil: none) no
// longer has: the clusters of its ports and subsets (gen.ClusterNames),
// their ClusterLoadAssignments (gen.AssignmentNames, with the refused
// forms of TLS clusters), the listeners and routes of its ports.
func (g *generation) removeVanished(prev, cur *model.Service) {
	var keep, keepAssignments []string
	if cur != nil {
		keep, keepAssignments = gen.ClusterNames(cur), gen.AssignmentNames(cur)
	}
	for _, cluster := range gen.ClusterNames(prev) {
		if !slices.Contains(keep, cluster) {
			g.removed[0] = append(g.removed[0], cluster)
			g.noteHost(prev.Hostname)
		}
	}
	for _, name := range gen.AssignmentNames(prev) {
		if !slices.Contains(keepAssignments, name) {
			g.removed[3] = append(g.removed[3], name)
			g.noteHost(prev.Hostname)
		}
	}
	for _, p := range prev.Ports {
		if cur != nil && slices.ContainsFunc(cur.Ports, func(q model.Port) bool { return q.Number == p.Number }) {
			continue
		}
		listener := gen.ListenerName(p.Number, prev.Hostname)
		g.removed[1] = append(g.removed[1], listener)
		g.removed[2] = append(g.removed[2], listener)
		g.noteHost(prev.Hostname)
	}
}

func (g *generation) noteHost(host string) {
	if g.removedHosts == nil {
		g.removedHosts = map[string]bool{}
	}
	g.removedHosts[host] = true
}

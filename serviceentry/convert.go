package serviceentry

import (
	"slices"
	"strings"
	"sync"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// convertServices turns a ServiceEntry into one model.Service per host, the
// unit clusters, listeners and routes are generated from (Istio
// serviceentry/conversion.go convertServices).
func convertServices(cfg *model.Config) []*model.Service {
	se := cfg.ServiceEntry()
	if se == nil {
		return nil
	}
	var ports []model.Port
	if len(se.Ports) == 1 {
		ports = onePort(modelPort(se.Ports[0]))
	} else {
		ports = make([]model.Port, 0, len(se.Ports))
		for _, p := range se.Ports {
			ports = append(ports, modelPort(p))
		}
		slices.SortFunc(ports, func(a, b model.Port) int { return int(a.Number) - int(b.Number) })
	}
	resolution := model.ResolutionStatic
	if se.Resolution == networking.ServiceEntry_DNS || se.Resolution == networking.ServiceEntry_DNS_ROUND_ROBIN {
		resolution = model.ResolutionDNS
	}
	var selector map[string]string
	if se.WorkloadSelector != nil {
		selector = se.WorkloadSelector.Labels
	}
	// Written by translate; one that does not parse (edited by hand, in a
	// Kubernetes-read object) declares nothing.
	defaults, _ := model.ParseRouteDefaults(cfg.Annotations[model.AnnotationDubboDefaults])
	out := make([]*model.Service, 0, len(se.Hosts))
	for _, host := range se.Hosts {
		out = append(out, &model.Service{
			Hostname:     host,
			Namespace:    cfg.Namespace,
			Ports:        ports,
			Resolution:   resolution,
			Labels:       cfg.Labels,
			Selector:     selector,
			ExportTo:     se.ExportTo,
			Addresses:    se.Addresses,
			MeshExternal: se.Location == networking.ServiceEntry_MESH_EXTERNAL,
			Defaults:     defaults,
		})
	}
	return out
}

func modelPort(p *networking.ServicePort) model.Port {
	return model.Port{Name: p.Name, Number: p.Number, Protocol: model.Protocol(strings.ToUpper(p.Protocol))}
}

// onePort returns the ports of a service with the one port p: a slice of
// length and capacity 1 shared by every such service (services are
// read-only; an append copies it), instead of one per service.
func onePort(p model.Port) []model.Port {
	if ports, ok := onePorts.Load(p); ok {
		return ports.([]model.Port)
	}
	ports, _ := onePorts.LoadOrStore(p, []model.Port{p})
	return ports.([]model.Port)
}

var onePorts sync.Map // model.Port → []model.Port

// workload is what the endpoints of a workload are made of: a
// WorkloadEntry's, or an inline endpoint's of the ServiceEntry. Its
// endpoint is every endpoint's but for the port (ServicePortName and
// EndpointPort), which workloadEndpoints sets per port of the service from
// ports. The fields of istio.io/api's WorkloadEntry it carries, and those it
// does not, are held against the descriptor by
// TestWorkloadEndpointsKnowEveryField.
type workload struct {
	endpoint model.Endpoint
	ports    map[string]uint32
}

// inlineWorkload is the workload of an inline endpoint of the ServiceEntry
// named name.
func inlineWorkload(we *networking.WorkloadEntry, name string) workload {
	return workload{endpoint: model.Endpoint{Address: we.Address, Labels: we.Labels, Weight: we.Weight, Locality: we.Locality,
		ServiceAccount: we.ServiceAccount, WorkloadName: name}, ports: we.Ports}
}

// workloadOf is the workload of a WorkloadEntry, with its Labels: the
// spec's less the group's selection label.
func workloadOf(w *model.WorkloadEntry) workload {
	return workload{endpoint: model.Endpoint{Address: w.Address, Labels: w.Labels, Weight: w.Weight, Locality: w.Locality(),
		ServiceAccount: w.ServiceAccount(), WorkloadName: w.Name()}, ports: w.Ports()}
}

// workloadEndpoints returns one endpoint per port of svc for a workload (a
// WorkloadEntry, or an inline endpoint of the ServiceEntry). The target port
// is the workload's port of the same name, else the service port's number
// (Istio serviceentry/conversion.go convertWorkloadEntryToServiceInstances).
// The weight is the workload's as it is: what clients are sent for it is
// xds/gen's rule.
func workloadEndpoints(svc *model.Service, targetPorts map[string]uint32, we workload) []*model.Endpoint {
	out := make([]*model.Endpoint, 0, len(svc.Ports))
	for _, p := range svc.Ports {
		port := p.Number
		if tp, ok := we.ports[p.Name]; ok && tp != 0 {
			port = tp
		} else if tp := targetPorts[p.Name]; tp != 0 {
			port = tp
		}
		ep := we.endpoint
		ep.ServicePortName, ep.EndpointPort = p.Name, port
		out = append(out, &ep)
	}
	return out
}

// targetPorts maps a ServiceEntry's port names to their target ports (0 when
// none is set).
func targetPorts(se *networking.ServiceEntry) map[string]uint32 {
	out := make(map[string]uint32, len(se.Ports))
	for _, p := range se.Ports {
		out[p.Name] = p.TargetPort
	}
	return out
}

// selects reports whether a workload selector selects labels: every selector
// label must be present with the same value; an empty selector selects nothing
// (a ServiceEntry without selector lists its endpoints inline).
// The workload's labels are read through label, which looks one up
// (model.WorkloadGroup.MetaLabel, or a map's: mapLabel).
func selects(selector map[string]string, label func(string) (string, bool)) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if lv, ok := label(k); !ok || lv != v {
			return false
		}
	}
	return true
}

// mapLabel looks labels up in m.
func mapLabel(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

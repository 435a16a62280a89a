package xds

import (
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// Policies gives the DestinationRule and the VirtualService of a host
// (package policy's Rules): the same object for as long as it is
// unchanged.
type Policies interface {
	For(host string) *networking.DestinationRule
	RoutingFor(host string) *networking.VirtualService
}

// SetPolicies makes p the traffic policy of the clusters and routes
// served (nil: none) and pushes: a full push, which regenerates only the
// resources of hosts whose DestinationRule or VirtualService changed
// (model.Service.Policy and Routing are generator inputs, compared by
// identity) and sends only those. Safe for concurrent use.
func (s *DiscoveryServer) SetPolicies(p Policies) {
	s.policies.Store(&p)
	s.ConfigUpdate(&model.PushRequest{
		Full:           true,
		ConfigsUpdated: map[model.ConfigKey]struct{}{{Kind: model.KindDestinationRule}: {}},
		Reason:         model.NewReason(model.ConfigUpdate),
		Start:          time.Now(),
	})
}

// withPolicies returns services with each one's DestinationRule and
// VirtualService set: a copy of a service that has either (the source's
// are shared and read only), the service itself otherwise. The copy made
// for a source service and its objects is kept (s.attached) and reused
// while they stay, so that a
// full push that changes neither allocates nothing and the pushed service
// keeps its identity (model.Service.SameGeneratorInputs answers at once).
// s.pushMu is held.
func (s *DiscoveryServer) withPolicies(services []*model.Service) []*model.Service {
	p := s.policies.Load()
	if p == nil || *p == nil {
		clear(s.attached)
		return services
	}
	if s.attached == nil {
		s.attached = map[*model.Service]*model.Service{}
	}
	out := make([]*model.Service, len(services))
	for i, svc := range services {
		out[i] = svc
		dr, vs := (*p).For(svc.Hostname), (*p).RoutingFor(svc.Hostname)
		if dr == nil && vs == nil {
			continue
		}
		c := s.attached[svc]
		if c == nil || c.Policy != dr || c.Routing != vs {
			cp := *svc
			cp.Policy, cp.Routing = dr, vs
			c = &cp
			s.attached[svc] = c
		}
		out[i] = c
	}
	// Forget the copies of services the source replaced or dropped once
	// they would make up most of the map.
	if len(s.attached) > 2*len(services)+1024 {
		keep := make(map[*model.Service]*model.Service, len(services))
		for _, svc := range services {
			if c := s.attached[svc]; c != nil {
				keep[svc] = c
			}
		}
		s.attached = keep
	}
	return out
}

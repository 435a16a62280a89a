package xds

import (
	"slices"
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
// are shared and read only), the service itself otherwise. What a source
// service was pushed as is kept (s.attached) and reused while the
// policies are the same (s.attachedFrom, the pointer SetPolicies stored),
// without looking the host up again; after SetPolicies each host is
// looked up once more, and a copy whose objects did not change is kept.
// So a full push that changes neither costs one map lookup per service
// (none for a service at the index it had in the last push, and no
// allocation when every service is where it was), and the pushed service
// keeps its identity (model.Service.SameGeneratorInputs answers at once).
// s.pushMu is held.
func (s *DiscoveryServer) withPolicies(services []*model.Service) []*model.Service {
	p := s.policies.Load()
	if p == nil || *p == nil {
		clear(s.attached)
		s.attachedFrom, s.lastSrc, s.lastOut = nil, nil, nil
		return services
	}
	if s.attached == nil {
		s.attached = map[*model.Service]*model.Service{}
	}
	same := s.attachedFrom == p
	s.attachedFrom = p
	if same && slices.Equal(services, s.lastSrc) {
		return s.lastOut // the same services under the same policies: the same result, read-only
	}
	out := make([]*model.Service, len(services))
	for i, svc := range services {
		if same && i < len(s.lastSrc) && s.lastSrc[i] == svc {
			out[i] = s.lastOut[i]
			continue
		}
		c, ok := s.attached[svc]
		if ok && same {
			out[i] = c
			continue
		}
		dr, vs := (*p).For(svc.Hostname), (*p).RoutingFor(svc.Hostname)
		switch {
		case dr == nil && vs == nil:
			c = svc
		case c == nil || c == svc || c.Policy != dr || c.Routing != vs:
			cp := *svc
			cp.Policy, cp.Routing = dr, vs
			c = &cp
		}
		s.attached[svc] = c
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
	s.lastSrc, s.lastOut = services, out
	return out
}

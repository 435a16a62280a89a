package xds

import (
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// Policies gives the DestinationRule of a host (package policy's Rules):
// the same object for as long as the rule is unchanged.
type Policies interface {
	For(host string) *networking.DestinationRule
}

// SetPolicies makes p the traffic policy of the clusters served (nil:
// none) and pushes: a full push, which regenerates only the clusters of
// hosts whose rule changed (model.Service.Policy is a generator input,
// compared by identity) and sends only those. Safe for concurrent use.
func (s *DiscoveryServer) SetPolicies(p Policies) {
	s.policies.Store(&p)
	s.ConfigUpdate(&model.PushRequest{
		Full:           true,
		ConfigsUpdated: map[model.ConfigKey]struct{}{{Kind: model.KindDestinationRule}: {}},
		Reason:         model.NewReason(model.ConfigUpdate),
		Start:          time.Now(),
	})
}

// withPolicies returns services with each one's DestinationRule set:
// a copy of a service that has one (the source's are shared and read
// only), the service itself otherwise.
func (s *DiscoveryServer) withPolicies(services []*model.Service) []*model.Service {
	p := s.policies.Load()
	if p == nil || *p == nil {
		return services
	}
	out := make([]*model.Service, len(services))
	for i, svc := range services {
		out[i] = svc
		if dr := (*p).For(svc.Hostname); dr != nil {
			c := *svc
			c.Policy = dr
			out[i] = &c
		}
	}
	return out
}

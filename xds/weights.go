package xds

import (
	"github.com/meshbridge/meshbridge/model"
)

// noteScaledWeights records whether svc's assignments, as just built, had
// their weights scaled down (weightScale; scaled names the clusters): a
// service that starts to need it is logged once and counted in
// meshbridge_xds_scaled_weights_total, and again only after a build that
// needed none. Registries cap one instance's weight, not their sum, so a
// service of many heavy instances passes validation and still sums past
// what clients accept. Push goroutine only (pushMu held).
func (s *DiscoveryServer) noteScaledWeights(svc *model.Service, scaled []string) {
	key := model.ServiceKey(svc.Namespace, svc.Hostname)
	if len(scaled) == 0 {
		delete(s.scaled, key)
		return
	}
	if s.scaled[key] {
		return
	}
	if s.scaled == nil {
		s.scaled = map[model.ConfigKey]bool{}
	}
	s.scaled[key] = true
	scaledWeights.Inc()
	s.log.Warn("Scaled endpoint weights down to fit a ClusterLoadAssignment: their sum is past 4294967295, "+
		"which clients refuse; ratios are kept, each weight at least 1", "host", svc.Hostname,
		"namespace", svc.Namespace, "clusters", scaled)
}

package serviceentry

import "github.com/prometheus/client_golang/prometheus"

// Metric names are a contract (issue #2); labels stay low-cardinality.
var (
	rejectedInstances = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshbridge_translate_rejected_instances_total",
		Help: "Registry instances that were not translated, by registry and reason (invalid-address, hostname-address, invalid-port, duplicate-endpoint, host-collision, invalid-host).",
	}, []string{"registry", "reason"})
	registryServices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_services",
		Help: "Services the registry currently lists (last-known-good while it is unreachable).",
	}, []string{"registry"})
	registryInstances = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_instances",
		Help: "Usable instances the registry currently lists, before translation rejects any.",
	}, []string{"registry"})
)

// Collectors returns the package's metrics for registration.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{rejectedInstances, registryServices, registryInstances}
}

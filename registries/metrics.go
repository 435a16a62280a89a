package registries

import "github.com/prometheus/client_golang/prometheus"

// RegistryErrors counts failed registry reads; every watcher increments it.
// The reason label is low-cardinality (e.g. "catalog", "health", "parse",
// "read", "unavailable", "forbidden"). The name is a contract (issue #2).
var RegistryErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "meshbridge_registry_errors_total",
	Help: "Failed registry reads, by registry and reason. The registry's last-known-good state is kept.",
}, []string{"registry", "reason"})

// Collectors returns the metrics shared by every registry watcher.
func Collectors() []prometheus.Collector { return []prometheus.Collector{RegistryErrors} }

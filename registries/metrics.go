package registries

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// RegistryErrors counts failed registry reads; every watcher increments it
// through its Session (Health.Fail). The reason label is low-cardinality
// (e.g. "catalog", "health", "parse", "read", "unavailable", "forbidden").
// The name is part
// of the README's metrics contract.
var RegistryErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "meshbridge_registry_errors_total",
	Help: "Failed registry reads, by registry and reason. The registry's last-known-good state is kept.",
}, []string{"registry", "reason"})

// RegistrySkipped counts services a watcher found in its registry and left
// out on purpose, by reason: "dubbo" for Dubbo services in Nacos while the
// nacos registry's dubbo.enabled is false, "invalid" for a file registry's
// service whose fields it cannot serve. Each service counts once per
// appearance (when a listing or read first finds it), not per listing.
var RegistrySkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "meshbridge_registry_skipped_total",
	Help: "Services a registry watcher found and left out on purpose, by registry and reason (dubbo: Dubbo services in Nacos while dubbo.enabled is false; invalid: a file's service whose fields it cannot serve, logged with the field).",
}, []string{"registry", "reason"})

// registryUp is Health's up/down state per registry.
var registryUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "meshbridge_registry_up",
	Help: "1 while the registry's last read succeeded, 0 from a failed read (or before the first read) until one succeeds.",
}, []string{"registry"})

// registryProtected counts, per registry, the services whose registry sends
// every instance, healthy or not, because too few are healthy: Nacos's
// protect threshold (registries/nacos doc.go rule 6).
var registryProtected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "meshbridge_registry_protected_services",
	Help: "Services whose registry lists every instance as healthy because the share of healthy ones is at or below the service's protect threshold (Nacos); their unhealthy instances are served.",
}, []string{"registry"})

// SetProtected sets meshbridge_registry_protected_services of registry to
// n, the number of its services in protection now.
func SetProtected(registry string, n int) {
	registryProtected.WithLabelValues(registry).Set(float64(n))
}

// upSeries are the registries whose meshbridge_registry_up series exists.
var upSeries sync.Map // registry name → struct{}

// Forget drops the metric series of a registry removed from the
// configuration (meshbridge_registry_up, meshbridge_registry_errors_total,
// meshbridge_registry_skipped_total, meshbridge_registry_protected_services,
// and a registry type's own, PerRegistry), so that no alert keeps firing for a registry that is gone.
func Forget(registry string) {
	perRegistry.Lock()
	for _, v := range perRegistry.vecs {
		v.DeletePartialMatch(prometheus.Labels{"registry": registry})
	}
	perRegistry.Unlock()
	upSeries.Delete(registry)
	listedRegistries.Delete(registry)
	registryUp.DeleteLabelValues(registry)
	RegistryErrors.DeletePartialMatch(prometheus.Labels{"registry": registry})
	RegistrySkipped.DeletePartialMatch(prometheus.Labels{"registry": registry})
	registryProtected.DeleteLabelValues(registry)
}

// perRegistry are the metric vectors of registry types' own packages,
// labelled by "registry", which Forget clears too (PerRegistry).
var perRegistry struct {
	sync.Mutex
	vecs []PartialDeleter
}

// PartialDeleter is a metric vector (prometheus.CounterVec, GaugeVec, ...).
type PartialDeleter interface {
	DeletePartialMatch(labels prometheus.Labels) int
}

// PerRegistry adds a registry type's own metric vectors, each with a
// "registry" label, to those Forget clears; adding one twice changes
// nothing.
func PerRegistry(vecs ...PartialDeleter) {
	perRegistry.Lock()
	defer perRegistry.Unlock()
	for _, v := range vecs {
		if !slices.Contains(perRegistry.vecs, v) {
			perRegistry.vecs = append(perRegistry.vecs, v)
		}
	}
}

// InitMetrics creates the series of registry at 0, one per reason of
// meshbridge_registry_errors_total (Type.ErrorReasons): increase() and
// rate() take a series' first sample as its start, so a series born at 1
// hides the first failure from every alert and panel.
func InitMetrics(registry string, reasons []string) {
	for _, reason := range reasons {
		RegistryErrors.WithLabelValues(registry, reason)
	}
}

// Collectors returns the metrics shared by every registry watcher.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{RegistryErrors, RegistrySkipped, registryUp, registryProtected}
}

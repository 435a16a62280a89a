package syncer

import "github.com/prometheus/client_golang/prometheus"

// Metric names are a contract (README "Metrics"); labels stay low-cardinality.
var (
	rejectedInstances = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshbridge_translate_rejected_instances_total",
		Help: "Registry instances that were not translated, by registry and reason (invalid-address, hostname-address, invalid-port, invalid-locality, duplicate-endpoint, duplicate-id, invalid-entry, malformed, host-collision, invalid-host).",
	}, []string{"registry", "reason"})
	// labelsChanged counts, per instance, each registry label translate
	// changed or dropped (translate.LabelChange, by Reason), once: when the
	// instance is first translated with the change, and again only after its
	// label or the outcome changed (translate.LabelChange.Repeated). A
	// snapshot that leaves an instance's labels alone counts nothing for it,
	// in either endpoint mode; a new instance counts its own changes.
	labelsChanged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshbridge_translate_labels_changed_total",
		Help: "Registry labels translate changed or dropped, counted once per instance until its label or the outcome changes, by registry and reason (key-changed, value-changed, truncated, invalid-key, invalid-value, reserved-prefix, collision, volatile, too-many-labels).",
	}, []string{"registry", "reason"})
	registryServices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_services",
		Help: "Services the registry currently lists (last-known-good while it is unreachable).",
	}, []string{"registry"})
	registryInstances = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_instances",
		Help: "Usable instances the registry currently lists, before translation rejects any.",
	}, []string{"registry"})
	registryServedInstances = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_served_instances",
		Help: "Instances of the registry that the aggregate registry serves: listed instances less those translation rejected and those of services that lost their host to another.",
	}, []string{"registry"})
)

var (
	registryLastSync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_last_sync_timestamp_seconds",
		Help: "When the registry last reported a complete read of its catalog (Unix seconds).",
	}, []string{"registry"})
	registryStale = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_stale",
		Help: "1 while anything of the registry is served from last-known-good state or from disk.",
	}, []string{"registry"})
	deleteGuardHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_delete_guard_held",
		Help: "1 while the registry's delete guard holds a listing's removals.",
	}, []string{"registry"})
	deleteGuardEngaged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshbridge_delete_guard_engaged_total",
		Help: "Times the registry's delete guard engaged.",
	}, []string{"registry"})
)

// Collectors returns the package's metrics for registration.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{rejectedInstances, labelsChanged, registryServices, registryInstances, registryServedInstances,
		registryLastSync, registryStale, deleteGuardHeld, deleteGuardEngaged}
}

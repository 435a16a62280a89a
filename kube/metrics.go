package kube

import "github.com/prometheus/client_golang/prometheus"

// Metric names are a contract (README "Metrics"); labels stay low-cardinality.
var (
	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshbridge_kube_writes_total",
		Help: "Writes to the Kubernetes apiserver, by op (create, update, delete) and result (ok, error: retried with backoff; invalid: a 4xx the apiserver will give again, not retried until the object changes; too_large: never sent).",
	}, []string{"op", "result"})
	conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "meshbridge_kube_conflicts_total",
		Help: "Objects meshbridge would write whose name is taken by an object without its ownership labels; they are left alone. Counted once per detection (at most once per resync).",
	})
	queueDepth = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "meshbridge_kube_queue_depth",
		Help: "Objects waiting in the Kubernetes writer's queue (each at most once, with its latest desired state).",
	})
	leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "meshbridge_kube_leader",
		Help: "1 while this replica holds the Kubernetes writer's lease (or leader election is off), else 0.",
	})
)

// writeOps and writeResults are the label values of
// meshbridge_kube_writes_total.
var (
	writeOps     = []string{OpCreate, OpUpdate, OpDelete}
	writeResults = []string{"ok", "error", "invalid", "too_large"}
)

// Collectors returns the package's metrics for registration, every known
// label value's series at 0: Prometheus's increase() and rate() take a
// series' first sample as its start, so a series born at 1 hides the first
// event from every alert and panel.
func Collectors() []prometheus.Collector {
	for _, op := range writeOps {
		for _, result := range writeResults {
			writes.WithLabelValues(op, result)
		}
	}
	return []prometheus.Collector{writes, conflicts, queueDepth, leader}
}

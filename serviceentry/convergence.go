package serviceentry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Convergence stages: the values of meshbridge_convergence_seconds' stage
// label. Each is measured from a registry observation
// (registries.Snapshot.Observed, carried as model.Meta.Observed and then
// model.PushRequest.Start) to:
const (
	// StageStore: the store write of the objects the observation changed
	// (package syncer, once per snapshot that wrote anything).
	StageStore = "store"
	// StagePush: the first xDS response carrying the change, handed to a
	// stream subscribed to it (package xds).
	StagePush = "push"
	// StageAck: the ACK of the last stream subscribed to the change
	// (package xds, per followed push).
	StageAck = "ack"
)

// convergence is meshbridge_convergence_seconds. It lives here, upstream of
// both packages that observe it (syncer and xds), so that one collector
// holds every stage.
var convergence = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "meshbridge_convergence_seconds",
	Help: "Seconds from a registry observation to, by stage: store (the aggregate store holds the objects it " +
		"changed), push (the first xDS response carrying the change is sent to a subscribed stream), ack (the last " +
		"stream subscribed to the change ACKed it; at most 8 pushes are followed at once, and a push is given up " +
		"after 60s).",
	Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
}, []string{"stage"})

// ObserveConvergence records that stage was reached d after the registry
// observation it started from.
func ObserveConvergence(stage string, d time.Duration) {
	convergence.WithLabelValues(stage).Observe(d.Seconds())
}

// Collectors returns the package's metrics for registration, each stage's
// series present from the start (empty), as rates over them expect.
func Collectors() []prometheus.Collector {
	for _, stage := range []string{StageStore, StagePush, StageAck} {
		convergence.WithLabelValues(stage)
	}
	return []prometheus.Collector{convergence}
}

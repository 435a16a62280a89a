package eureka

import "github.com/prometheus/client_golang/prometheus"

// fetches counts the registry reads sent to Eureka servers, answered or
// not: kind "delta" (GET apps/delta, one per interval) or "full" (GET apps).
// Its rate is the load a registry puts on Eureka (README "Eureka").
var fetches = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "meshbridge_eureka_fetches_total",
	Help: "Reads sent to Eureka servers, by registry and kind (delta: GET apps/delta, one per interval; full: GET apps).",
}, []string{"registry", "kind"})

// relists counts the full reads of a Eureka registry by reason: start,
// reconnect (after an outage), failover (another server answered),
// hashcode (the delta left a registry whose hashcode differs from the
// server's), timer (relistInterval), grace (reconnectGrace ended).
var relists = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "meshbridge_eureka_relists_total",
	Help: "Full reads of a Eureka registry, by registry and reason (start, reconnect, failover, hashcode: the delta left a registry whose hashcode differs from the server's, timer: relistInterval, grace: reconnectGrace ended).",
}, []string{"registry", "reason"})

// Relist reasons (relists' reason label).
const (
	relistStart     = "start"
	relistReconnect = "reconnect"
	relistFailover  = "failover"
	relistHashcode  = "hashcode"
	relistTimer     = "timer"
	relistGrace     = "grace"
)

var relistReasons = []string{relistStart, relistReconnect, relistFailover, relistHashcode, relistTimer, relistGrace}

// initMetrics creates registry's series at 0 (registries.InitMetrics's
// reason: increase() must see the first one).
func initMetrics(registry string) {
	for _, k := range []string{"delta", "full"} {
		fetches.WithLabelValues(registry, k)
	}
	for _, r := range relistReasons {
		relists.WithLabelValues(registry, r)
	}
}

// Collectors returns the Eureka registry's metrics.
func Collectors() []prometheus.Collector { return []prometheus.Collector{fetches, relists} }

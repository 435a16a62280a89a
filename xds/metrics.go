package xds

import (
	"maps"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/cache"
)

// Metric names are a contract (README.md "Metrics"); dashboards
// depend on them.
const (
	metricPushes       = "meshbridge_pushes_total"
	metricClients      = "meshbridge_xds_clients"
	metricNACKs        = "meshbridge_xds_nacks_total"
	metricEventToPush  = "meshbridge_event_to_push_seconds"
	metricStreamPushes = "meshbridge_xds_pushes_total"
	metricPushBytes    = "meshbridge_xds_push_bytes_total"
	metricStreams      = "meshbridge_xds_streams"
	metricTLSErrors    = "meshbridge_xds_tls_handshake_errors_total"
	metricScaled       = "meshbridge_xds_scaled_weights_total"
	metricSubstituted  = "meshbridge_xds_policy_substitutions_total"
	modeSotW           = "sotw"
	modeDelta          = "delta"
	pushTypeFull       = "full"
	pushTypeEDS        = "eds"
	reasonUnknownLabel = "unknown"
)

var (
	policySubstitutions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricSubstituted,
		Help: "Resources sent to an xDS client in a substituted form because its family or version lacks a feature " +
			"the policy asks for (clients.go), by client family (grpc-go, grpc-java, grpc-c-core, grpc-js, envoy, " +
			"unknown) and field (\"loadBalancer.simple:LEAST_REQUEST\" served as ROUND_ROBIN). One per resource per response.",
	}, []string{"client", "field"})

	pushesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPushes,
		Help: "xDS pushes into the caches, by type (full or eds) and dominant trigger reason " +
			"(endpoint, service, config, global). One per push, whatever the number of clients.",
	}, []string{"type", "reason"})

	xdsClients = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricClients,
		Help: "Connected xDS streams, by generator (grpc for proxyless gRPC, mcp for istiod asking Istio config types, envoy for any other node).",
	}, []string{"generator"})

	nacksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricNACKs,
		Help: "xDS requests that rejected the previous response (carried error_detail), by type URL " +
			"(\"other\" for types meshbridge does not produce).",
	}, []string{"type_url"})

	// xdsStreams, with responses (responseTally), counts what reaches the
	// streams, where meshbridge_pushes_total counts what reaches the
	// caches.
	xdsStreams = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricStreams,
		Help: "Open ADS streams, by mode (sotw or delta).",
	}, []string{"mode"})

	tlsHandshakeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricTLSErrors,
		Help: "TLS handshakes a listener refused (wrong CA, no client certificate under mTLS, plaintext to " +
			"a TLS port, ...), by listener (xds or mcp). A connection closed before it sent a TLS record " +
			"(a TCP probe) is not counted.",
	}, []string{"listener"})

	scaledWeights = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricScaled,
		Help: "Services whose ClusterLoadAssignments' endpoint weights summed past 4294967295 and were scaled " +
			"down to fit (ratios kept, each at least 1), counted when a service starts to need it.",
	})

	// eventToPush is deprecated for meshbridge_convergence_seconds
	// (package serviceentry); it stays for one release.
	eventToPush = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: metricEventToPush,
		Help: "Deprecated, removed in the next release: use meshbridge_convergence_seconds{stage=\"push\"}. " +
			"Seconds from the observation of the first change merged into a push request to the push of its " +
			"resources into the xDS caches.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
)

// Collectors returns the metrics of the package and of xds/cache for
// registration (cmd/bridge registers them once on its registry). The
// collectors are package-level, so every DiscoveryServer in a process
// reports into them. Every known label value's series starts at 0:
// Prometheus's increase() and rate() take a series' first sample as its
// start, so a series born at 1 hides the first NACK or push from every
// alert and panel.
func Collectors() []prometheus.Collector {
	for _, pushType := range []string{pushTypeFull, pushTypeEDS} {
		for _, reason := range []string{string(model.GlobalUpdate), string(model.ServiceUpdate), string(model.ConfigUpdate),
			string(model.EndpointUpdate), reasonUnknownLabel} {
			pushesTotal.WithLabelValues(pushType, reason)
		}
	}
	labels := []string{otherTypeLabel}
	for typeURL := range servedXDSTypes {
		labels = append(labels, typeLabel(typeURL))
	}
	for _, l := range slices.Concat(labels, cache.MCPTypeURLs()) {
		nacksTotal.WithLabelValues(l)
	}
	for _, l := range []string{listenerXDS, listenerMCP} {
		tlsHandshakeErrors.WithLabelValues(l)
	}
	return append([]prometheus.Collector{pushesTotal, xdsClients, nacksTotal, eventToPush, responses,
		xdsStreams, tlsHandshakeErrors, scaledWeights, policySubstitutions}, cache.Collectors()...)
}

// responses counts the responses sent on ADS streams and their bytes
// (meshbridge_xds_pushes_total, meshbridge_xds_push_bytes_total).
var responses = newResponseTally(slices.Concat([]string{otherTypeLabel}, slices.Collect(maps.Keys(servedXDSTypes)),
	cache.MCPTypeURLs()))

// responseTally counts responses and their bytes by type label with no
// write every stream shares (ads rule 10: nothing on the per-send path
// touches a shared counter): a stream adds to one of tallyShards slots,
// chosen by its ID, each on cache lines of its own, and the counters are
// the slots' sums, taken when scraped. Its labels are fixed at creation;
// a count of another label goes to "other". Counters start at 0 for
// every label (Collectors).
type responseTally struct {
	labels      []string
	index       map[string]int // label → slot index
	shards      [tallyShards][]tallySlot
	pushes, bts *prometheus.Desc
}

// tallyShards is the number of slots per label: enough that the streams a
// few workers send to at once rarely share one.
const tallyShards = 16

// tallySlot is one shard's counts of one label, padded to its own cache
// lines.
type tallySlot struct {
	responses, bytes atomic.Uint64
	_                [112]byte
}

func newResponseTally(labels []string) *responseTally {
	t := &responseTally{
		labels: slices.Compact(slices.Sorted(slices.Values(labels))),
		index:  make(map[string]int),
		pushes: prometheus.NewDesc(metricStreamPushes, "xDS responses sent on ADS streams (SotW and Delta), by type "+
			"URL (\"other\" for the empty answers to types meshbridge does not produce). One per response per stream.",
			[]string{"type_url"}, nil),
		bts: prometheus.NewDesc(metricPushBytes, "Bytes of the xDS responses counted by "+metricStreamPushes+
			" (serialized size of the DiscoveryResponse or DeltaDiscoveryResponse, without gRPC framing), by type URL.",
			[]string{"type_url"}, nil),
	}
	for i, l := range t.labels {
		t.index[l] = i
	}
	for i := range t.shards {
		t.shards[i] = make([]tallySlot, len(t.labels))
	}
	return t
}

// slot returns the slot a stream of ID id counts typeURL's responses in.
func (t *responseTally) slot(typeURL string, id int64) *tallySlot {
	i, ok := t.index[typeLabel(typeURL)]
	if !ok {
		i = t.index[otherTypeLabel]
	}
	return &t.shards[uint64(id)%tallyShards][i]
}

// add counts a response of size bytes in slot.
func (s *tallySlot) add(size int) {
	s.responses.Add(1)
	s.bytes.Add(uint64(size))
}

// sum returns label's responses and bytes.
func (t *responseTally) sum(label string) (n, bytes uint64) {
	i, ok := t.index[label]
	if !ok {
		return 0, 0
	}
	for s := range t.shards {
		n += t.shards[s][i].responses.Load()
		bytes += t.shards[s][i].bytes.Load()
	}
	return n, bytes
}

// Describe implements prometheus.Collector.
func (t *responseTally) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.pushes
	ch <- t.bts
}

// Collect implements prometheus.Collector.
func (t *responseTally) Collect(ch chan<- prometheus.Metric) {
	for _, l := range t.labels {
		n, b := t.sum(l)
		ch <- prometheus.MustNewConstMetric(t.pushes, prometheus.CounterValue, float64(n), l)
		ch <- prometheus.MustNewConstMetric(t.bts, prometheus.CounterValue, float64(b), l)
	}
}

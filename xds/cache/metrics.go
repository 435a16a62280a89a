package cache

import "github.com/prometheus/client_golang/prometheus"

// Metric names are a contract (README.md "Metrics"); dashboards depend on
// them.
const metricMCPPushes = "meshbridge_mcp_pushes_total"

var mcpPushesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: metricMCPPushes,
	Help: "MCP responses handed to ADS streams (istiod), by requested type URL (\"other\" for the " +
		"empty answers to the Istio config types meshbridge does not produce). One per response per stream.",
}, []string{"type_url"})

// Collectors returns the package's metrics for registration (package xds
// includes them in its Collectors). They are package-level, so every cache
// in a process reports into them. Every known label value's series starts
// at 0, so that increase() and rate() see the first response.
func Collectors() []prometheus.Collector {
	for _, l := range append(MCPTypeURLs(), mcpTypeLabel("")) {
		mcpPushesTotal.WithLabelValues(l)
	}
	return []prometheus.Collector{mcpPushesTotal}
}

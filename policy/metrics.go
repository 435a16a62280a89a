package policy

import "github.com/prometheus/client_golang/prometheus"

// Metric names are a contract (README "Metrics").
var policyRules = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "meshbridge_policy_rules",
	Help: "DestinationRules and VirtualServices read from policy.files and policy.kubernetes at the last read, by state: served, or rejected (invalid, or a host an earlier rule has; a rejected rule's last valid version may still serve).",
}, []string{"state"})

// Collectors returns the package's metrics for registration.
func Collectors() []prometheus.Collector { return []prometheus.Collector{policyRules} }

package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"
)

// alertsPath is the Prometheus rule file the Helm chart ships.
const alertsPath = "../../charts/meshbridge/alerts/meshbridge.yaml"

// alertExprs returns the expressions of the shipped alerting rules, each
// with its alert's name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	exprs := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			exprs[r.Expr] = "alert " + r.Alert
		}
	}
	if len(exprs) == 0 {
		t.Fatalf("%s holds no alert", alertsPath)
	}
	return exprs
}

// TestAlertsUseRegisteredMetrics: every metric and label the shipped
// alerting rules name is registered (promtool in test/chart checks that
// they load and fire).
func TestAlertsUseRegisteredMetrics(t *testing.T) {
	checkExprs(t, alertExprs(t), registeredMetrics(t))
}

// readmeLabelValue matches a label and its fixed values in a labels cell of
// the README's metrics table: "result (`success`, `failure`)".
var readmeLabelValue = regexp.MustCompile("([a-z_]+) \\(((?:`[^`]+`(?:, )?)+)\\)")

// TestCountersStartAtZero: in a bridge that just started, every counter
// (and histogram) the shipped alerts and dashboard read has a series for
// every known label value, at 0: Prometheus's increase() and rate() take a
// series' first sample as its start, so a series that appears with its
// first event at 1 hides that event (a pod's first failed reload, its first
// NACK) from every alert and panel. The known values are those the
// README's metrics table lists, and each configured registry's name; a
// label without listed values needs one series at least.
func TestCountersStartAtZero(t *testing.T) {
	cfgPath := fileConfig(t, "")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfgPath, strings.Replace(string(raw), "registries:\n",
		"registries:\n- {name: dc1, type: consul, consul: {address: 127.0.0.1:1}}\n", 1))
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBridge(cfg, discardLogger()) // built, not run: nothing has happened
	if err != nil {
		t.Fatal(err)
	}
	families, err := b.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	scraped := map[string]*dto.MetricFamily{}
	for _, f := range families {
		scraped[f.GetName()] = f
	}

	registered, readme := registeredMetrics(t), readmeMetrics(t)
	exprs := alertExprs(t)
	maps.Copy(exprs, readDashboard(t).exprs(t))
	used := checkExprs(t, exprs, registered)
	registryNames := []string{"dc1", "static"}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		reg := registered[name]
		if reg.typ != "counter" && reg.typ != "histogram" {
			continue
		}
		known := map[string][]string{}
		for _, m := range readmeLabelValue.FindAllStringSubmatch(readme[name].text, -1) {
			for v := range strings.SplitSeq(m[2], ", ") {
				known[m[1]] = append(known[m[1]], strings.Trim(v, "`"))
			}
		}
		if slices.Contains(reg.labels, "registry") {
			known["registry"] = registryNames
		}
		var series [][2]string // label=value pairs present at 0, flattened
		f := scraped[name]
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount()); v != 0 {
				t.Errorf("%s%v = %v in a bridge that did nothing", name, m.GetLabel(), v)
			}
			for _, l := range m.GetLabel() {
				series = append(series, [2]string{l.GetName(), l.GetValue()})
			}
		}
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("%s (read by %s) has no series until its first event", name, where(exprs, name))
			continue
		}
		for _, label := range reg.labels {
			for _, v := range known[label] {
				if !slices.Contains(series, [2]string{label, v}) {
					t.Errorf("%s (read by %s) has no series with %s=%q until its first event", name, where(exprs, name), label, v)
				}
			}
		}
		// Every combination of the listed values.
		if want := combinations(reg.labels, known); len(f.GetMetric()) < want {
			t.Errorf("%s has %d series at start, want at least %d (every combination of %v)", name, len(f.GetMetric()), want, known)
		}
	}
}

// where names the first alert or panel whose expression reads metric.
func where(exprs map[string]string, metric string) string {
	for _, e := range slices.Sorted(maps.Keys(exprs)) {
		if strings.Contains(e, metric) {
			return exprs[e]
		}
	}
	return "?"
}

// combinations is the number of label sets made of known's values, a label
// without known values counting once.
func combinations(labels []string, known map[string][]string) int {
	n := 1
	for _, l := range labels {
		n *= max(1, len(known[l]))
	}
	return n
}

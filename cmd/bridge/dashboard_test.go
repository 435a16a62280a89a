package main

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard the Helm chart ships.
const dashboardPath = "../../charts/meshbridge/dashboards/meshbridge.json"

// dashboardPanel is what the test reads of a panel: rows hold panels too.
type dashboardPanel struct {
	Title   string           `json:"title"`
	Type    string           `json:"type"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

var (
	promMetric   = regexp.MustCompile(`\bmeshbridge_[a-z0-9_]+`)
	promMatchers = regexp.MustCompile(`^\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*$`)
	promBy       = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// scrapeLabels are the labels Prometheus adds to every series it scrapes.
var scrapeLabels = []string{"instance", "job"}

// TestDashboardUsesRegisteredMetrics checks every PromQL expression of the
// chart's dashboard, its panels' and its variables': each meshbridge metric
// it names is registered (a histogram's _bucket, _sum and _count series by
// the histogram's name), each label it matches or groups by is one of the
// metric's (or le, instance, job), and the panels cover what operators
// watch.
func TestDashboardUsesRegisteredMetrics(t *testing.T) {
	board := readDashboard(t)
	if board.UID == "" || board.Title == "" {
		t.Errorf("the dashboard needs a uid and a title")
	}
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	used := checkExprs(t, board.exprs(t), registeredMetrics(t))
	for _, name := range []string{
		"meshbridge_registry_up", "meshbridge_registry_stale", "meshbridge_registry_instances",
		"meshbridge_delete_guard_held", "meshbridge_convergence_seconds", "meshbridge_pushes_total",
		"meshbridge_xds_clients", "meshbridge_xds_streams", "meshbridge_xds_nacks_total",
		"meshbridge_kube_writes_total", "meshbridge_kube_queue_depth", "meshbridge_kube_leader",
		"meshbridge_config_reloads_total",
	} {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
	for _, q := range []string{"0.5", "0.99"} {
		if !strings.Contains(string(data), "histogram_quantile("+q+", sum by (le, stage) (rate(meshbridge_convergence_seconds_bucket") {
			t.Errorf("no panel shows the convergence p%s by stage", strings.TrimPrefix(q, "0."))
		}
	}
}

// resolveSeries maps a series name to its registered metric and that
// metric's labels: itself, or a histogram's _bucket (with le), _sum or
// _count.
func resolveSeries(series string, registered map[string]registeredMetric) (string, []string, bool) {
	if m, ok := registered[series]; ok {
		return series, m.labels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if !ok {
			continue
		}
		if m, ok := registered[base]; ok && (m.typ == "histogram" || (m.typ == "summary" && suffix != "_bucket")) {
			labels := m.labels
			if suffix == "_bucket" {
				labels = append(slices.Clone(labels), "le")
			}
			return base, labels, true
		}
	}
	return "", nil, false
}

// dashboard is what the tests read of the chart's Grafana dashboard.
type dashboard struct {
	UID        string           `json:"uid"`
	Title      string           `json:"title"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var board dashboard
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return board
}

// exprs returns the board's PromQL expressions (its panels' queries, its
// variables' definitions), each with where it is; a panel without a query
// fails the test.
func (b dashboard) exprs(t *testing.T) map[string]string {
	exprs := map[string]string{}
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs[tg.Expr] = "panel " + p.Title
			}
		}
	}
	walk(b.Panels)
	for _, v := range b.Templating.List {
		if v.Definition != "" {
			exprs[v.Definition] = "variable " + v.Name
		}
	}
	return exprs
}

// checkExprs checks PromQL expressions (expression → where) against the
// registered metrics: each meshbridge metric named is registered (a
// histogram's _bucket, _sum and _count series by the histogram's name), each
// label matched or grouped by is one of the metric's (or le, instance,
// job). It returns the metrics named.
func checkExprs(t *testing.T, exprs map[string]string, registered map[string]registeredMetric) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, expr := range slices.Sorted(maps.Keys(exprs)) {
		where := exprs[expr]
		names := promMetric.FindAllStringIndex(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no meshbridge metric", where, expr)
			continue
		}
		allowed := slices.Clone(scrapeLabels)
		for _, loc := range names {
			series := expr[loc[0]:loc[1]]
			name, labels, ok := resolveSeries(series, registered)
			if !ok {
				t.Errorf("%s: %s is not a registered metric (or a histogram's series)", where, series)
				continue
			}
			used[name] = true
			allowed = append(allowed, labels...)
			m := promMatchers.FindStringSubmatch(expr[loc[1]:])
			if m == nil {
				continue
			}
			for part := range strings.SplitSeq(m[1], ",") {
				if strings.TrimSpace(part) == "" {
					continue
				}
				lm := promMatcher.FindStringSubmatch(part)
				if lm == nil {
					t.Errorf("%s: cannot read the matcher %q of %s", where, part, series)
					continue
				}
				if !slices.Contains(labels, lm[1]) && !slices.Contains(scrapeLabels, lm[1]) {
					t.Errorf("%s: %s has no label %q (labels %v)", where, name, lm[1], labels)
				}
			}
		}
		for _, by := range promBy.FindAllStringSubmatch(expr, -1) {
			for l := range strings.SplitSeq(by[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(allowed, l) {
					t.Errorf("%s: groups by %q, which no metric of %q has", where, l, expr)
				}
			}
		}
	}
	return used
}

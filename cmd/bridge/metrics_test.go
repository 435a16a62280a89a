package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/translate"
)

// registeredMetric is one of meshbridge's metrics as registered.
type registeredMetric struct {
	typ    string // counter, gauge, histogram, summary
	labels []string
	help   string
}

// descPattern reads prometheus.Desc.String(): the name, help and variable
// labels of a metric (the only way to get them without a sample).
var descPattern = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^}]*)\}\}$`)

// registeredMetrics describes every collector of metricCollectors by
// name. A collector's type is that of its Go type (a Gauge also has Inc and
// Add, so it is asked first; GaugeFunc and CounterFunc are told apart by
// nothing and meshbridge uses neither); a collector of its own type
// (xds's response tally) is gathered, so it must report every metric it
// describes, and its metrics' types are the ones it reports.
func registeredMetrics(t *testing.T) map[string]registeredMetric {
	t.Helper()
	out := map[string]registeredMetric{}
	for _, c := range metricCollectors() {
		var typ string
		var gathered map[string]string
		switch c.(type) {
		case *prometheus.GaugeVec, prometheus.Gauge:
			typ = "gauge"
		case *prometheus.CounterVec, prometheus.Counter:
			typ = "counter"
		case *prometheus.HistogramVec, prometheus.Histogram:
			typ = "histogram"
		case *prometheus.SummaryVec, prometheus.Summary:
			typ = "summary"
		default:
			gathered = gatheredTypes(t, c)
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descPattern.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			name, err := strconv.Unquote(m[1])
			if err != nil {
				t.Fatal(err)
			}
			help, err := strconv.Unquote(m[2])
			if err != nil {
				t.Fatal(err)
			}
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			slices.Sort(labels)
			if _, dup := out[name]; dup {
				t.Fatalf("%s registered twice", name)
			}
			typ := typ
			if gathered != nil {
				if typ = gathered[name]; typ == "" {
					t.Fatalf("collector %T describes %s but reports no sample of it", c, name)
				}
			}
			out[name] = registeredMetric{typ: typ, labels: labels, help: help}
		}
	}
	return out
}

// gatheredTypes returns the type ("counter", "gauge", …) of each metric
// collector c reports, by name, as a registry that checks its collectors
// (Describe against Collect) gathers them.
func gatheredTypes(t *testing.T, c prometheus.Collector) map[string]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("collector %T: %v", c, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("collector %T: %v", c, err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		out[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	return out
}

// readmeMetric is a row of the README's metrics table.
type readmeMetric struct {
	typ    string
	labels []string
	text   string // the labels cell as written
}

var (
	metricsRow  = regexp.MustCompile("^\\| `(meshbridge_[a-z0-9_]+)` \\| ([a-z]+) \\| ?(.*?) ?\\|$")
	parentheses = regexp.MustCompile(`\([^()]*\)`)
	labelName   = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
)

// readmeMetrics reads the table under "## Metrics". A labels cell is the
// label names, comma-separated, each optionally followed by its values in
// parentheses, then optionally ":" or ";" and a description; a cell that
// is empty or only a parenthesized note has no labels.
func readmeMetrics(t *testing.T) map[string]readmeMetric {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Metrics\n")
	if !ok {
		t.Fatal(`README.md has no "## Metrics" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]readmeMetric{}
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := metricsRow.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("README metrics table: cannot read row %s", line)
			continue
		}
		cell := parentheses.ReplaceAllString(m[3], "")
		if i := strings.IndexAny(cell, ":;"); i >= 0 {
			cell = cell[:i]
		}
		var labels []string
		for l := range strings.SplitSeq(cell, ",") {
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			if !labelName.MatchString(l) {
				t.Errorf("README metrics table, %s: %q is not a label name", m[1], l)
			}
			labels = append(labels, l)
		}
		slices.Sort(labels)
		if _, dup := out[m[1]]; dup {
			t.Errorf("README metrics table lists %s twice", m[1])
		}
		out[m[1]] = readmeMetric{typ: m[2], labels: labels, text: m[3]}
	}
	return out
}

// TestReadmeListsTheRegisteredMetrics checks the README's metrics table
// against the metrics newMetricsRegistry registers, both ways: every
// registered metric has a row with its type and label names, every row a
// registered metric, and a metric whose help says it is deprecated says so
// in the README too.
func TestReadmeListsTheRegisteredMetrics(t *testing.T) {
	registered, readme := registeredMetrics(t), readmeMetrics(t)
	for _, name := range slices.Sorted(maps.Keys(registered)) {
		reg := registered[name]
		row, ok := readme[name]
		switch {
		case !ok:
			t.Errorf("%s (%s, labels %v) is registered but not in the README's metrics table", name, reg.typ, reg.labels)
			continue
		case row.typ != reg.typ:
			t.Errorf("%s: README says %s, registered as %s", name, row.typ, reg.typ)
		case !slices.Equal(row.labels, reg.labels):
			t.Errorf("%s: README lists labels %v, registered with %v", name, row.labels, reg.labels)
		}
		if strings.HasPrefix(reg.help, "Deprecated") && !strings.Contains(row.text, "deprecated") {
			t.Errorf("%s is deprecated (its help: %q) but the README does not say so", name, reg.help)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(readme)) {
		if _, ok := registered[name]; !ok {
			t.Errorf("README's metrics table lists %s, which is not registered", name)
		}
	}
	// newMetricsRegistry registers exactly these, with the Go and process
	// collectors.
	if _, err := newMetricsRegistry().Gather(); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeNamingStatesHostTemplates: the README's naming conventions give
// each type's default host template verbatim, and each variable they list
// for hostTemplate is one a template can use.
func TestReadmeNamingStatesHostTemplates(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, naming, ok := strings.Cut(string(data), "\n## Naming conventions")
	if !ok {
		t.Fatal("README.md has no Naming conventions section")
	}
	naming, _, _ = strings.Cut(naming, "\n## ")
	var row string
	for line := range strings.Lines(naming) {
		if strings.HasPrefix(line, "| host templates |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("the naming conventions have no \"host templates\" row")
	}
	for _, ty := range registryTypes {
		if ty.HostTemplate != "" && ty.HostsFrom == "" && !strings.Contains(row, "`"+ty.HostTemplate+"`") {
			t.Errorf("the host templates row lacks %s's default template `%s`", ty.Name, ty.HostTemplate)
		}
	}
	hostVars, _, _ := strings.Cut(row, "Defaults:")
	vars := regexp.MustCompile("`(\\.[A-Z][A-Za-z]*)`").FindAllStringSubmatch(hostVars, -1)
	if len(vars) < 4 {
		t.Fatalf("the host templates row names %d variables: %s", len(vars), row)
	}
	for _, v := range vars {
		if _, err := translate.New(translate.Options{Registry: "r", Namespace: "ns", HostTemplate: "{{" + v[1] + "}}x"}); err != nil {
			t.Errorf("the README lists %s for hostTemplate: %v", v[1], err)
		}
	}
	if !strings.Contains(naming, "| locality |") || !strings.Contains(naming, "Consul: the region is the instance's datacenter") {
		t.Error("the naming conventions do not say that a Consul instance's locality region is its datacenter")
	}
}

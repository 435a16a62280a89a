package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const microOutput = `goos: linux
pkg: github.com/meshbridge/meshbridge/xds
BenchmarkEDSGeneration/1000-2         	    8383	    143956 ns/op	       143.9 ns/endpoint	  115313 B/op	    1012 allocs/op
BenchmarkEDSBuildEncode-2             	    7868	    153786 ns/op	       153.8 ns/endpoint	  102916 B/op	      20 allocs/op
PASS
pkg: github.com/meshbridge/meshbridge/test/istio
BenchmarkIstiodEDSBuildEncode-2   	     235	   4657419 ns/op	       108.6 istiod-B/endpoint-encoded	      4350 istiod-ns/endpoint	        27.64 meshbridge-B/endpoint-encoded	       306.8 meshbridge-ns/endpoint	         0.07053 meshbridge/istiod	 2117163 B/op	   30140 allocs/op
PASS
`

func TestMicroRows(t *testing.T) {
	got := map[string]row{}
	for _, r := range microRows(microOutput) {
		got[r.scenario] = r
	}
	for scenario, want := range map[string]string{
		"P6 EDS build + encode: time":          "0.154",
		"P6 EDS generation from scratch: time": "0.144",
		"P6 istiod EDS build + encode: time":   "4.350",
		"P6 meshbridge / istiod":               "1/14 (0.071)",
	} {
		if r, ok := got[scenario]; !ok || r.figure != want {
			t.Errorf("%s: figure %q (found %v), want %q", scenario, r.figure, ok, want)
		}
	}
	if r := got["P6 meshbridge / istiod"]; !strings.Contains(r.unit, "target ≤ 1/3") || !strings.Contains(r.params, "meshbridge 0.307 / istiod 4.350 µs/endpoint") {
		t.Errorf("ratio row: %+v", r)
	}
}

func TestMicroRowsIstiodWithoutMeshbridge(t *testing.T) {
	rows := microRows("BenchmarkIstiodEDSBuildEncode-2   	10	4657419 ns/op	4350 istiod-ns/endpoint\n")
	if len(rows) != 1 || rows[0].scenario != "P6 istiod EDS build + encode: time" {
		t.Errorf("rows %+v, want the istiod time only", rows)
	}
}

func TestRatiosSection(t *testing.T) {
	md := "# istiod\n\nintro\n\n## Ratios\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n### detail\n\nmore\n\n## Machine\n\ncores\n"
	got, ok := ratiosSection(md)
	want := "| a | b |\n|---|---|\n| 1 | 2 |\n\n### detail\n\nmore"
	if !ok || got != want {
		t.Errorf("ratiosSection = %q, %v; want %q", got, ok, want)
	}
	if got, ok := ratiosSection("# istiod\n\n## Ratios\n\nlast\n"); !ok || got != "last" {
		t.Errorf("section at the end: %q, %v", got, ok)
	}
	if _, ok := ratiosSection("# istiod\n\n## Ratios of something\n\n## Machine\n"); ok {
		t.Error("found a Ratios section in a page without one")
	}
}

func TestWriteReportIstiodSection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks-istiod.md")
	report := func() string {
		t.Helper()
		old := *istiodReport
		*istiodReport = path
		defer func() { *istiodReport = old }()
		var buf bytes.Buffer
		writeReport(&buf, microRows(microOutput), microOutput, "before", "after", time.Second)
		return buf.String()
	}

	out := report()
	if !strings.Contains(out, "## Side by side with istiod (from benchmarks-istiod.md)\n\nNo benchmarks-istiod.md yet: run `make bench-istiod`") {
		t.Errorf("without the file, no note to run make bench-istiod:\n%s", out)
	}
	if !strings.Contains(out, "| P6 meshbridge / istiod |") {
		t.Error("no ratio row in the results")
	}

	if err := os.WriteFile(path, []byte("# istiod\n\n## Ratios\n\n| ratio | 1/5 |\n\n## Machine\n\nsecret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = report()
	section, _, _ := strings.Cut(out, "## Machine")
	if !strings.Contains(section, "[benchmarks-istiod.md](benchmarks-istiod.md)") || !strings.Contains(section, "| ratio | 1/5 |") ||
		strings.Contains(out, "secret") || strings.Contains(out, "## Ratios") {
		t.Errorf("the Ratios section is not quoted before ## Machine (alone):\n%s", out)
	}
}

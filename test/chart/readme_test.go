package chart

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestValuesDocumented: the chart README's values table has a row for
// every leaf of values.yaml (a map is descended into unless empty; a list,
// a scalar, null or {} is a leaf), and no row for a key values.yaml lacks.
func TestValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	want := leaves("", values)
	got := readmeValueKeys(t, filepath.Join(chartDir, "README.md"))
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("values.yaml %s: no row in the README's values table", k)
		}
	}
	for _, k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("README values table row %s: no such value in values.yaml", k)
		}
	}
	if dups := len(got) - len(slices.Compact(slices.Sorted(slices.Values(got)))); dups != 0 {
		t.Errorf("%d keys twice in the README's values table", dups)
	}
}

// readmeValueKeys returns the keys of the table under the README's
// "## Values" heading: each row's first cell, in backquotes.
func readmeValueKeys(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var keys []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Values"
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			keys = append(keys, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatalf("%s: no \"## Values\" table", path)
	}
	return keys
}

// TestImageLinesUp: the chart's default image is what make image builds
// (the Makefile's IMAGE_REPOSITORY); test/image checks the image itself
// (its user, command and tag) against the chart.
func TestImageLinesUp(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	v, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(v, &values); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE_REPOSITORY \?= (\S+)$`).FindStringSubmatch(string(b))
	if m == nil || m[1] != values.Image.Repository {
		t.Errorf("Makefile IMAGE_REPOSITORY %v, chart image.repository %q", m, values.Image.Repository)
	}
}

package docs

import (
	"os"
	"strings"
	"testing"
)

// section returns the body of md's level-2 section whose heading line is
// heading, up to the next level-2 heading, trimmed.
func section(md, heading string) (string, bool) {
	_, rest, found := strings.Cut(md, "\n"+heading+"\n")
	if !found {
		return "", false
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSpace(rest), true
}

// TestBenchmarksQuoteIstiodRatios: benchmarks.md quotes the Ratios section
// of benchmarks-istiod.md as it is (make bench copies it; make bench-istiod
// rewrites the page it copies): a generated page never contradicts the page
// it quotes. After make bench-istiod, run make bench, or copy the section.
func TestBenchmarksQuoteIstiodRatios(t *testing.T) {
	istiod, err := os.ReadFile("benchmarks-istiod.md")
	if err != nil {
		t.Fatal(err)
	}
	bench, err := os.ReadFile("benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	ratios, ok := section(string(istiod), "## Ratios")
	if !ok {
		t.Fatal("benchmarks-istiod.md has no Ratios section")
	}
	quoted, ok := section(string(bench), "## Side by side with istiod (from benchmarks-istiod.md)")
	if !ok {
		t.Fatal("benchmarks.md has no side-by-side section")
	}
	if !strings.Contains(quoted, ratios) {
		t.Errorf("benchmarks.md quotes other ratios than benchmarks-istiod.md's Ratios section:\n%s\nwant\n%s", quoted, ratios)
	}
}

// Package docs holds the project's documentation; its test checks that the
// pages name only paths that exist.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pathRef is a path in backquotes that starts at a top-level entry of the
// repository: `syncer/hosts.go`, `test/e2e/`.
var pathRef = regexp.MustCompile("`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+/?)`")

// TestDocumentedPathsExist: every repository path the README and the pages
// under docs/ (and the chart's and examples' READMEs) name in backquotes
// exists, so that a file moved or deleted fails here instead of leaving a
// page that cites it. CHANGELOG.md is history and may name what is gone.
func TestDocumentedPathsExist(t *testing.T) {
	root := ".."
	pages := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"*.md", "../charts/*/README.md", "../examples/*/README.md", "../examples/*.md"} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, matches...)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	// Top-level entries that builds write (.gitignore's: bin/, the
	// test servers' outputs) are not the repository's: a page may name a
	// file a build writes there.
	ignored, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}
	for _, e := range entries {
		top[e.Name()] = true
	}
	for line := range strings.Lines(string(ignored)) {
		delete(top, strings.Trim(strings.TrimSpace(line), "/"))
	}
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pathRef.FindAllStringSubmatch(string(text), -1) {
			path := m[1]
			if first, _, _ := strings.Cut(path, "/"); !top[first] {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(root, path)); err != nil {
				t.Errorf("%s names %s, which does not exist", page, path)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d paths found in %d pages: the pattern no longer matches how the pages name paths", checked, len(pages))
	}
}

package xds

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackagesImportOneWay holds the split of the xDS server to its one-way
// rule (doc.go; docs/design.md §2): xds imports xds/gen and xds/cache,
// which import neither xds nor each other; xds/gen builds on internal/wire,
// which imports no meshbridge package; xds/cache imports no translation
// (its MCP validation is given, xds.MCPOptions.Validate); xds/dns, the
// stage between the ServiceEntry controller and the server, imports no
// other xds package and xds does not import it; xds/bootstrap, the
// client's side of the contract (what a bootstrap declares), imports no
// meshbridge package, and xds and xds/gen read its names. Test files are
// left out: a test may use what it checks against.
func TestPackagesImportOneWay(t *testing.T) {
	const module = "github.com/meshbridge/meshbridge/"
	allowed := map[string][]string{
		"../internal/wire": nil,
		"bootstrap":        nil,
		"gen":              {"internal/wire", "model", "xds/bootstrap"},
		"cache":            {"internal/wire", "model", "xds/ads"},
		"ads":              {"internal/wire"},
		"dns":              {"model", "serviceentry"},
		".":                {"internal/wire", "model", "serviceentry", "xds/ads", "xds/bootstrap", "xds/cache", "xds/gen"},
	}
	for dir, want := range allowed {
		pkg, err := build.Default.ImportDir(filepath.FromSlash(dir), 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, imp := range pkg.Imports {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				got = append(got, rest)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s imports %v of meshbridge's packages, want %v", dir, got, want)
		}
	}
}

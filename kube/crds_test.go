package kube_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	// crdCopy is the copy of Istio's CRDs that the Kubernetes tests install
	// (through test/harness) and that make refresh-crds writes.
	crdCopy = "testdata/crds/istio-networking.yaml"
	// upstreamCRDs is the file of the istio.io/api module the copy comes from.
	upstreamCRDs = "kubernetes/customresourcedefinitions.gen.yaml"
)

// copiedCRDs are the CRDs crdCopy holds, in the order they appear upstream.
var copiedCRDs = []string{"destinationrules.networking.istio.io", "serviceentries.networking.istio.io",
	"virtualservices.networking.istio.io", "workloadentries.networking.istio.io"}

// TestCRDsMatchIstioAPI checks that testdata/crds/istio-networking.yaml is a
// verbatim copy of the ServiceEntry, WorkloadEntry, DestinationRule and VirtualService CRDs of the istio.io/api
// version go.mod requires, and that its header names that version. Tests run
// meshbridge's output against these CRDs, so a stale copy would validate
// objects against a schema istiod no longer uses. Fix: make refresh-crds.
func TestCRDsMatchIstioAPI(t *testing.T) {
	dir, version := istioAPIModule(t)
	upstream, err := os.ReadFile(filepath.Join(dir, upstreamCRDs))
	if err != nil {
		t.Fatalf("read the upstream CRDs: %v", err)
	}
	copied, err := os.ReadFile(crdCopy)
	if err != nil {
		t.Fatalf("read the copy: %v", err)
	}

	header, _, _ := bytes.Cut(copied, []byte("\n"))
	if want := "istio.io/api " + version + " "; !strings.Contains(string(header), want) {
		t.Errorf("%s: first line %q does not name %q (go.mod's version); run make refresh-crds", crdCopy, header, want)
	}

	want := map[string]string{}
	for _, doc := range yamlDocs(upstream) {
		if name := crdName(doc); slices.Contains(copiedCRDs, name) {
			want[name] = doc
		}
	}
	for _, name := range copiedCRDs {
		if _, ok := want[name]; !ok {
			t.Fatalf("istio.io/api %s %s has no CRD %s", version, upstreamCRDs, name)
		}
	}

	var got []string
	for _, doc := range yamlDocs(copied) {
		name := crdName(doc)
		got = append(got, name)
		if w, ok := want[name]; !ok {
			t.Errorf("%s: unexpected document (CRD name %q); it should hold only %v", crdCopy, name, copiedCRDs)
		} else if doc != w {
			t.Errorf("%s: CRD %s differs from istio.io/api %s (%s); run make refresh-crds", crdCopy, name, version, firstDiff(doc, w))
		}
	}
	if strings.Join(got, ",") != strings.Join(copiedCRDs, ",") {
		t.Errorf("%s holds CRDs %v, want %v in that order; run make refresh-crds", crdCopy, got, copiedCRDs)
	}
}

// istioAPIModule returns the directory and version of the istio.io/api module
// in the build list, from `go list -m` (which reads go.mod and does not
// download). It skips the test when the go command or the module's
// directory is missing (not yet downloaded: go mod download istio.io/api).
func istioAPIModule(t *testing.T) (dir, version string) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to find the istio.io/api module: %v; skipping", err)
	}
	cmd := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}\n{{.Version}}", "istio.io/api")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m istio.io/api: %v\n%s", err, stderr.Bytes())
	}
	dir, version, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	if version == "" {
		t.Fatalf("go list -m istio.io/api printed no version: %q", out)
	}
	if dir == "" {
		t.Skipf("istio.io/api %s is not in the module cache (go mod download istio.io/api); skipping", version)
	}
	if _, err := os.Stat(filepath.Join(dir, upstreamCRDs)); errors.Is(err, os.ErrNotExist) {
		t.Skipf("istio.io/api %s at %s has no %s; skipping", version, dir, upstreamCRDs)
	}
	return dir, version
}

// yamlDocs splits a YAML stream at its "---" lines, as make refresh-crds
// does, and returns the documents that hold more than comments and blank
// lines, each with its lines' "\n" endings.
func yamlDocs(b []byte) []string {
	var docs []string
	var cur strings.Builder
	content := false
	flush := func() {
		if content {
			docs = append(docs, cur.String())
		}
		cur.Reset()
		content = false
	}
	for line := range strings.Lines(string(b)) {
		if strings.TrimRight(line, "\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			content = true
		}
	}
	flush()
	return docs
}

// crdName returns a CRD document's metadata.name: the value on its first line
// "  name: " (a key of a top-level mapping; of a CRD's, only metadata has a
// "name" key), or "" when there is none.
func crdName(doc string) string {
	for line := range strings.Lines(doc) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "  name: "); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("document line %d: copy %q, upstream %q; %d vs %d lines", i+1, gl, wl, len(g), len(w))
		}
	}
	return "no difference"
}

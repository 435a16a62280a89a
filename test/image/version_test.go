package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// versionScheme is tools/version.sh's: a release vX.Y.Z, or git
// describe's vX.Y.Z-N-gHASH after one (v0.0.0 before the first), -dirty
// with uncommitted changes.
var versionScheme = regexp.MustCompile(`^v\d+\.\d+\.\d+(-\d+-g[0-9a-f]{12})?(-dirty)?$`)

// TestOneVersionScheme: the binary, the image's tag and the chart's default
// image tag follow one scheme: make version prints the checkout's version
// in it, and at a release tag that version is the tag, so that make image
// there builds exactly the image the chart pulls (Chart.yaml appVersion,
// image.tag's default).
func TestOneVersionScheme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "charts/meshbridge/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(chart.AppVersion) {
		t.Fatalf("Chart.yaml appVersion %q is not a release vX.Y.Z", chart.AppVersion)
	}
	if tag := chartValue(t, "image", "tag"); tag != "" {
		t.Errorf("image.tag defaults to %q, want \"\" (appVersion)", tag)
	}
	version := func(dir string) string {
		t.Helper()
		out, err := exec.Command("make", "-s", "-C", dir, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("make version: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if v := version(root); !versionScheme.MatchString(v) {
		t.Errorf("make version = %q, not in the scheme %s", v, versionScheme)
	}

	// A clone of the checkout, before and at the release tag.
	clone := filepath.Join(t.TempDir(), "clone")
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", clone}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "clone", "-q", "--shared", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if git("tag", "--list", "v*") == "" {
		want := "v0.0.0-" + git("rev-list", "--count", "HEAD") + "-g" + git("rev-parse", "--short=12", "HEAD")
		if v := version(clone); v != want {
			t.Errorf("before the first release tag: make version = %q, want %q", v, want)
		}
	}
	git("-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "-a", "-m", "release", chart.AppVersion)
	if v := version(clone); v != chart.AppVersion {
		t.Errorf("at the release tag %s: make version = %q; make image would tag what the chart does not pull", chart.AppVersion, v)
	}
	git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "after the release")
	if v, want := version(clone), chart.AppVersion+"-1-g"+git("rev-parse", "--short=12", "HEAD"); v != want {
		t.Errorf("one commit after the release: make version = %q, want %q", v, want)
	}
}

package harness

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestModuleKey: HelmBin and PromtoolBin look for their command under the
// key tools/build.sh's key() computes for its module.
func TestModuleKey(t *testing.T) {
	root, err := checkoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"helm", "promtool"} {
		dir := filepath.Join(root, "tools", name)
		cmd := exec.Command("bash", "-c", `cat go.mod go.sum | sha256sum | cut -c1-12`)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := moduleKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(out)); got != want {
			t.Errorf("moduleKey(tools/%s) = %s, tools/build.sh's key = %s", name, got, want)
		}
	}
}

// TestHelmBin: the helm HelmBin finds reports the version tools/helm pins
// (tools/build.sh stamps it as Helm's release build does).
func TestHelmBin(t *testing.T) {
	helm := HelmBin(t)
	got, err := exec.Command(helm, "version", "--template", "{{.Version}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := pinnedVersion(t, "helm", "helm.sh/helm/v3"); string(got) != want {
		t.Fatalf("%s reports %s, tools/helm pins %s", helm, got, want)
	}
}

// TestPromtoolBin: the promtool PromtoolBin finds reports the Prometheus
// release of the module version tools/promtool pins (v0.3MM.P is 3.MM.P).
func TestPromtoolBin(t *testing.T) {
	promtool := PromtoolBin(t)
	out, err := exec.Command(promtool, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", promtool, err, out)
	}
	v := pinnedVersion(t, "promtool", "github.com/prometheus/prometheus")
	mm, patch, _ := strings.Cut(strings.TrimPrefix(v, "v0."), ".")
	minor, err := strconv.Atoi(mm[1:])
	if err != nil {
		t.Fatalf("tools/promtool pins %s: not v0.3MM.P", v)
	}
	release := fmt.Sprintf("%s.%d.%s", mm[:1], minor, patch)
	if !strings.Contains(string(out), "promtool, version "+release+" ") {
		t.Fatalf("%s --version:\n%s\nwant version %s (tools/promtool pins %s)", promtool, out, release, v)
	}
}

// pinnedVersion is the version tools/<name>/go.mod requires of module.
func pinnedVersion(t *testing.T, name, module string) string {
	t.Helper()
	root, err := checkoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("awk", `$1 == "require" && $2 == "`+module+`" {print $3}`, filepath.Join(root, "tools", name, "go.mod")).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("%s's version in tools/%s/go.mod: %v", module, name, err)
	}
	return strings.TrimSpace(string(out))
}

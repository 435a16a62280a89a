package harness

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelmKey: HelmBin looks for helm under the key tools/build.sh's key()
// computes for tools/helm.
func TestHelmKey(t *testing.T) {
	root, err := checkoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, helmModuleDir)
	cmd := exec.Command("bash", "-c", `cat go.mod go.sum | sha256sum | cut -c1-12`)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := helmKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("helmKey = %s, tools/build.sh's key = %s", got, want)
	}
}

// TestHelmBin: the helm HelmBin finds reports the version tools/helm pins
// (tools/build.sh stamps it as Helm's release build does).
func TestHelmBin(t *testing.T) {
	helm := HelmBin(t)
	root, err := checkoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("awk", `$1 == "require" && $2 == "helm.sh/helm/v3" {print $3}`, filepath.Join(root, helmModuleDir, "go.mod")).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("helm's version in tools/helm/go.mod: %v", err)
	}
	got, err := exec.Command(helm, "version", "--template", "{{.Version}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); string(got) != want {
		t.Fatalf("%s reports %s, tools/helm pins %s", helm, got, want)
	}
}

package istio

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestMain runs the tests with the harness's shared kube-apiserver (Istio's
// own CRDs installed) and istiod, stopped when the tests end.
func TestMain(m *testing.M) { os.Exit(harness.KubeMain(m, istioCRDs())) }

// crdFile is where the istio.io/istio module keeps the CRDs its base chart
// installs: every Istio CRD, as a cluster running this istiod has them.
const crdFile = "manifests/charts/base/files/crd-all.gen.yaml"

// istioCRDs returns the absolute path of crdFile in the istio.io/istio
// module go.mod pins, found with `go list -m` (it reads go.mod and the
// module cache, which building this package filled). When that fails it
// returns a path that says why, so that SharedKube fails every test that
// needs it with the reason, and the tests that do not run.
func istioCRDs() string {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return fmt.Sprintf("(go list -m istio.io/istio failed: %v %s)", err, strings.TrimSpace(stderr.String()))
	}
	return filepath.Join(dir, crdFile)
}

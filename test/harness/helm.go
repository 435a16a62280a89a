package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// This file finds the helm command the chart tests (test/chart) run:
// helm.sh/helm/v3 at the version tools/helm/go.mod pins, which
// tools/build.sh helm builds into
// ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/helm-<key>/helm, key the
// first 12 hex digits of sha256(go.mod + go.sum) of tools/helm. Only that
// build is used: a helm of another version renders differently, so neither
// another cache entry nor a helm on PATH stands in for it.

// helmModuleDir is the module that pins helm, relative to the checkout.
const helmModuleDir = "tools/helm"

// HelmBin returns the helm binary tests run: $MESHBRIDGE_HELM_BIN, else
// the one tools/build.sh helm built from the checkout's tools/helm (the
// checkout is found from the working directory up). When there is none it
// skips the test, or fails it when MESHBRIDGE_REQUIRE_SERVERS=1.
func HelmBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MESHBRIDGE_HELM_BIN"); p != "" {
		if isExecutable(p) {
			return p
		}
		missing(t, "helm", fmt.Sprintf("MESHBRIDGE_HELM_BIN=%s is not an executable file", p))
	}
	root, err := checkoutRoot()
	if err != nil {
		missing(t, "helm", fmt.Sprintf("no helm: set MESHBRIDGE_HELM_BIN (%v)", err))
	}
	key, err := helmKey(filepath.Join(root, helmModuleDir))
	if err != nil {
		missing(t, "helm", fmt.Sprintf("no helm: set MESHBRIDGE_HELM_BIN (%v)", err))
	}
	p := filepath.Join(cacheDir(), "helm-"+key, "helm")
	if !isExecutable(p) {
		missing(t, "helm", fmt.Sprintf("no helm built from %s (no %s): set MESHBRIDGE_HELM_BIN, or build it with tools/build.sh helm",
			filepath.Join(root, helmModuleDir), p))
	}
	return p
}

// helmKey is tools/build.sh's key() of the module in dir: the first 12 hex
// digits of the SHA-256 of go.mod followed by go.sum.
func helmKey(dir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

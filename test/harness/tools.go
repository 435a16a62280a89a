package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// This file finds the commands tests run that tools/build.sh builds from a
// module of tools/ at the version it pins, into
// ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/<name>-<key>/<name>, key the
// first 12 hex digits of sha256(go.mod + go.sum) of tools/<name>: helm,
// with which the chart tests (test/chart) lint and render the chart, and
// promtool, with which they check and unit-test its alerting rules. Only
// that build is used: another version renders or evaluates differently, so
// neither another cache entry nor a command on PATH stands in for it.

// HelmBin returns the helm binary tests run: $MESHBRIDGE_HELM_BIN, else
// the one tools/build.sh helm built from the checkout's tools/helm (the
// checkout is found from the working directory up). When there is none it
// skips the test, or fails it when MESHBRIDGE_REQUIRE_SERVERS=1.
func HelmBin(t testing.TB) string { return toolBin(t, "helm", "MESHBRIDGE_HELM_BIN") }

// PromtoolBin returns the promtool binary tests run: $MESHBRIDGE_PROMTOOL_BIN,
// else the one tools/build.sh promtool built from the checkout's
// tools/promtool; else, like HelmBin, it skips or fails the test.
func PromtoolBin(t testing.TB) string { return toolBin(t, "promtool", "MESHBRIDGE_PROMTOOL_BIN") }

// toolBin returns $env when set, else tools/build.sh's build of name from
// the module tools/<name>.
func toolBin(t testing.TB, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if isExecutable(p) {
			return p
		}
		missing(t, name, fmt.Sprintf("%s=%s is not an executable file", env, p))
	}
	root, err := checkoutRoot()
	if err != nil {
		missing(t, name, fmt.Sprintf("no %s: set %s (%v)", name, env, err))
	}
	module := filepath.Join(root, "tools", name)
	key, err := moduleKey(module)
	if err != nil {
		missing(t, name, fmt.Sprintf("no %s: set %s (%v)", name, env, err))
	}
	p := filepath.Join(cacheDir(), name+"-"+key, name)
	if !isExecutable(p) {
		missing(t, name, fmt.Sprintf("no %s built from %s (no %s): set %s, or build it with tools/build.sh %s",
			name, module, p, env, name))
	}
	return p
}

// moduleKey is tools/build.sh's key() of the module in dir: the first 12
// hex digits of the SHA-256 of go.mod followed by go.sum.
func moduleKey(dir string) (string, error) {
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

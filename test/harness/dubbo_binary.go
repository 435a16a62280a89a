package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file finds the dubbo-go test provider: the main package
// test/dubbo/provider of the separate Go module test/dubbo, which
// tools/build.sh dubbo builds into
// ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/dubbo-<key>/dubbo-provider.
// The key covers the module's sources, so a provider built from other
// sources than the checkout's is never used.

const (
	// mainModule is the module path of the checkout's root go.mod.
	mainModule = "github.com/meshbridge/meshbridge"
	// dubboModuleDir is the provider's module, relative to the checkout.
	dubboModuleDir = "test/dubbo"
	// dubboProviderName is the provider binary's name in its cache directory.
	dubboProviderName = "dubbo-provider"
)

// DubboProviderBinary returns the dubbo-go test provider binary tests run:
// $MESHBRIDGE_DUBBO_PROVIDER_BIN, else
// ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/dubbo-<key>/dubbo-provider
// built by tools/build.sh dubbo, where key is the hash of the checkout's
// test/dubbo sources (go.mod, go.sum, *.go) that tools/build.sh computes;
// the checkout is found from the working directory up.
// When there is none, or only one built from other sources, it skips the
// test, or fails it when MESHBRIDGE_REQUIRE_SERVERS=1.
func DubboProviderBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MESHBRIDGE_DUBBO_PROVIDER_BIN"); p != "" {
		if isExecutable(p) {
			return p
		}
		missing(t, "dubbo", fmt.Sprintf("MESHBRIDGE_DUBBO_PROVIDER_BIN=%s is not an executable file", p))
	}
	root, err := checkoutRoot()
	if err != nil {
		missing(t, "dubbo", fmt.Sprintf("no dubbo-go test provider: set MESHBRIDGE_DUBBO_PROVIDER_BIN (%v)", err))
	}
	key, err := dubboSourceKey(filepath.Join(root, dubboModuleDir))
	if err != nil {
		missing(t, "dubbo", fmt.Sprintf("no dubbo-go test provider: set MESHBRIDGE_DUBBO_PROVIDER_BIN (%v)", err))
	}
	p := filepath.Join(cacheDir(), "dubbo-"+key, dubboProviderName)
	if !isExecutable(p) {
		missing(t, "dubbo", fmt.Sprintf("no dubbo-go test provider built from %s as it is now (no %s): set MESHBRIDGE_DUBBO_PROVIDER_BIN, or build it with tools/build.sh dubbo",
			filepath.Join(root, dubboModuleDir), p))
	}
	return p
}

// dubboSourceKey is the cache key tools/build.sh dubbo builds the provider
// of module dir under: the first 12 hex digits of the SHA-256 of
// `sha256sum <files>` run in dir, where files are go.mod, go.sum (when
// present) and every regular *.go file below dir, as paths relative to dir,
// sorted bytewise. A change to any of them, a rename included, changes the
// key. It fails when dir has no go.mod.
func dubboSourceKey(dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("no Go module at %s: %w", dir, err)
	}
	files := []string{"go.mod"}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		files = append(files, "go.sum")
	}
	gofiles, err := regularFiles(dir, ".", func(name string) bool { return strings.HasSuffix(name, ".go") })
	if err != nil {
		return "", err
	}
	return sourceKey(dir, append(files, gofiles...))
}

// checkoutRoot is the nearest directory at or above the working directory
// whose go.mod declares module github.com/meshbridge/meshbridge.
func checkoutRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if modulePath(filepath.Join(dir, "go.mod")) == mainModule {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("no checkout of " + mainModule + " at or above " + wd)
		}
	}
}

// modulePath is the module path a go.mod declares, or "" when it cannot be
// read.
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

package file

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
)

// TestInvalidServiceIsSkipped: a service of the file that its fields do not
// allow (a port of 70000, an unknown protocol, a host declared twice) is
// skipped with its reason, logged once and counted
// (meshbridge_registry_skipped_total{reason="invalid"}); the file's other
// services are listed and the registry is up. A re-read that skips it again
// logs and counts nothing more; fixed, it is listed.
func TestInvalidServiceIsSkipped(t *testing.T) {
	const valid = "- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}]\n"
	const invalid = "- host: b.local\n  ports: [{number: 70000}]\n  instances: [{address: 10.0.0.2}]\n"
	const fixed = "- host: b.local\n  ports: [{number: 7000}]\n  instances: [{address: 10.0.0.2}]\n"
	path := filepath.Join(t.TempDir(), "services.yaml")
	writeAtomically(t, path, "services:\n"+valid+invalid)
	cfg, logs := loggedConfig(t, "skips", path)
	skips := func() float64 {
		return testutil.ToFloat64(registries.RegistrySkipped.WithLabelValues("skips", skippedInvalid))
	}
	reg, rec := runConfig(t, cfg)
	rec.Eventually(t, "a.local listed and synced", func(st registrytest.State) bool {
		_, ok := st.Good["a.local"]
		return ok && st.Synced == 1
	})
	const warning = `service=b.local reason="services[1].ports[0].number: 70000 is not a port (1-65535)"`
	if st := rec.State(); len(st.Good) != 1 || len(wideErrors(st.All)) != 0 || !reg.Health().Up {
		t.Fatalf("listed %v, %d errors, health %+v; want a.local alone, no error, up", st.Good, len(wideErrors(st.All)), reg.Health())
	}
	if n := strings.Count(logs.String(), warning); n != 1 || skips() != 1 ||
		!strings.Contains(logs.String(), `level=WARN msg="Skipped an invalid service of the registry file; its other services are served"`) {
		t.Fatalf("%d warnings, %v counted; want one of each:\n%s", n, skips(), logs.String())
	}

	// Another service added: the invalid one is skipped again, silently.
	writeAtomically(t, path, "services:\n"+valid+invalid+strings.ReplaceAll(valid, "a.local", "c.local"))
	rec.Eventually(t, "c.local listed", func(st registrytest.State) bool { _, ok := st.Good["c.local"]; return ok })
	if n := strings.Count(logs.String(), "Skipped an invalid service"); n != 1 || skips() != 1 {
		t.Errorf("after a re-read: %d warnings, %v counted; want still one", n, skips())
	}
	writeAtomically(t, path, "services:\n"+valid+fixed)
	rec.Eventually(t, "b.local listed once fixed", func(st registrytest.State) bool { _, ok := st.Good["b.local"]; return ok })
}

// TestFileOverMaxSizeIsRefused: a file larger than MaxSize is not read: a
// permanent error naming its size and the limit, the last good listing
// kept.
func TestFileOverMaxSizeIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "services.yaml")
	writeAtomically(t, path, goodFile)
	cfg, _ := loggedConfig(t, "big", path)
	cfg.MaxSize = int64(len(goodFile)) + 10
	reg, rec := runConfig(t, cfg)
	rec.Eventually(t, "the listing", func(st registrytest.State) bool { return st.Synced == 1 })
	big := goodFile + "# " + strings.Repeat("x", 100) + "\n"
	writeAtomically(t, path, big)
	rec.Eventually(t, "an error", func(st registrytest.State) bool { return len(wideErrors(st.All)) > 0 })
	err := wideErrors(rec.Snapshots())[0].Err
	want := path + " is " + itoa(len(big)) + " bytes, over file.maxSize (" + itoa(len(goodFile)+10) + " bytes)"
	if !registries.IsPermanent(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("Err = %v, want a permanent error containing %q", err, want)
	}
	if _, ok := rec.State().Good["a.local"]; !ok || reg.Health().Up {
		t.Errorf("the last good listing is gone, or the registry is up: %v", rec.State().Good)
	}
}

// TestSymlinkLoopIsPermanent: a path that is a symbolic link loop is a
// permanent error, which only an operator fixes.
func TestSymlinkLoopIsPermanent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "services.yaml")
	if err := os.Symlink(path, path); err != nil {
		t.Fatal(err)
	}
	_, rec := runConfig(t, Config{Name: "loop", Path: path})
	rec.Eventually(t, "an error", func(st registrytest.State) bool { return len(wideErrors(st.All)) > 0 })
	if err := wideErrors(rec.Snapshots())[0].Err; !registries.IsPermanent(err) {
		t.Errorf("Err = %v, want it permanent", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

const goodFile = "services:\n- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}]\n"

// writeAtomically writes content to path through a rename, as editors and
// config tools do.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func loggedConfig(t *testing.T, name, path string) (Config, *harness.LockedBuffer) {
	var logs harness.LockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	return Config{Name: name, Path: path, Resync: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}, &logs
}

// wideErrors returns the registry-wide error snapshots (empty Service.Name).
func wideErrors(snaps []registries.Snapshot) []registries.Snapshot {
	var out []registries.Snapshot
	for _, s := range snaps {
		if s.Err != nil && s.Service.Name == "" {
			out = append(out, s)
		}
	}
	return out
}

// TestMissingFileIsPermanentUntilCreated: a registry file that does not
// exist is a permanent registry-wide error (a one-shot reader stops at
// once), one warning, no listing and no Synced; the running registry keeps
// watching, and once the file appears it lists it, syncs, and reports
// itself up with the error cleared.
func TestMissingFileIsPermanentUntilCreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "services.yaml")
	cfg, logs := loggedConfig(t, "missing", path)
	reg, rec := runConfig(t, cfg)
	rec.Eventually(t, "an error snapshot", func(st registrytest.State) bool { return len(st.All) > 0 })
	st := rec.State()
	snaps, synced := st.All, st.Synced > 0
	if len(snaps) != 1 || snaps[0].Service.Name != "" || !registries.IsPermanent(snaps[0].Err) ||
		!strings.Contains(snaps[0].Err.Error(), "no such file") {
		t.Fatalf("snapshots = %+v, want one permanent registry-wide error naming the missing file", snaps)
	}
	if synced {
		t.Errorf("Synced before any listing")
	}
	h := reg.Health()
	if h.Up || !strings.Contains(h.LastError, path) || h.LastErrorTime.IsZero() || !h.LastSuccess.IsZero() {
		t.Errorf("Health = %+v, want down with the error, no success", h)
	}

	writeAtomically(t, path, goodFile)
	rec.Eventually(t, "the listing and Synced", func(st registrytest.State) bool {
		a := last(st.All, "a.local")
		return a != nil && a.Err == nil && len(a.Service.Instances) == 1 && st.Synced > 0
	})
	h = reg.Health()
	if !h.Up || h.LastError != "" || h.LastErrorTime.IsZero() || h.LastSuccess.IsZero() {
		t.Errorf("Health = %+v, want up, the error cleared, its time kept", h)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "Cannot read the registry") {
		t.Errorf("%d warnings, want one saying nothing can be served yet", n)
	}
	if strings.Contains(out, "Kept the last good listing") {
		t.Errorf("the log claims a last good listing that never existed")
	}
}

// TestDirectoryIsPermanent: a path naming a directory is a permanent error.
func TestDirectoryIsPermanent(t *testing.T) {
	dir := t.TempDir()
	reg, rec := runConfig(t, Config{Name: "dir", Path: dir, Resync: time.Hour})
	rec.Eventually(t, "an error snapshot", func(st registrytest.State) bool { return len(st.All) > 0 })
	if err := rec.Snapshots()[0].Err; !registries.IsPermanent(err) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Err = %v, want a permanent error saying the path is a directory", err)
	}
	if reg.Health().Up {
		t.Errorf("Health up for a directory")
	}
}

// TestMissingDirectoryIsRetried: a file in a directory that does not exist
// yet is not a Run error: the registry reports it and re-reads at each
// resync, so the file is listed once the directory and file appear.
func TestMissingDirectoryIsRetried(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, "services.yaml")
	reg, rec := runConfig(t, Config{Name: "later", Path: path, Resync: 50 * time.Millisecond})
	rec.Eventually(t, "an error snapshot", func(st registrytest.State) bool { return len(st.All) > 0 })
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, path, goodFile)
	rec.Eventually(t, "the listing", func(st registrytest.State) bool {
		a := last(st.All, "a.local")
		return a != nil && a.Err == nil
	})
	n := len(wideErrors(rec.Snapshots()))
	if n != 1 {
		t.Errorf("%d registry-wide error snapshots for one run of the same failure, want 1", n)
	}
	if !reg.Health().Up {
		t.Errorf("Health not up after a good read")
	}
}

// TestBadFileLogsOnceDownOnceUp: after a good listing, a run of bad
// versions of the file logs one "read failed" warning and one "succeeded
// again" line, sends one error snapshot per distinct error and keeps the
// listing; the last error clears when the file reads fine again. A file
// that is not a registry document is a permanent error (only an edit fixes
// it: meshbridge translate stops at once), which the running registry
// still re-reads at every change.
func TestBadFileLogsOnceDownOnceUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "services.yaml")
	writeAtomically(t, path, goodFile)
	cfg, logs := loggedConfig(t, "bad", path)
	reg, rec := runConfig(t, cfg)
	rec.Eventually(t, "the listing", func(st registrytest.State) bool { return len(st.All) == 1 })

	writeAtomically(t, path, "services: [{host: a.local, bogus: 1}]\n")
	rec.Eventually(t, "a parse error", func(st registrytest.State) bool { return st.All[len(st.All)-1].Err != nil })
	writeAtomically(t, path, "services: [{host: a.local, bogus: 2}]\n") // same error text
	writeAtomically(t, path, "services: [{host: a.local, ports: [{number: udp}]}]\n")
	rec.Eventually(t, "a second, different parse error", func(st registrytest.State) bool {
		e := st.All[len(st.All)-1].Err
		return e != nil && strings.Contains(e.Error(), "udp")
	})
	if h := reg.Health(); h.Up || !strings.Contains(h.LastError, "udp") {
		t.Errorf("Health = %+v, want down with the last parse error", h)
	}
	writeAtomically(t, path, strings.Replace(goodFile, "10.0.0.1", "10.0.0.2", 1))
	rec.Eventually(t, "the fixed listing", func(st registrytest.State) bool {
		a := st.All[len(st.All)-1]
		return a.Err == nil && len(a.Service.Instances) == 1 && a.Service.Instances[0].Address == "10.0.0.2"
	})
	if h := reg.Health(); !h.Up || h.LastError != "" || h.Errors < 2 {
		t.Errorf("Health = %+v, want up, the error cleared, the failures counted", h)
	}
	for _, s := range wideErrors(rec.Snapshots()) {
		if !registries.IsPermanent(s.Err) {
			t.Errorf("a parse error is not marked permanent: %v", s.Err)
		}
	}
	out := logs.String()
	for _, line := range []string{"Registry read failed; serving its last-known-good state", "Registry read succeeded again"} {
		if n := strings.Count(out, line); n != 1 {
			t.Errorf("%d log lines %q, want 1", n, line)
		}
	}
}

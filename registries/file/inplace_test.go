package file

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

const threeServices = "services:\n" +
	"- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1}, {address: 10.0.0.2}]\n" +
	"- host: b.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.1.1}]\n" +
	"- host: c.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.2.1}]\n"

// writeInPlace rewrites path the way an editor writing in place does:
// truncate, then the content in chunks, with pauses shorter than
// DefaultSettle between them (the writer's pace, a scenario parameter).
func writeInPlace(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for chunk := range slices.Chunk([]byte(content), max(1, len(content)/3)) {
		<-time.After(20 * time.Millisecond)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
}

// noLoss fails t when any snapshot removed a service or emptied one.
func noLoss(t *testing.T, snaps []registries.Snapshot) {
	t.Helper()
	for _, s := range snaps {
		if s.Removed || (s.Err == nil && s.Service.Name != "" && len(s.Service.Instances) == 0) {
			t.Errorf("snapshot %+v removed or emptied a service the file still lists", s)
		}
	}
}

// TestInPlaceWritersNeverEmptyTheRegistry: writers that rewrite the file in
// place pass through an empty and a partial file; the registry, told by
// fsnotify (the resync is an hour), reads the finished file once it settles
// and never the file in between: no error, no removal, the change arrives.
func TestInPlaceWritersNeverEmptyTheRegistry(t *testing.T) {
	writers := map[string]func(t *testing.T, path, content string){
		"truncate, then write in chunks (an editor writing in place)": writeInPlace,
		"cp over the file": func(t *testing.T, path, content string) {
			src := filepath.Join(t.TempDir(), "new.yaml")
			if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("cp", src, path).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
		},
		"shell redirection (cat >)": func(t *testing.T, path, content string) {
			cmd := exec.Command("sh", "-c", `cat > "$1"`, "sh", path)
			cmd.Stdin = strings.NewReader(content)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sh: %v: %s", err, out)
			}
		},
	}
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "services.yaml")
			writeAtomically(t, path, threeServices)
			rec := runRegistry(t, "inplace", path)
			rec.Eventually(t, "synced with three services", func(st registrytest.State) bool {
				return st.Synced == 1 && len(st.Good) == 3
			})
			before := len(rec.Snapshots())
			write(t, path, strings.Replace(threeServices, "10.0.2.1", "10.0.2.9", 1))
			rec.Eventually(t, "the rewritten c.local", func(st registrytest.State) bool {
				return slices.Equal(st.Addrs("c.local"), []string{"10.0.2.9:80"})
			})
			after := rec.Snapshots()[before:]
			noLoss(t, after)
			if len(after) != 1 {
				t.Errorf("snapshots after the rewrite = %+v; want c.local's only: nothing read in between", after)
			}
		})
	}
}

// TestEmptyAndPartialFilesRemoveNothing: a file that is empty or not a
// complete registry document, written in place as a writer cut short
// leaves it, is a read error: every service stays, and the registry is
// down with the error until a complete file comes.
func TestEmptyAndPartialFilesRemoveNothing(t *testing.T) {
	cases := map[string]struct {
		content    string
		incomplete bool // the error wraps ErrIncomplete (else it is a YAML error)
	}{
		"0 bytes (: > services.yaml)":  {content: "", incomplete: true},
		"whitespace and comments only": {content: "\n# services follow\n\n", incomplete: true},
		"the services key and nothing": {content: "services:\n", incomplete: true},
		"no services key":              {content: "{}\n", incomplete: true},
		"cut inside an item":           {content: threeServices[:len(threeServices)-12]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "services.yaml")
			writeAtomically(t, path, threeServices)
			reg, rec := runConfig(t, Config{Name: "partial", Path: path, Resync: time.Hour})
			rec.Eventually(t, "synced with three services", func(st registrytest.State) bool {
				return st.Synced == 1 && len(st.Good) == 3
			})
			writeInPlace(t, path, tc.content)
			rec.Eventually(t, "a registry-wide error", func(st registrytest.State) bool {
				return len(wideErrors(st.All)) == 1
			})
			st := rec.State()
			if err := wideErrors(st.All)[0].Err; tc.incomplete != errors.Is(err, ErrIncomplete) {
				t.Errorf("error %v: wraps ErrIncomplete %v, want %v", err, errors.Is(err, ErrIncomplete), tc.incomplete)
			}
			if len(st.Good) != 3 {
				t.Errorf("services after the bad file = %s; want all three kept", st)
			}
			if h := reg.Health(); h.Up || h.LastError == "" {
				t.Errorf("Health = %+v, want down with the error", h)
			}
			noLoss(t, st.All)
			writeInPlace(t, path, threeServices)
			harness.EventuallyTrue(t, 10*time.Second, "up again", func() bool { return reg.Health().Up })
			noLoss(t, rec.Snapshots())
		})
	}
}

// TestExplicitEmptyListRemovesEverything: `services: []` is the one file
// that lists no service: every service is removed.
func TestExplicitEmptyListRemovesEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "services.yaml")
	writeAtomically(t, path, threeServices)
	rec := runRegistry(t, "explicit", path)
	rec.Eventually(t, "synced with three services", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Good) == 3
	})
	writeInPlace(t, path, "services: []\n")
	rec.Eventually(t, "every service removed", func(st registrytest.State) bool { return len(st.Good) == 0 })
	if errs := wideErrors(rec.Snapshots()); len(errs) != 0 {
		t.Errorf("errors = %+v, want none: an explicit empty list is a listing", errs)
	}
}

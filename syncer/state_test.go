package syncer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// stateSyncer is a Syncer of registry "r" (type consul) persisting to dir,
// with a 5 s sync timeout, its Run started until the test ends.
func stateSyncer(t *testing.T, dir string) (*Syncer, *serviceentry.Store) {
	t.Helper()
	tr, err := translate.New(translate.Options{Registry: "r", HostTemplate: consul.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	sy := New(store, Config{
		Registries: []Registry{{Name: "r", Type: "consul", Translator: tr, Policy: DefaultOutagePolicy}},
		Timeout:    5 * time.Second, StateDir: dir,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sy.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sy, store
}

// persisted returns a state dir holding the listing of registry "r" with n
// services svc-00.. (fill), as a synced bridge wrote it.
func persisted(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		sy, _ := stateSyncer(t, dir)
		fill(sy, n)
		time.Sleep(3 * time.Second)
		synctest.Wait()
	})
	return dir
}

// TestPersistedListing: a synced registry's listing is written to the state
// dir; a bridge started while the registry is down serves it after
// sync.timeout, marked from disk, and replaces it once the registry answers.
func TestPersistedListing(t *testing.T) {
	dir := persisted(t, 3)
	var pl persistedListing
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &pl); err != nil || pl.Version != listingVersion || len(pl.Services) != 3 {
		t.Fatalf("state file: %v, %+v", err, pl)
	}

	synctest.Test(t, func(t *testing.T) {
		sy, store := stateSyncer(t, dir)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if n := served(store); n != 0 || sy.HasSynced() {
			t.Fatalf("before sync.timeout: %d served, synced %v", n, sy.HasSynced())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		st := sy.Status()[0]
		if n := served(store); n != 3 || !sy.HasSynced() || !st.FromDisk || !st.Stale {
			t.Fatalf("after sync.timeout: %d served, synced %v, status %+v", n, sy.HasSynced(), st)
		}
		// The registry answers with one of the three services.
		list(sy, "r", registries.Scope{}, []string{"svc-00"})
		sy.Snapshot(snap("r", "svc-00", instance("svc-00-1", "10.0.0.9", 8080)))
		sy.Synced("r")
		st = sy.Status()[0]
		if n := served(store); n != 1 || st.FromDisk || st.Stale {
			t.Fatalf("after the registry answered: %d served, status %+v", n, st)
		}
		if we := store.List(model.KindWorkloadEntry, ""); len(we) != 1 || we[0].WorkloadEntry().GetAddress() != "10.0.0.9" {
			t.Errorf("served %v, want the registry's instance", we)
		}
	})
}

// TestPersistedListingSeedsTheRun: a run starts from the persisted
// listing (Serving, registries.Reporter rule 8); a service its first
// listing removes before sync.timeout is never served from disk.
func TestPersistedListingSeedsTheRun(t *testing.T) {
	dir := persisted(t, 3)
	synctest.Test(t, func(t *testing.T) {
		sy, store := stateSyncer(t, dir)
		if got, want := sy.Serving("r"), keysOf([]string{"svc-00", "svc-01", "svc-02"}); !slices.Equal(got, want) {
			t.Fatalf("Serving = %v, want the persisted listing %v", got, want)
		}
		// The registry lists one service but does not answer its read
		// before sync.timeout.
		list(sy, "r", registries.Scope{}, []string{"svc-01"})
		if got, want := sy.Serving("r"), keysOf([]string{"svc-01"}); !slices.Equal(got, want) {
			t.Errorf("Serving after the listing = %v, want %v", got, want)
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		we := store.List(model.KindWorkloadEntry, "")
		if st := sy.Status()[0]; len(we) != 1 || !st.FromDisk || we[0].WorkloadEntry().GetAddress() != "10.0.0.2" {
			t.Fatalf("after sync.timeout: served %v, status %+v; want svc-01 only, from disk", we, st)
		}
	})
}

// TestPersistedListingIgnoredWhenBad: a corrupt file, one of another version
// (a version 1 one holding a Dubbo identity, which version 2 names by its
// host) and one of another registry are ignored: nothing is served from
// disk.
func TestPersistedListingIgnoredWhenBad(t *testing.T) {
	for name, content := range map[string]string{
		"corrupt": "{not json",
		"version 1 with a Dubbo service": `{"version": 1, "registry": "r", "type": "consul", "services": [{"Name": "x", ` +
			`"Dubbo": {"Interface": "a.B"}, "Instances": [{"ID": "a", "Address": "10.0.0.1", "Port": 80}]}]}`,
		"another version":  `{"version": 99, "registry": "r", "type": "consul", "services": [{"Name": "x", "Instances": [{"ID": "a", "Address": "10.0.0.1", "Port": 80}]}]}`,
		"another registry": `{"version": 1, "registry": "q", "type": "consul", "services": [{"Name": "x", "Instances": [{"ID": "a", "Address": "10.0.0.1", "Port": 80}]}]}`,
		"another type":     `{"version": 1, "registry": "r", "type": "nacos", "services": [{"Name": "x", "Instances": [{"ID": "a", "Address": "10.0.0.1", "Port": 80}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "r.json"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				sy, store := stateSyncer(t, dir)
				time.Sleep(6 * time.Second)
				synctest.Wait()
				if n := served(store); n != 0 || sy.Status()[0].FromDisk {
					t.Fatalf("%d served from a bad file", n)
				}
			})
		})
	}
}

// TestPersistedListingVersion1Read: a version 1 listing without Dubbo
// services reads as version 2 does (an upgrade keeps it), and is served
// after sync.timeout.
func TestPersistedListingVersion1Read(t *testing.T) {
	dir := t.TempDir()
	v1 := `{"version": 1, "registry": "r", "type": "consul", "services": [{"Name": "x", "Dubbo": null, ` +
		`"Instances": [{"ID": "a", "Address": "10.0.0.1", "Port": 80}]}]}`
	if err := os.WriteFile(filepath.Join(dir, "r.json"), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		sy, store := stateSyncer(t, dir)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if n := served(store); n != 1 || !sy.Status()[0].FromDisk {
			t.Fatalf("%d served from a version 1 file, status %+v; want 1, from disk", n, sy.Status()[0])
		}
	})
}

// TestNothingPersistedWhileStale: a registry whose service failed to read is
// not persisted (its listing is not authoritative).
func TestNothingPersistedWhileStale(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		sy, _ := stateSyncer(t, dir)
		fill(sy, 3)
		s := snap("r", "svc-01")
		s.Err = os.ErrDeadlineExceeded
		sy.Snapshot(s)
		time.Sleep(3 * time.Second)
		synctest.Wait()
	})
	if _, err := os.Stat(filepath.Join(dir, "r.json")); !os.IsNotExist(err) {
		t.Errorf("a listing with a stale service was persisted: %v", err)
	}
}

// TestKeptPortsPersisted: the ports kept for the hosts are written to
// ports.json once the Syncer is ready and read back as the next run's
// KeptPorts; a corrupt file is ignored.
func TestKeptPortsPersisted(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		sy, _ := stateSyncer(t, dir)
		sy.Snapshot(snap("r", "web", instance("n1/web", "10.0.0.1", 35499), instance("n2/web", "10.0.0.2", 36807)))
		sy.Synced("r")
		time.Sleep(3 * time.Second)
		synctest.Wait()
	})
	synctest.Test(t, func(t *testing.T) {
		sy, _ := stateSyncer(t, dir)
		// The lower port of a newcomer would be the port of a host decided
		// anew; the kept one is read back.
		sy.Snapshot(snap("r", "web", instance("n3/web", "10.0.0.3", 34855), instance("n2/web", "10.0.0.2", 36807)))
		sy.Synced("r")
		if kept := sy.KeptPorts()["web.service.consul"]; kept.Port != 35499 {
			t.Errorf("after a restart the host's port is %d, want the kept 35499", kept.Port)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "ports.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		sy, _ := stateSyncer(t, dir)
		sy.Snapshot(snap("r", "web", instance("n3/web", "10.0.0.3", 34855)))
		sy.Synced("r")
		if kept := sy.KeptPorts()["web.service.consul"]; kept.Port != 34855 {
			t.Errorf("with a corrupt ports.json the host's port is %d, want 34855 decided anew", kept.Port)
		}
	})
}

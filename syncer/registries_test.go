package syncer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/translate"
)

// testRegistry is a consul-type registry configuration named name.
func testRegistry(t *testing.T, name string, p OutagePolicy) Registry {
	t.Helper()
	tr, err := translate.New(translate.Options{Registry: name, HostTemplate: consul.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	return Registry{Name: name, Type: "consul", Translator: tr, Policy: p}
}

// listAll lists and syncs services of one instance each in registry reg.
func listAll(sy *Syncer, reg string, services ...string) {
	list(sy, reg, registries.Scope{}, services)
	for i, k := range services {
		sy.Snapshot(snap(reg, k, instance(reg+"/"+k, fmt.Sprintf("10.1.0.%d", i+1), 8080)))
	}
	sy.Synced(reg)
}

func hosts(store interface {
	List(model.Kind, string) []*model.Config
}) []string {
	var out []string
	for _, c := range store.List(model.KindServiceEntry, "") {
		out = append(out, c.Name+"@"+c.Labels[model.LabelRegistry])
	}
	slices.Sort(out)
	return out
}

// TestAddRegistry: a registry added after HasSynced is not waited for and
// comes after the running ones in collision order; one added before is
// waited for.
func TestAddRegistry(t *testing.T) {
	sy, store, _ := newTestSyncerPolicy(t, ConflictFirst, "dc1")
	sy.AddRegistry(testRegistry(t, "early", OutagePolicy{}))
	listAll(sy, "dc1", "web")
	if sy.HasSynced() {
		t.Fatal("HasSynced before the registry added before sync listed its services")
	}
	listAll(sy, "early")
	if !sy.HasSynced() {
		t.Fatal("not synced after every registry listed")
	}
	sy.AddRegistry(testRegistry(t, "late", OutagePolicy{}))
	if !sy.HasSynced() || sy.RegistrySynced("late") {
		t.Fatalf("after adding late: HasSynced %v (want true), RegistrySynced(late) %v (want false)", sy.HasSynced(), sy.RegistrySynced("late"))
	}
	listAll(sy, "late", "web", "api")
	flush(t, store)
	if got, want := hosts(store), []string{"api.service.consul@late", "web.service.consul@dc1"}; !slices.Equal(got, want) {
		t.Fatalf("ServiceEntries %v, want %v (dc1 keeps web: late comes after it)", got, want)
	}
	if st := sy.Status(); len(st) != 3 || st[2].Name != "late" || !st[2].Synced {
		t.Errorf("status %+v: want dc1, early, late (synced)", st)
	}
}

// TestRemoveRegistry: a removed registry's services leave the store at once
// below the delete guard's floor, or when confirmed above it; a host it
// shared goes to the other registry; nothing else is written.
func TestRemoveRegistry(t *testing.T) {
	guard := OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 2}
	for _, tc := range []struct {
		name     string
		services []string
		held     bool
	}{
		{"below the floor: at once", []string{"web", "only-a"}, false},
		{"above the floor: held until confirmed", []string{"web", "only-a", "only-b", "only-c"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sy, store, wc := newTestSyncer(t)
			sy.AddRegistry(testRegistry(t, "a", guard))
			sy.AddRegistry(testRegistry(t, "b", guard))
			listAll(sy, "a", tc.services...)
			listAll(sy, "b", "web", "only-b-side")
			flush(t, store)
			wc.take()

			sy.RemoveRegistry("a")
			flush(t, store)
			st := sy.Status()
			if tc.held {
				if len(hosts(store)) != len(tc.services)+1 || len(st) != 2 || !st[0].Removed || st[0].DeleteGuard == nil {
					t.Fatalf("held removal: ServiceEntries %v, status %+v", hosts(store), st)
				}
				if sy.RegistrySynced("a") != true {
					t.Error("RegistrySynced(a) false while its removal is held")
				}
				if n, err := sy.ConfirmDeletes("a"); err != nil || n != len(tc.services) {
					t.Fatalf("ConfirmDeletes = %d, %v", n, err)
				}
				flush(t, store)
				st = sy.Status()
			}
			want := []string{"only-b-side.service.consul@b", "web.service.consul@b"}
			if got := hosts(store); !slices.Equal(got, want) {
				t.Fatalf("ServiceEntries %v, want %v", got, want)
			}
			if len(st) != 1 || st[0].Name != "b" {
				t.Errorf("status %+v, want b only", st)
			}
			if !sy.RegistrySynced("a") {
				t.Error("RegistrySynced(a) = false after its removal: its absence is authoritative")
			}
			for _, ev := range wc.take() {
				if strings.Contains(ev, "only-b-side") {
					t.Errorf("the removal wrote another registry's service: %q", ev)
				}
			}
			sy.Snapshot(snap("a", "late", instance("a/late", "10.9.9.9", 8080)))
			flush(t, store)
			if got := hosts(store); !slices.Equal(got, want) {
				t.Errorf("a late snapshot of the removed registry was served: %v", got)
			}
		})
	}
}

// TestRestartRegistry: a restart keeps the services until the new watcher
// synced, then removes what it did not list; the unchanged services are not
// written again; a restart whose listing would empty the registry is held
// by the delete guard.
func TestRestartRegistry(t *testing.T) {
	guard := OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 1}
	sy, store, wc := newTestSyncer(t)
	sy.AddRegistry(testRegistry(t, "a", guard))
	listAll(sy, "a", "one", "two", "three")
	flush(t, store)
	wc.take()

	sy.AddRegistry(testRegistry(t, "a", guard))
	if sy.RegistrySynced("a") {
		t.Fatal("RegistrySynced(a) true while the restarted registry relists")
	}
	listAll(sy, "a", "one", "two")
	flush(t, store)
	if got, want := hosts(store), []string{"one.service.consul@a", "two.service.consul@a"}; !slices.Equal(got, want) {
		t.Fatalf("after the relisting: %v, want %v", got, want)
	}
	// Only "three" is written: deleted (its ServiceEntry and WorkloadEntry).
	for _, w := range wc.take() {
		if !strings.HasPrefix(w, "delete ") || !strings.Contains(w, "three") {
			t.Errorf("unexpected write after a restart that lists the same services: %q", w)
		}
	}

	// A restart that finds nothing: held.
	sy.AddRegistry(testRegistry(t, "a", guard))
	listAll(sy, "a")
	flush(t, store)
	if got := hosts(store); len(got) != 2 {
		t.Fatalf("an emptied restart removed services the guard should hold: %v", got)
	}
	if st := sy.Status(); st[0].DeleteGuard == nil {
		t.Fatalf("no delete guard after an emptied restart: %+v", st)
	}
}

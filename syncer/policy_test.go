package syncer

import (
	"errors"
	"fmt"
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

// policySyncer is a Syncer of one consul-type registry "r" with policy p on
// a store that is not run (writes land at once; no handler runs).
func policySyncer(t *testing.T, p OutagePolicy) (*Syncer, *serviceentry.Store) {
	t.Helper()
	tr, err := translate.New(translate.Options{Registry: "r", HostTemplate: consul.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	return New(store, Config{Registries: []Registry{{Name: "r", Type: "consul", Translator: tr, Policy: p}}}), store
}

// fill lists and syncs n services svc-00.. of one instance each.
func fill(sy *Syncer, n int) []string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("svc-%02d", i))
	}
	list(sy, "r", registries.Scope{}, keys)
	for i, k := range keys {
		sy.Snapshot(snap("r", k, instance(k+"-1", fmt.Sprintf("10.0.0.%d", i+1), 8080)))
	}
	sy.Synced("r")
	return keys
}

func served(store *serviceentry.Store) int { return len(store.List(model.KindWorkloadEntry, "")) }

func removed(name string, relist bool) registries.Snapshot {
	s := snap("r", name)
	s.Removed, s.Relist = true, relist
	return s
}

func emptied(name string, relist bool) registries.Snapshot {
	s := snap("r", name)
	s.Relist = relist
	return s
}

// TestHoldDown: a disappearance read after a reconnection (Relist) waits
// holdDown; one that comes back within it changes nothing; an explicit
// one (no Relist) applies at once.
func TestHoldDown(t *testing.T) {
	p := OutagePolicy{HoldDown: 10 * time.Second, MaxDeleteRatio: 1}
	for _, tc := range []struct {
		name      string
		snaps     func(svc string) []registries.Snapshot
		after     time.Duration
		wantAfter int // instances served after `after`
	}{
		{"relist removal waits", func(s string) []registries.Snapshot { return []registries.Snapshot{removed(s, true)} }, 9 * time.Second, 3},
		{"relist removal applies after hold-down", func(s string) []registries.Snapshot { return []registries.Snapshot{removed(s, true)} }, 11 * time.Second, 2},
		{"relist empty list applies after hold-down", func(s string) []registries.Snapshot { return []registries.Snapshot{emptied(s, true)} }, 11 * time.Second, 2},
		{"explicit removal is at once", func(s string) []registries.Snapshot { return []registries.Snapshot{removed(s, false)} }, 0, 2},
		{"explicit empty list is at once", func(s string) []registries.Snapshot { return []registries.Snapshot{emptied(s, false)} }, 0, 2},
		{"back within the hold-down: nothing happens", func(s string) []registries.Snapshot {
			return []registries.Snapshot{removed(s, true), snap("r", s, instance(s+"-1", "10.0.0.1", 8080))}
		}, time.Minute, 3},
		{"an explicit removal during a hold-down applies at once", func(s string) []registries.Snapshot {
			return []registries.Snapshot{emptied(s, true), removed(s, false)}
		}, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sy, store := policySyncer(t, p)
				keys := fill(sy, 3)
				before := store.Get(model.KindServiceEntry, "svc-00.service.consul", "mesh")
				for _, s := range tc.snaps(keys[0]) {
					sy.Snapshot(s)
				}
				time.Sleep(tc.after)
				synctest.Wait()
				if got := served(store); got != tc.wantAfter {
					t.Fatalf("%d instances served after %s, want %d", got, tc.after, tc.wantAfter)
				}
				if tc.wantAfter == 3 {
					if now := store.Get(model.KindServiceEntry, "svc-00.service.consul", "mesh"); now == nil || now.ResourceVersion != before.ResourceVersion {
						t.Errorf("the ServiceEntry was rewritten: %v → %v", before.ResourceVersion, now)
					}
				}
			})
		})
	}
}

// TestDeleteGuard: a listing that would remove more than maxDeleteRatio of
// the registry's instances (and more than the floor) is held until
// confirmed, until the timeout, or until the services are listed again.
func TestDeleteGuard(t *testing.T) {
	p := OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 10, DeleteGuardTimeout: 5 * time.Minute}
	for _, tc := range []struct {
		name    string
		policy  OutagePolicy
		keep    int // services the listing keeps of 30
		then    func(sy *Syncer, keys []string)
		want    int // instances served at the end
		guarded bool
	}{
		{name: "a catalog emptied is held", keep: 0, want: 30, guarded: true},
		{name: "two thirds gone is held", keep: 10, want: 30, guarded: true},
		{name: "a third gone applies", keep: 20, want: 20},
		{name: "ratio 1 turns the guard off", policy: OutagePolicy{MaxDeleteRatio: 1}, keep: 0, want: 0},
		{name: "below the floor applies", policy: OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 40}, keep: 0, want: 0},
		{name: "confirmed applies", keep: 5, want: 5, then: func(sy *Syncer, _ []string) {
			if n, err := sy.ConfirmDeletes("r"); n != 25 || err != nil {
				t.Errorf("ConfirmDeletes = %d, %v; want 25", n, err)
			}
		}},
		{name: "the timeout applies", keep: 5, want: 5, then: func(*Syncer, []string) { time.Sleep(6 * time.Minute) }},
		{name: "listed again releases", keep: 5, want: 30, then: func(sy *Syncer, keys []string) {
			list(sy, "r", registries.Scope{}, keys)
			time.Sleep(6 * time.Minute)
		}},
		{name: "services back one by one release", keep: 28, want: 30, then: func(sy *Syncer, keys []string) {
			// 2 of 30 gone is not held: build a held state instead.
			list(sy, "r", registries.Scope{}, nil)
			for i, k := range keys {
				sy.Snapshot(snap("r", k, instance(k+"-1", fmt.Sprintf("10.0.0.%d", i+1), 8080)))
			}
			time.Sleep(6 * time.Minute)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				policy := p
				if tc.policy != (OutagePolicy{}) {
					policy = tc.policy
				}
				sy, store := policySyncer(t, policy)
				keys := fill(sy, 30)
				list(sy, "r", registries.Scope{}, keys[:tc.keep])
				for _, k := range keys[tc.keep:] {
					sy.Snapshot(removed(k, false))
				}
				if tc.then != nil {
					tc.then(sy, keys)
				}
				synctest.Wait()
				if got := served(store); got != tc.want {
					t.Fatalf("%d instances served, want %d", got, tc.want)
				}
				st := sy.Status()[0]
				if (st.DeleteGuard != nil) != tc.guarded {
					t.Errorf("DeleteGuard = %+v, want engaged %v", st.DeleteGuard, tc.guarded)
				}
			})
		})
	}
}

// TestConfirmWithoutGuard: confirming a registry whose guard holds nothing,
// or an unknown one, is an error.
func TestConfirmWithoutGuard(t *testing.T) {
	sy, _ := policySyncer(t, DefaultOutagePolicy)
	if _, err := sy.ConfirmDeletes("r"); !errors.Is(err, ErrNothingHeld) {
		t.Errorf("ConfirmDeletes of a registry whose guard holds nothing: %v, want ErrNothingHeld", err)
	}
	if _, err := sy.ConfirmDeletes("nope"); !errors.Is(err, ErrUnknownRegistry) {
		t.Errorf("ConfirmDeletes of an unknown registry: %v, want ErrUnknownRegistry", err)
	}
}

// TestDeleteGuardStatusFollowsReturns: a held service read again leaves
// the guard's count at once, not only when the guard is released.
func TestDeleteGuardStatusFollowsReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sy, _ := policySyncer(t, OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 10, DeleteGuardTimeout: 5 * time.Minute})
		keys := fill(sy, 30)
		list(sy, "r", registries.Scope{}, keys[:5])
		if g := sy.Status()[0].DeleteGuard; g == nil || g.Services != 25 {
			t.Fatalf("DeleteGuard = %+v, want 25 services held", g)
		}
		sy.Snapshot(snap("r", keys[10], instance(keys[10]+"-1", "10.0.0.11", 8080)))
		if g := sy.Status()[0].DeleteGuard; g == nil || g.Services != 24 {
			t.Fatalf("DeleteGuard = %+v after one held service returned, want 24", g)
		}
	})
}

// TestListingBeforeSyncIsNotJudged: the first listing of a registry
// removes nothing the guard could hold.
func TestListingBeforeSyncIsNotJudged(t *testing.T) {
	sy, store := policySyncer(t, DefaultOutagePolicy)
	keys := []string{"a", "b"}
	list(sy, "r", registries.Scope{}, keys)
	for _, k := range keys {
		sy.Snapshot(snap("r", k, instance(k, "10.0.0.1", 80+uint32(len(k)))))
	}
	if got := served(store); got != 2 {
		t.Fatalf("%d served", got)
	}
	if slices.ContainsFunc(sy.Status(), func(s RegistryStatus) bool { return s.DeleteGuard != nil }) {
		t.Errorf("guard engaged")
	}
}

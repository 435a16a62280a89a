package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/nacos"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// writeCounter counts store writes by event, through a store handler.
type writeCounter struct {
	mu     sync.Mutex
	events []string
}

func (w *writeCounter) handler(_, cur model.Object, ev model.Event) {
	key := cur.Key()
	w.mu.Lock()
	w.events = append(w.events, fmt.Sprintf("%s %s %s", ev, key.Kind, key.Name))
	w.mu.Unlock()
}

func (w *writeCounter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.events
	w.events = nil
	return out
}

func newTestSyncer(t *testing.T, regs ...string) (*Syncer, *serviceentry.Store, *writeCounter) {
	t.Helper()
	return newTestSyncerPolicy(t, ConflictMerge, regs...)
}

func newTestSyncerPolicy(t *testing.T, conflict string, regs ...string) (*Syncer, *serviceentry.Store, *writeCounter) {
	t.Helper()
	var cfgs []Registry
	for _, name := range regs {
		tr, err := translate.New(translate.Options{Registry: name, HostTemplate: consul.HostTemplate, Namespace: "mesh"})
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, Registry{Name: name, Type: "consul", Translator: tr})
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	wc := &writeCounter{}
	store.RegisterEventHandler(model.KindServiceEntry, wc.handler)
	store.RegisterEventHandler(model.KindWorkloadEntry, wc.handler)
	runStore(t, store)
	return New(store, Config{Registries: cfgs, ConflictPolicy: conflict}), store, wc
}

func instance(id, addr string, port uint32) registries.Instance {
	return registries.Instance{ID: id, Address: addr, Port: port, Protocol: "grpc"}
}

func snap(reg, name string, ins ...registries.Instance) registries.Snapshot {
	return registries.Snapshot{Registry: reg, Service: registries.Service{Name: name, Instances: ins}}
}

// keysOf is the keys of the services called names (snap's services).
func keysOf(names []string) []registries.ServiceKey {
	keys := make([]registries.ServiceKey, len(names))
	for i, n := range names {
		keys[i] = registries.ServiceKey{Name: n}
	}
	return keys
}

func kinds(s *serviceentry.Store, kind model.Kind) []string {
	var out []string
	for _, c := range s.List(kind, "") {
		out = append(out, c.Name)
	}
	return out
}

func TestSyncerWritesOnlyWhatChanged(t *testing.T) {
	sy, store, wc := newTestSyncer(t, "dc1")
	sy.Snapshot(snap("dc1", "web", instance("n1/web-1", "10.0.0.1", 8080)))
	// Ready: from here the host's port is kept (rule 3).
	sy.Synced("dc1")
	flush(t, store)
	if got := wc.take(); len(got) != 2 || got[0] != "add WorkloadEntry "+translate.WorkloadEntryName("web.service.consul", "dc1", "n1/web-1") || got[1] != "add ServiceEntry web.service.consul" {
		t.Fatalf("first snapshot writes = %q, want the WorkloadEntry then the ServiceEntry", got)
	}

	sy.Snapshot(snap("dc1", "web", instance("n1/web-1", "10.0.0.1", 8080)))
	flush(t, store)
	if got := wc.take(); len(got) != 0 {
		t.Fatalf("an identical snapshot wrote %q, want nothing", got)
	}

	sy.Snapshot(snap("dc1", "web", instance("n1/web-1", "10.0.0.1", 8080), instance("n2/web-2", "10.0.0.2", 8080)))
	flush(t, store)
	if got := wc.take(); len(got) != 1 || got[0][:17] != "add WorkloadEntry" {
		t.Fatalf("a new instance wrote %q, want one WorkloadEntry add and an untouched ServiceEntry", got)
	}

	sy.Snapshot(registries.Snapshot{Registry: "dc1", Service: registries.Service{Name: "web"}, Err: errors.New("connection refused")})
	flush(t, store)
	if got := wc.take(); len(got) != 0 {
		t.Fatalf("a read error wrote %q, want last-known-good kept", got)
	}
	if st := sy.Status()[0]; st.Errors != 1 || st.LastError != "connection refused" || st.Instances != 2 {
		t.Fatalf("status = %+v", st)
	}

	sy.Snapshot(snap("dc1", "web"))
	flush(t, store)
	if got := wc.take(); len(got) != 2 || got[0][:6] != "delete" || got[1][:6] != "delete" {
		t.Fatalf("an authoritative empty listing wrote %q, want both WorkloadEntries deleted", got)
	}
	if se := store.Get(model.KindServiceEntry, "web.service.consul", "mesh"); se == nil || se.ServiceEntry().Ports[0].Number != 8080 {
		t.Fatal("the ServiceEntry and its port must stay while the service exists with no instances")
	}

	sy.Snapshot(registries.Snapshot{Registry: "dc1", Service: registries.Service{Name: "web"}, Removed: true})
	flush(t, store)
	if got := wc.take(); !slices.Equal(got, []string{"delete ServiceEntry web.service.consul"}) {
		t.Fatalf("removal wrote %q", got)
	}
}

func TestSyncerHostCollision(t *testing.T) {
	// Two registries whose services map to one host under conflictPolicy
	// first: the first registry in configuration order wins, whatever the
	// arrival order.
	sy, store, _ := newTestSyncerPolicy(t, ConflictFirst, "dc1", "dc2")
	before := testutil.ToFloat64(rejectedInstances.WithLabelValues("dc1", "host-collision"))
	sy.Snapshot(snap("dc2", "web", instance("b/1", "10.0.0.2", 8080)))
	sy.Snapshot(snap("dc1", "web", instance("a/1", "10.0.0.1", 8080)))
	flush(t, store)
	se := store.Get(model.KindServiceEntry, "web.service.consul", "mesh")
	if se == nil || se.Labels[model.LabelRegistry] != "dc1" {
		t.Fatalf("ServiceEntry = %+v, want it from dc1", se)
	}
	wes := store.List(model.KindWorkloadEntry, "")
	if len(wes) != 1 || wes[0].WorkloadEntry().Address != "10.0.0.1" {
		t.Fatalf("WorkloadEntries = %v, want only dc1's", kinds(store, model.KindWorkloadEntry))
	}
	if got := testutil.ToFloat64(rejectedInstances.WithLabelValues("dc2", "host-collision")); got < 1 {
		t.Fatalf("host-collision rejections for dc2 = %v, want ≥ 1", got)
	}
	if got := testutil.ToFloat64(rejectedInstances.WithLabelValues("dc1", "host-collision")); got != before {
		t.Fatal("the winner must not be counted as rejected")
	}

	// The winner leaves: the other claimant takes the host over.
	sy.Snapshot(registries.Snapshot{Registry: "dc1", Service: registries.Service{Name: "web"}, Removed: true})
	flush(t, store)
	se = store.Get(model.KindServiceEntry, "web.service.consul", "mesh")
	if se == nil || se.Labels[model.LabelRegistry] != "dc2" {
		t.Fatalf("after the winner left, ServiceEntry = %+v, want dc2's", se)
	}
	wes = store.List(model.KindWorkloadEntry, "")
	if len(wes) != 1 || wes[0].WorkloadEntry().Address != "10.0.0.2" {
		t.Fatalf("WorkloadEntries = %v, want only dc2's", kinds(store, model.KindWorkloadEntry))
	}
}

func TestSyncerPortsStick(t *testing.T) {
	sy, store, _ := newTestSyncer(t, "dc1")
	sy.Snapshot(snap("dc1", "web", instance("a", "10.0.0.1", 9090), instance("b", "10.0.0.2", 8080)))
	sy.Snapshot(snap("dc1", "web", instance("a", "10.0.0.1", 9090)))
	flush(t, store)
	se := store.Get(model.KindServiceEntry, "web.service.consul", "mesh").ServiceEntry()
	if se.Ports[0].Number != 8080 {
		t.Fatalf("port = %d, want 8080 kept after its instance left", se.Ports[0].Number)
	}
}

func TestSyncerReadiness(t *testing.T) {
	cases := map[string]struct {
		synced    []string
		timeout   time.Duration
		wantReady bool
	}{
		"ready once every registry synced":            {synced: []string{"a", "b"}, wantReady: true},
		"not ready while one registry has not synced": {synced: []string{"a"}},
		"ready after the sync timeout anyway":         {synced: []string{"a"}, timeout: time.Second, wantReady: true},
		"a registry syncing twice counts once":        {synced: []string{"a", "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, _ := translate.New(translate.Options{Registry: "a", HostTemplate: consul.HostTemplate, Namespace: "m"})
				sy := New(serviceentry.NewStore(nil, model.KindServiceEntry), Config{
					Registries: []Registry{{Name: "a", Translator: tr}, {Name: "b", Translator: tr}},
					Timeout:    tc.timeout,
				})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go sy.Run(ctx)
				for _, r := range tc.synced {
					sy.Synced(r)
				}
				time.Sleep(2 * time.Second) // fake time under synctest
				synctest.Wait()
				if sy.HasSynced() != tc.wantReady {
					t.Fatalf("HasSynced = %v, want %v", sy.HasSynced(), tc.wantReady)
				}
			})
		})
	}
}

// TestSyncerScopesServicesByNamespaceAndGroup: one name in two Nacos
// namespaces or groups is two services (registries.Service.Key): each keeps
// its own host, and removing one leaves the other.
func TestSyncerScopesServicesByNamespaceAndGroup(t *testing.T) {
	tr, err := translate.New(translate.Options{Registry: "nacos", HostTemplate: nacos.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	runStore(t, store)
	sy := New(store, Config{Registries: []Registry{{Name: "nacos", Type: "nacos", Translator: tr}}})
	scoped := func(ns, group string, removed bool, ins ...registries.Instance) registries.Snapshot {
		return registries.Snapshot{Registry: "nacos", Removed: removed,
			Service: registries.Service{Name: "echo", Namespace: ns, Group: group, Instances: ins}}
	}
	sy.Snapshot(scoped("public", "DEFAULT_GROUP", false, instance("a", "10.0.0.1", 8080)))
	sy.Snapshot(scoped("dev", "DEFAULT_GROUP", false, instance("b", "10.0.0.2", 8080)))
	sy.Snapshot(scoped("public", "ORDER_GROUP", false, instance("c", "10.0.0.3", 8080)))
	flush(t, store)
	want := []string{"echo.default-group.dev.nacos", "echo.default-group.public.nacos", "echo.order-group.public.nacos"}
	if got := kinds(store, model.KindServiceEntry); !slices.Equal(got, want) {
		t.Fatalf("ServiceEntries = %v, want %v", got, want)
	}
	sy.Snapshot(scoped("dev", "DEFAULT_GROUP", true))
	flush(t, store)
	want = []string{"echo.default-group.public.nacos", "echo.order-group.public.nacos"}
	if got := kinds(store, model.KindServiceEntry); !slices.Equal(got, want) {
		t.Fatalf("after removing dev's echo: ServiceEntries = %v, want %v", got, want)
	}
	if st := sy.Status()[0]; st.Services != 2 || st.Instances != 2 || st.ServedInstances != 2 {
		t.Fatalf("status = %+v, want 2 services, 2 instances, 2 served", st)
	}
}

// TestSyncerMergesHost: under conflictPolicy merge, one ServiceEntry (the
// first registry's) serves the instances of both registries, the later
// registry's translated against its ports; one registry's removal or
// outage leaves the other's; a protocol conflict rejects the later
// registry's instances.
func TestSyncerMergesHost(t *testing.T) {
	sy, store, _ := newTestSyncer(t, "dc1", "dc2")
	sy.Snapshot(snap("dc2", "web", instance("b/1", "10.0.0.2", 9090)))
	sy.Snapshot(snap("dc1", "web", instance("a/1", "10.0.0.1", 8080)))
	flush(t, store)
	ses := store.List(model.KindServiceEntry, "")
	if len(ses) != 1 || ses[0].Labels[model.LabelRegistry] != "dc1" || ses[0].ServiceEntry().Ports[0].Number != 8080 {
		t.Fatalf("ServiceEntries = %v, want one, dc1's, on 8080", kinds(store, model.KindServiceEntry))
	}
	byAddr := map[string]*model.Config{}
	for _, we := range store.List(model.KindWorkloadEntry, "") {
		byAddr[we.WorkloadEntry().Address] = we
	}
	if len(byAddr) != 2 || byAddr["10.0.0.2"].Labels[model.LabelRegistry] != "dc2" ||
		byAddr["10.0.0.2"].WorkloadEntry().Ports["grpc-8080"] != 9090 {
		t.Fatalf("WorkloadEntries %v: want dc1's and dc2's, dc2's mapping grpc-8080 to 9090", byAddr)
	}
	// dc2 is down: its instances stay; dc1 leaves: dc2's take the host over.
	failed := snap("dc2", "web")
	failed.Err = errors.New("down")
	sy.Snapshot(failed)
	sy.Snapshot(registries.Snapshot{Registry: "dc1", Service: registries.Service{Name: "web"}, Removed: true})
	flush(t, store)
	ses = store.List(model.KindServiceEntry, "")
	wes := store.List(model.KindWorkloadEntry, "")
	if len(ses) != 1 || ses[0].Labels[model.LabelRegistry] != "dc2" || len(wes) != 1 || wes[0].WorkloadEntry().Address != "10.0.0.2" {
		t.Fatalf("after dc1 left: ServiceEntries %v, WorkloadEntries %v", kinds(store, model.KindServiceEntry), kinds(store, model.KindWorkloadEntry))
	}
	if st := sy.Status(); st[0].ServedInstances != 0 || st[1].ServedInstances != 1 {
		t.Errorf("served instances %d, %d; want 0, 1", st[0].ServedInstances, st[1].ServedInstances)
	}

	// A protocol conflict: dc1 comes back over http.
	before := testutil.ToFloat64(rejectedInstances.WithLabelValues("dc2", "protocol-conflict"))
	http := instance("a/1", "10.0.0.1", 8080)
	http.Protocol = "http"
	sy.Snapshot(snap("dc1", "web", http))
	flush(t, store)
	wes = store.List(model.KindWorkloadEntry, "")
	if len(wes) != 1 || wes[0].WorkloadEntry().Address != "10.0.0.1" {
		t.Fatalf("with a protocol conflict: WorkloadEntries %v, want dc1's only", kinds(store, model.KindWorkloadEntry))
	}
	if got := testutil.ToFloat64(rejectedInstances.WithLabelValues("dc2", "protocol-conflict")); got != before+1 {
		t.Errorf("protocol-conflict rejections %v, want %v", got, before+1)
	}
}

// TestSyncerMergesInline: inline, the merged ServiceEntry lists both
// registries' endpoints.
func TestSyncerMergesInline(t *testing.T) {
	var cfgs []Registry
	for _, name := range []string{"dc1", "dc2"} {
		tr, err := translate.New(translate.Options{Registry: name, HostTemplate: consul.HostTemplate, Namespace: "mesh",
			Endpoints: translate.EndpointsInline})
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, Registry{Name: name, Type: "consul", Translator: tr})
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	sy := New(store, Config{Registries: cfgs})
	sy.Snapshot(snap("dc1", "web", instance("a/1", "10.0.0.1", 8080)))
	sy.Snapshot(snap("dc2", "web", instance("b/1", "10.0.0.2", 9090)))
	se := store.Get(model.KindServiceEntry, "web.service.consul", "mesh")
	if se == nil || len(se.ServiceEntry().Endpoints) != 2 || se.ServiceEntry().Endpoints[1].Ports["grpc-8080"] != 9090 {
		t.Fatalf("ServiceEntry %v: want both endpoints, dc2's mapped to 9090", se)
	}
	if se.ContentHash() != translate.ContentHash(se.Labels, nil, se.Spec) {
		t.Errorf("the merged ServiceEntry's hash is not its content's")
	}
}

func TestSyncerKeepsTheStoresObjects(t *testing.T) {
	// The Syncer's kept translation points at the store's objects, so an
	// object is held once; rewriting one of them (a change, a delete and
	// re-create by a collision) works and carries no stale version or
	// observation time.
	sy, store, wc := newTestSyncer(t, "dc1", "dc2")
	observed := time.Now()
	sy.Snapshot(registries.Snapshot{Registry: "dc1", Observed: observed, Service: registries.Service{Name: "web",
		Instances: []registries.Instance{instance("a/1", "10.0.0.1", 8080), instance("a/2", "10.0.0.2", 8080)}}})
	flush(t, store)
	st := sy.services[serviceID{registry: "dc1", key: registries.ServiceKey{Name: "web"}}]
	if st == nil {
		t.Fatal("no state for dc1/web")
	}
	objs := []model.Object{st.result.ServiceEntry}
	for _, we := range st.result.WorkloadEntries {
		objs = append(objs, we)
	}
	for _, obj := range objs {
		if key := obj.Key(); store.GetObject(key.Kind, key.Name, key.Namespace) != obj {
			t.Errorf("%s: the Syncer keeps its own copy, not the store's", key)
		}
	}
	wc.take()
	// Unchanged: nothing is written.
	sy.Snapshot(snap("dc1", "web", instance("a/1", "10.0.0.1", 8080), instance("a/2", "10.0.0.2", 8080)))
	flush(t, store)
	if got := wc.take(); len(got) != 0 {
		t.Fatalf("an unchanged listing wrote %v", got)
	}
	// One instance moves: its WorkloadEntry is updated, from an object the
	// store handed out, without a version conflict.
	sy.Snapshot(snap("dc1", "web", instance("a/1", "10.0.0.1", 8080), instance("a/2", "10.0.0.3", 8080)))
	flush(t, store)
	if got := wc.take(); len(got) != 1 {
		t.Fatalf("writes %v, want one WorkloadEntry update", got)
	}
	for _, cfg := range store.List(model.KindWorkloadEntry, "") {
		if cfg.Observed != nil && !cfg.Observed.Equal(observed) {
			t.Errorf("%s carries observation %v", cfg.Name, cfg.Observed)
		}
	}
	if n := len(store.List(model.KindWorkloadEntry, "")); n != 2 {
		t.Fatalf("%d WorkloadEntries, want 2", n)
	}
}

// TestListingEndsARegistryWideError: a failed listing (a registry-wide
// read error, of a scope) makes the registry stale; the next complete
// listing of that scope, or of the whole registry, ends it even when no
// service's read follows (nothing changed); another scope's does not.
func TestListingEndsARegistryWideError(t *testing.T) {
	a, b := registries.ScopeOf("public", "DEFAULT_GROUP"), registries.ScopeOf("public", "orders")
	whole := registries.Scope{}
	for _, tc := range []struct {
		failed, listed registries.Scope
		wantStale      bool
	}{
		{failed: whole, listed: whole, wantStale: false},
		{failed: a, listed: a, wantStale: false},
		{failed: a, listed: whole, wantStale: false},
		{failed: a, listed: b, wantStale: true},
		{failed: whole, listed: a, wantStale: true},
	} {
		t.Run(fmt.Sprintf("failed %q listed %q", tc.failed.String(), tc.listed.String()), func(t *testing.T) {
			sy, _, _ := newTestSyncer(t, "r")
			list(sy, "r", registries.Scope{}, []string{"web"})
			sy.Snapshot(snap("r", "web", instance("n1/web", "10.0.0.1", 8080)))
			sy.Synced("r")
			sy.Snapshot(registries.Snapshot{Registry: "r", Err: errors.New("list services: 429"), Scope: tc.failed, Observed: time.Now()})
			if st := sy.Status()[0]; !st.Stale {
				t.Fatalf("after a failed listing: %+v, want stale", st)
			}
			list(sy, "r", tc.listed, []string{"web"})
			if st := sy.Status()[0]; st.Stale != tc.wantStale {
				t.Errorf("stale %v, want %v", st.Stale, tc.wantStale)
			}
		})
	}
}

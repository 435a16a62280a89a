package serviceentry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

func seConfig(name string, mut ...func(*networking.ServiceEntry)) *model.Config {
	spec := &networking.ServiceEntry{
		Hosts:            []string{name},
		Ports:            []*networking.ServicePort{{Name: "grpc-8080", Number: 8080, Protocol: "GRPC"}},
		Location:         networking.ServiceEntry_MESH_INTERNAL,
		Resolution:       networking.ServiceEntry_STATIC,
		WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{model.LabelService: name}},
	}
	for _, m := range mut {
		m(spec)
	}
	return &model.Config{Meta: model.Meta{Kind: model.KindServiceEntry, Name: name, Namespace: "ns",
		Labels: map[string]string{model.LabelRegistry: "r"}}, Spec: spec}
}

func weConfig(name, service, addr string) *model.Config {
	return &model.Config{
		Meta: model.Meta{Kind: model.KindWorkloadEntry, Name: name, Namespace: "ns",
			Labels: map[string]string{model.LabelService: service}},
		Spec: &networking.WorkloadEntry{Address: addr, Labels: map[string]string{model.LabelService: service}},
	}
}

func runStore(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func flush(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStoreCRUD(t *testing.T) {
	s := NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	a := seConfig("a.example")
	rv, err := s.Create(a)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		op   func() error
		want error
	}{
		"create of an existing key fails": {func() error { _, err := s.Create(seConfig("a.example")); return err }, ErrAlreadyExists},
		"update of a missing key fails":   {func() error { _, err := s.Update(seConfig("b.example")); return err }, ErrNotFound},
		"update with a stale version fails": {func() error {
			c := seConfig("a.example")
			c.ResourceVersion = 999
			_, err := s.Update(c)
			return err
		}, ErrConflict},
		"delete with a stale version fails": {func() error { return s.Delete(model.KindServiceEntry, "a.example", "ns", 999) }, ErrConflict},
		"delete of a missing key fails":     {func() error { return s.Delete(model.KindServiceEntry, "zz", "ns", 0) }, ErrNotFound},
		"an unknown kind fails":             {func() error { _, err := s.Create(&model.Config{Meta: model.Meta{Kind: "Gateway"}}); return err }, ErrUnknownKind},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("update with the current version sets a new one", func(t *testing.T) {
		c := seConfig("a.example")
		c.ResourceVersion = rv
		rv2, err := s.Update(c)
		if err != nil || rv2 == rv {
			t.Fatalf("Update = %d, %v; want a new version", rv2, err)
		}
		if got := s.Get(model.KindServiceEntry, "a.example", "ns"); got.ResourceVersion != rv2 {
			t.Fatalf("Get version = %d, want %d", got.ResourceVersion, rv2)
		}
	})
	t.Run("list is sorted and filtered by namespace", func(t *testing.T) {
		if _, err := s.Create(seConfig("0.example")); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range s.List(model.KindServiceEntry, "ns") {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{"0.example", "a.example"}) {
			t.Fatalf("List = %v", names)
		}
		if got := s.List(model.KindServiceEntry, "other"); len(got) != 0 {
			t.Fatalf("List(other) = %v", got)
		}
	})
}

func TestStoreHandlersRunInOrderOnOneQueue(t *testing.T) {
	s := NewStore(nil, model.KindServiceEntry)
	var mu sync.Mutex
	var got []string
	for i := range 2 {
		s.RegisterEventHandler(model.KindServiceEntry, func(oldObj, curObj model.Object, ev model.Event) {
			mu.Lock()
			defer mu.Unlock()
			cur := curObj.(*model.Config)
			oldRV := "-"
			if oldObj != nil {
				oldRV = strconv.FormatUint(oldObj.Version(), 10)
			}
			// The store is at least as new as the event: the object is
			// there at the event's version or later, or already deleted.
			if stored := s.Get(model.KindServiceEntry, cur.Name, cur.Namespace); stored != nil {
				if sv, cv := stored.ResourceVersion, cur.ResourceVersion; sv < cv {
					t.Errorf("handler saw version %d of %s while the store had %d", cv, cur.Name, sv)
				}
			}
			got = append(got, fmt.Sprintf("h%d %s %s %s->%d", i, ev, cur.Name, oldRV, cur.ResourceVersion))
		})
	}
	runStore(t, s)
	rv1, _ := s.Create(seConfig("a"))
	c := seConfig("a")
	c.ResourceVersion = rv1
	rv2, _ := s.Update(c)
	if err := s.Delete(model.KindServiceEntry, "a", "ns", rv2); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	want := []string{
		"h0 add a -->1", "h1 add a -->1",
		"h0 update a 1->2", "h1 update a 1->2",
		"h0 delete a -->2", "h1 delete a -->2",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("handler calls:\n got  %q\n want %q", got, want)
	}
}

func TestStoreWritesObserved(t *testing.T) {
	// CreateObserved and UpdateObserved store the observation time given,
	// not cfg's, check no resource version and leave cfg as it was.
	s := NewStore(nil, model.KindServiceEntry)
	at := time.Unix(1700000000, 0)
	later, stale := at.Add(time.Second), at.Add(-time.Hour)
	cfg := seConfig("a")
	cfg.ResourceVersion, cfg.Observed = 999, &stale
	for _, step := range []struct {
		name  string
		write func(model.Object, *time.Time) (uint64, error)
		at    *time.Time
	}{
		{"create", s.CreateObserved, &at},
		{"update", s.UpdateObserved, &later},
		{"update without observation", s.UpdateObserved, nil},
	} {
		rv, err := step.write(cfg, step.at)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := s.Get(model.KindServiceEntry, "a", "ns")
		if got.ResourceVersion != rv || got.Observed != step.at {
			t.Errorf("%s: stored version %d observed %v, want %d and %v", step.name, got.ResourceVersion, got.Observed, rv, step.at)
		}
		if cfg.ResourceVersion != 999 || cfg.Observed != &stale {
			t.Fatalf("%s modified its argument", step.name)
		}
	}
	if _, err := s.Update(cfg); !errors.Is(err, ErrConflict) {
		t.Errorf("Update with a stale version: %v, want ErrConflict", err)
	}
}

// TestStoreHoldsWorkloadEntriesAsRecords: WorkloadEntries written as
// records or as Configs are held as records, found by name, listed in name
// order, materialised as the Configs they stand for, and replaced and
// deleted like any object.
func TestStoreHoldsWorkloadEntriesAsRecords(t *testing.T) {
	s := NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	group := &model.WorkloadGroup{Namespace: "ns", Host: "a.example", Labels: map[string]string{model.LabelManagedBy: model.ManagedByValue},
		Selection: "a.example"}
	record := func(id byte, address string) *model.WorkloadEntry {
		return model.NewWorkloadEntry(group, [5]byte{id}, &networking.WorkloadEntry{Address: address}, nil, model.SumHash([]byte(address)))
	}
	a, b := record(0xb0, "10.0.0.1"), record(0x0a, "10.0.0.2")
	other := &model.Config{Meta: model.Meta{Kind: model.KindWorkloadEntry, Namespace: "ns", Name: "a.example-manual"},
		Spec: &networking.WorkloadEntry{Address: "10.0.0.3"}}
	for _, obj := range []model.Object{a, b, other} {
		if _, err := s.CreateObserved(obj, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(other); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("second create of %s: %v, want ErrAlreadyExists", other.Name, err)
	}
	stored, ok := s.GetObject(model.KindWorkloadEntry, "a.example-b000000000", "ns").(*model.WorkloadEntry)
	if !ok || stored.Address != "10.0.0.1" || stored.Version() == 0 {
		t.Fatalf("GetObject = %v, want a's record, stamped", stored)
	}
	if s.Stored(a) != stored {
		t.Error("Stored(a) is not the record GetObject returns")
	}
	var names []string
	for _, c := range s.List(model.KindWorkloadEntry, "ns") {
		names = append(names, c.Name)
		if c.Kind != model.KindWorkloadEntry || c.WorkloadEntry() == nil {
			t.Errorf("List materialised %v", c)
		}
	}
	if want := []string{"a.example-0a00000000", "a.example-b000000000", "a.example-manual"}; !slices.Equal(names, want) {
		t.Errorf("List = %v, want %v", names, want)
	}
	if got := s.Get(model.KindWorkloadEntry, "a.example-b000000000", "ns"); got.Labels[model.LabelService] != "a.example" ||
		got.WorkloadEntry().GetLabels()[model.LabelService] != "a.example" {
		t.Errorf("Get = %v, want the selection label in metadata and spec", got)
	}
	moved := record(0xb0, "10.0.0.9")
	if _, err := s.UpdateObserved(moved, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.Get(model.KindWorkloadEntry, "a.example-b000000000", "ns"); got.WorkloadEntry().GetAddress() != "10.0.0.9" {
		t.Errorf("after the update: %v", got)
	}
	for _, name := range []string{"a.example-b000000000", "a.example-manual"} {
		if err := s.Delete(model.KindWorkloadEntry, name, "ns", 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.List(model.KindWorkloadEntry, ""); len(got) != 1 || got[0].Name != "a.example-0a00000000" {
		t.Errorf("after the deletes: %v", got)
	}
}

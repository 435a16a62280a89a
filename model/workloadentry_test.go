package model

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire/wiretest"
)

// TestWorkloadEntrySize: the store holds one WorkloadEntry per instance;
// 112 bytes is its size class (README's P1 per-instance budget).
func TestWorkloadEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(WorkloadEntry{}); got > 112 {
		t.Errorf("unsafe.Sizeof(WorkloadEntry{}) = %d, want at most 112", got)
	}
}

func TestWorkloadEntryRoundTrip(t *testing.T) {
	observed := time.Unix(1, 0)
	group := &WorkloadGroup{Namespace: "mesh", Host: "a.local", Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelService: "a.local"}, Selection: "a.local"}
	spec := &networking.WorkloadEntry{Address: "10.0.0.1", Ports: map[string]uint32{"grpc-80": 8080}, Labels: map[string]string{"version": "v1", LabelService: "a.local"},
		Network: "n1", Locality: "r/z", Weight: 7, ServiceAccount: "sa"}
	w := NewWorkloadEntry(group, [5]byte{0x3c, 0x5b, 0x21, 0xf0, 0x07}, spec, map[string]string{"version": "v1"}, SumHash([]byte("x")))
	stored := w.Stamped(9, &observed).(*WorkloadEntry)
	want := &Config{Meta: Meta{Kind: KindWorkloadEntry, Name: "a.local-3c5b21f007", Namespace: "mesh", Labels: group.Labels,
		Hash: SumHash([]byte("x")), ResourceVersion: 9, Observed: &observed}, Spec: spec}
	if diff := cmp.Diff(want, stored.AsConfig(), protocmp.Transform()); diff != "" {
		t.Errorf("AsConfig (-want +got):\n%s", diff)
	}
	if !w.SameSpec(spec) {
		t.Error("SameSpec of its own spec is false")
	}
	for name, edit := range map[string]func(*networking.WorkloadEntry){
		"address": func(s *networking.WorkloadEntry) { s.Address = "10.0.0.2" },
		"a label": func(s *networking.WorkloadEntry) {
			s.Labels = map[string]string{"version": "v2", LabelService: "a.local"}
		},
		"no selection":    func(s *networking.WorkloadEntry) { s.Labels = map[string]string{"version": "v1", "x": "y"} },
		"ports":           func(s *networking.WorkloadEntry) { s.Ports = nil },
		"weight":          func(s *networking.WorkloadEntry) { s.Weight = 1 },
		"locality":        func(s *networking.WorkloadEntry) { s.Locality = "" },
		"network":         func(s *networking.WorkloadEntry) { s.Network = "" },
		"service account": func(s *networking.WorkloadEntry) { s.ServiceAccount = "" },
	} {
		other := w.Spec()
		edit(other)
		if w.SameSpec(other) {
			t.Errorf("SameSpec is true with another %s", name)
		}
	}

	cfg := &Config{Meta: Meta{Kind: KindWorkloadEntry, Name: "any name", Namespace: "ns", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{"c": "d"}, Hash: SumHash([]byte("y")), ResourceVersion: 3}, Spec: spec}
	if diff := cmp.Diff(cfg, WorkloadEntryOf(cfg).AsConfig(), protocmp.Transform()); diff != "" {
		t.Errorf("WorkloadEntryOf then AsConfig (-want +got):\n%s", diff)
	}
}

func TestWorkloadEntryNames(t *testing.T) {
	if host, id, ok := SplitWorkloadEntryName("a.local-3c5b21f007"); !ok || host != "a.local" || id != [5]byte{0x3c, 0x5b, 0x21, 0xf0, 0x07} {
		t.Errorf("SplitWorkloadEntryName = %q %x %v", host, id, ok)
	}
	for _, name := range []string{"", "-3c5b21f007", "a-3C5B21F007", "a.local3c5b21f007", "a-3c5b21f00", "a-3c5b21f00g"} {
		if _, _, ok := SplitWorkloadEntryName(name); ok {
			t.Errorf("SplitWorkloadEntryName(%q) ok", name)
		}
	}
	// CompareName and CompareNameTo order as the names do, whatever their
	// form and hosts.
	r := rand.New(rand.NewPCG(1, 2))
	hosts := []string{"a", "a-b", "a.local", "a-f", "b", "a-3c"}
	entry := func() *WorkloadEntry {
		if r.IntN(4) == 0 {
			return WorkloadEntryOf(&Config{Meta: Meta{Kind: KindWorkloadEntry, Name: hosts[r.IntN(len(hosts))] + fmt.Sprint("-", r.IntN(3))}})
		}
		var id [5]byte
		for i := range id {
			id[i] = byte(r.IntN(3) * 0x77)
		}
		return NewWorkloadEntry(&WorkloadGroup{Host: hosts[r.IntN(len(hosts))]}, id, &networking.WorkloadEntry{}, nil, Hash{})
	}
	for range 2000 {
		a, b := entry(), entry()
		if got, want := CompareName(a, b), strings.Compare(a.Name(), b.Name()); got != want {
			t.Fatalf("CompareName(%q, %q) = %d, want %d", a.Name(), b.Name(), got, want)
		}
		if got, want := a.CompareNameTo(b.Name()), strings.Compare(a.Name(), b.Name()); got != want {
			t.Fatalf("CompareNameTo(%q, %q) = %d, want %d", a.Name(), b.Name(), got, want)
		}
	}
}

// workloadEntryNotCarried names the fields of istio.io/api's WorkloadEntry
// that WorkloadEntry deliberately does not carry, each with the reason
// (none: it carries every field of istio.io/api v1.31).
var workloadEntryNotCarried = map[protoreflect.Name]string{}

// TestWorkloadEntryCarriesEveryField holds WorkloadEntry against the
// descriptor of the linked istio.io/api's WorkloadEntry (networking/v1alpha3
// workload_entry.proto), as internal/wire's TestEncodersKnowEveryField holds
// its encoders: every field is carried, or named in workloadEntryNotCarried
// with the reason. WorkloadEntry is what the store holds of every
// WorkloadEntry, and what Kubernetes and MCP are sent is its Spec: a field
// NewWorkloadEntry left out would be dropped from both silently, so a field
// a newer istio.io/api adds fails here until it is carried (NewWorkloadEntry,
// Spec, SameSpec) or listed. Carried means: a value set in the field (alone,
// and with every other field set) comes back from Spec, through
// NewWorkloadEntry with and without a selection label and through
// WorkloadEntryOf; and SameSpec tells apart two specs that differ in that
// field only. The values are set by walking the descriptor (wiretest), so
// the test knows no field by name.
func TestWorkloadEntryCarriesEveryField(t *testing.T) {
	fields := (&networking.WorkloadEntry{}).ProtoReflect().Descriptor().Fields()
	for name := range workloadEntryNotCarried {
		if fields.ByName(name) == nil {
			t.Errorf("workloadEntryNotCarried names %q, which istio.io/api's WorkloadEntry no longer has", name)
		}
	}
	// carried is spec less the fields WorkloadEntry does not carry.
	carried := func(spec *networking.WorkloadEntry) *networking.WorkloadEntry {
		out := proto.CloneOf(spec)
		for name := range workloadEntryNotCarried {
			if fd := fields.ByName(name); fd != nil {
				out.ProtoReflect().Clear(fd)
			}
		}
		return out
	}
	newEntry := func(spec *networking.WorkloadEntry) *WorkloadEntry {
		return NewWorkloadEntry(&WorkloadGroup{Namespace: "mesh", Host: "a.local"}, [5]byte{1}, spec, spec.Labels, Hash{})
	}
	// roundTrips reports what of spec does not come back from Spec.
	roundTrips := func(spec *networking.WorkloadEntry) string {
		want := carried(spec)
		if got := newEntry(spec).Spec(); !proto.Equal(got, want) {
			return fmt.Sprintf("NewWorkloadEntry then Spec gives %v", got)
		}
		cfg := &Config{Meta: Meta{Kind: KindWorkloadEntry, Name: "any name", Namespace: "ns"}, Spec: spec}
		if got := WorkloadEntryOf(cfg).AsConfig().Spec; !proto.Equal(got, want) {
			return fmt.Sprintf("WorkloadEntryOf then AsConfig gives %v", got)
		}
		// With the group's selection label: Labels are the spec's less it.
		selected := proto.CloneOf(spec)
		selected.Labels = maps.Clone(spec.Labels)
		if selected.Labels == nil {
			selected.Labels = map[string]string{}
		}
		selected.Labels[LabelService] = "a.local"
		labels := maps.Clone(spec.Labels)
		delete(labels, LabelService)
		group := &WorkloadGroup{Namespace: "mesh", Host: "a.local", Selection: "a.local"}
		if got, want := NewWorkloadEntry(group, [5]byte{1}, selected, labels, Hash{}).Spec(), carried(selected); !proto.Equal(got, want) {
			return fmt.Sprintf("NewWorkloadEntry with a selection label then Spec gives %v, want %v", got, want)
		}
		return ""
	}

	full := &networking.WorkloadEntry{}
	wiretest.Fill(full.ProtoReflect(), 1)
	if diff := roundTrips(full); diff != "" {
		t.Errorf("every field set, %v: %s", full, diff)
	}
	w := newEntry(full)
	if !w.SameSpec(full) {
		t.Error("SameSpec of its own spec, every field set, is false")
	}
	const fix = "carry it (NewWorkloadEntry, Spec and SameSpec in workloadentry.go) or name it in workloadEntryNotCarried with the reason"
	for i := range fields.Len() {
		fd := fields.Get(i)
		if _, ok := workloadEntryNotCarried[fd.Name()]; ok {
			continue
		}
		one := &networking.WorkloadEntry{}
		wiretest.Set(one.ProtoReflect(), fd, 1)
		if diff := roundTrips(one); diff != "" {
			t.Errorf("WorkloadEntry drops %s (%v): %s; %s", fd.Name(), one, diff, fix)
		}
		if !newEntry(one).SameSpec(one) {
			t.Errorf("SameSpec of its own spec, %s set, is false", fd.Name())
		}
		other := proto.CloneOf(full)
		wiretest.Set(other.ProtoReflect(), fd, 2)
		changed := !proto.Equal(other, full) && w.SameSpec(other)
		other.ProtoReflect().Clear(fd)
		if changed || w.SameSpec(other) {
			t.Errorf("SameSpec does not tell apart two specs that differ in %s only: %s", fd.Name(), fix)
		}
	}
}

package registries

import (
	"slices"
	"testing"
)

func TestCompact(t *testing.T) {
	labels := func() map[string]string { return map[string]string{"version": "v1", "env": "prod"} }
	one := labels()
	for _, tc := range []struct {
		name      string
		in        []Instance
		copied    bool
		sharedIdx [][2]int // pairs of instances that must share a map afterwards
	}{
		{name: "empty", in: nil},
		{name: "no labels", in: []Instance{{ID: "a"}, {ID: "b"}}},
		{name: "distinct labels", in: []Instance{{ID: "a", Labels: map[string]string{"k": "1"}}, {ID: "b", Labels: map[string]string{"k": "2"}}}},
		{name: "already shared", in: []Instance{{ID: "a", Labels: one}, {ID: "b", Labels: one}}, sharedIdx: [][2]int{{0, 1}}},
		{name: "equal maps", in: []Instance{{ID: "a", Labels: labels()}, {ID: "b", Labels: labels()}, {ID: "c", Labels: labels()}},
			copied: true, sharedIdx: [][2]int{{0, 1}, {1, 2}}},
		{name: "runs", in: []Instance{{ID: "a", Labels: labels()}, {ID: "b", Labels: map[string]string{"k": "x"}}, {ID: "c", Labels: map[string]string{"k": "x"}}},
			copied: true, sharedIdx: [][2]int{{1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.in)
			out := Compact(tc.in)
			if got := len(out) > 0 && &out[0] != &tc.in[0]; got != tc.copied {
				t.Fatalf("copied = %v, want %v", got, tc.copied)
			}
			if len(out) != len(tc.in) {
				t.Fatalf("len = %d, want %d", len(out), len(tc.in))
			}
			for i := range out {
				if !equalInstance(out[i], before[i]) {
					t.Errorf("instance %d = %+v, want %+v", i, out[i], before[i])
				}
				if !SameLabels(tc.in[i].Labels, before[i].Labels) {
					t.Errorf("instance %d of the input was changed", i)
				}
			}
			for _, p := range tc.sharedIdx {
				if !SameLabels(out[p[0]].Labels, out[p[1]].Labels) {
					t.Errorf("instances %d and %d do not share their labels", p[0], p[1])
				}
			}
		})
	}
}

func equalInstance(a, b Instance) bool {
	return a.ID == b.ID && a.Address == b.Address && a.Locality == b.Locality && a.Protocol == b.Protocol &&
		len(a.Labels) == len(b.Labels) && func() bool {
		for k, v := range a.Labels {
			if b.Labels[k] != v {
				return false
			}
		}
		return true
	}()
}

func BenchmarkCompact(b *testing.B) {
	in := make([]Instance, 10)
	for i := range in {
		in[i] = Instance{ID: "x", Locality: "dc1/zone-a", Protocol: "grpc", Labels: map[string]string{"version": "v1", "env": "prod"}}
	}
	b.ReportAllocs()
	for b.Loop() {
		Compact(in)
	}
}

// TestCompactSharesAcrossServices: the listings of two services whose
// instances carry equal labels share one map; a label set seen for the
// first time stays the instance's own map.
func TestCompactSharesAcrossServices(t *testing.T) {
	labels := func() map[string]string { return map[string]string{"shared-across": "services", "x": "1"} }
	first := Compact([]Instance{{ID: "a", Labels: labels()}})
	second := Compact([]Instance{{ID: "b", Labels: labels()}, {ID: "c", Labels: labels()}})
	if !SameLabels(first[0].Labels, second[0].Labels) || !SameLabels(second[0].Labels, second[1].Labels) {
		t.Error("equal label sets of two services do not share one map")
	}
	own := map[string]string{"seen": "once"}
	if out := Compact([]Instance{{ID: "d", Labels: own}}); !SameLabels(out[0].Labels, own) {
		t.Error("a label set seen for the first time was replaced")
	}
}

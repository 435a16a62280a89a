package translate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/registries"
)

// TestTranslateReusing pins the incremental translation: the output of
// TranslateReusing equals Translate's, and the WorkloadEntries of unchanged
// instances are the previous objects themselves.
func TestTranslateReusing(t *testing.T) {
	changeFirst := func(svc registries.Service) registries.Service {
		svc.Instances = append([]registries.Instance(nil), svc.Instances...)
		svc.Instances[0].Address = "10.9.9.9"
		return svc
	}
	tests := map[string]struct {
		opts      Options
		change    func(registries.Service) registries.Service
		wantSame  int // WorkloadEntries that must be the previous objects
		wantTotal int
	}{
		"unchanged service returns every previous WorkloadEntry": {
			change: func(s registries.Service) registries.Service { return s }, wantSame: 10, wantTotal: 10,
		},
		"one changed instance gets a new WorkloadEntry, the rest are reused": {
			change: changeFirst, wantSame: 9, wantTotal: 10,
		},
		"a changed label is a changed spec": {
			change: func(s registries.Service) registries.Service {
				s.Instances = append([]registries.Instance(nil), s.Instances...)
				s.Instances[3].Labels = map[string]string{"version": "v9"}
				return s
			},
			wantSame: 9, wantTotal: 10,
		},
		"a removed instance drops its WorkloadEntry": {
			change:   func(s registries.Service) registries.Service { s.Instances = s.Instances[1:]; return s },
			wantSame: 9, wantTotal: 9,
		},
		"inline mode reuses nothing and still equals Translate": {
			opts: Options{Endpoints: EndpointsInline}, change: changeFirst,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := mustNew(t, tc.opts)
			svc := benchService(10)
			first := mustTranslate(t, tr, svc, Sticky{})
			next := tc.change(svc)
			got, err := tr.TranslateReusing(next, first.Sticky, first)
			if err != nil {
				t.Fatal(err)
			}
			want := mustTranslate(t, tr, next, first.Sticky)
			if diff := cmp.Diff(want, got, resultOptions); diff != "" {
				t.Fatalf("TranslateReusing differs from Translate (-want +got):\n%s", diff)
			}
			prev := make(map[any]bool)
			for _, we := range first.WorkloadEntries {
				prev[we] = true
			}
			same := 0
			for _, we := range got.WorkloadEntries {
				if prev[we] {
					same++
				}
			}
			if same != tc.wantSame || len(got.WorkloadEntries) != tc.wantTotal {
				t.Fatalf("got %d WorkloadEntries, %d reused; want %d, %d reused", len(got.WorkloadEntries), same, tc.wantTotal, tc.wantSame)
			}
		})
	}
}

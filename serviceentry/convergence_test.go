package serviceentry

import (
	"testing"
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

func observedAt(cfg *model.Config, at time.Time) *model.Config {
	cfg.Observed = &at
	return cfg
}

// TestPushesStartAtTheObservation checks that every push a store event
// causes starts at the observation the written object carries (the
// registry's, set by the sync step), and at the controller's clock for a
// write no observation caused.
func TestPushesStartAtTheObservation(t *testing.T) {
	obs := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := obs.Add(time.Hour)
	type write func(t *testing.T, s *Store)
	tests := map[string]struct {
		before []write // not recorded
		write  write
		want   []string
		start  time.Time
	}{
		"a new entry's full push": {
			write: func(t *testing.T, s *Store) { mustCreate(t, s, observedAt(seConfig("a.example"), obs)) },
			want:  []string{"svc a.example.ns add", "edscache a.example.ns 0", "full a.example.ns service"}, start: obs,
		},
		"a workload's EDS push": {
			before: []write{func(t *testing.T, s *Store) { mustCreate(t, s, seConfig("a.example")) }},
			write: func(t *testing.T, s *Store) {
				mustCreate(t, s, observedAt(weConfig("a-1", "a.example", "10.0.0.1"), obs))
			},
			want: []string{"eds a.example.ns 1"}, start: obs,
		},
		"an entry update that pushes EDS": {
			before: []write{func(t *testing.T, s *Store) { mustCreate(t, s, seConfig("a.example")) }},
			write: func(t *testing.T, s *Store) {
				se := observedAt(seConfig("a.example"), obs)
				se.Annotations = map[string]string{"touched": "yes"}
				mustUpdate(t, s, se)
			},
			want: []string{"eds a.example.ns 0"}, start: obs,
		},
		"an entry update's full push (a port changed)": {
			before: []write{func(t *testing.T, s *Store) { mustCreate(t, s, seConfig("d.example")) }},
			write: func(t *testing.T, s *Store) {
				mustUpdate(t, s, observedAt(seConfig("d.example", func(se *networking.ServiceEntry) { se.Ports[0].Number = 9090 }), obs))
			},
			want: []string{"svc d.example.ns update", "edscache d.example.ns 0", "full d.example.ns service"}, start: obs,
		},
		"a workload's deletion, observed": {
			before: []write{
				func(t *testing.T, s *Store) { mustCreate(t, s, seConfig("a.example")) },
				func(t *testing.T, s *Store) {
					mustCreate(t, s, observedAt(weConfig("a-1", "a.example", "10.0.0.1"), obs.Add(-time.Minute)))
				},
			},
			write: func(t *testing.T, s *Store) {
				if err := s.DeleteObserved(model.KindWorkloadEntry, "a-1", "ns", 0, &obs); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"eds a.example.ns 0"}, start: obs,
		},
		"a deletion no observation caused starts now, not at the object's write": {
			before: []write{
				func(t *testing.T, s *Store) { mustCreate(t, s, seConfig("a.example")) },
				func(t *testing.T, s *Store) {
					mustCreate(t, s, observedAt(weConfig("a-1", "a.example", "10.0.0.1"), obs))
				},
			},
			write: func(t *testing.T, s *Store) {
				if err := s.Delete(model.KindWorkloadEntry, "a-1", "ns", 0); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"eds a.example.ns 0"}, start: now,
		},
		"a write no observation caused starts now": {
			write: func(t *testing.T, s *Store) { mustCreate(t, s, seConfig("a.example")) },
			want:  []string{"svc a.example.ns add", "edscache a.example.ns 0", "full a.example.ns service"}, start: now,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, c, rec := newTestController(t)
			c.now = func() time.Time { return now }
			for _, w := range tc.before {
				w(t, s)
			}
			flush(t, s)
			rec.take()
			rec.takeStarts()
			tc.write(t, s)
			flush(t, s)
			rec.strictMatch(t, tc.want...)
			starts := rec.takeStarts()
			if len(starts) == 0 {
				t.Fatal("no push requested")
			}
			for _, got := range starts {
				if !got.Equal(tc.start) {
					t.Errorf("push started at %v, want %v", got, tc.start)
				}
			}
		})
	}
}

// TestDeleteCarriesItsObservation: handlers get the deleted object with
// the deletion's observation, never the one of the object's last write.
func TestDeleteCarriesItsObservation(t *testing.T) {
	s := NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	var got []time.Time
	s.RegisterEventHandler(model.KindServiceEntry, func(_, cur model.Object, ev model.Event) {
		if ev == model.EventDelete {
			var at time.Time
			if obs := cur.ObservedAt(); obs != nil {
				at = *obs
			}
			got = append(got, at)
		}
	})
	runStore(t, s)
	written, deleted := time.Unix(100, 0), time.Unix(200, 0)
	mustCreate(t, s, observedAt(seConfig("a.example"), written))
	if err := s.DeleteObserved(model.KindServiceEntry, "a.example", "ns", 0, &deleted); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, observedAt(seConfig("a.example"), written))
	if err := s.Delete(model.KindServiceEntry, "a.example", "ns", 0); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	if len(got) != 2 || !got[0].Equal(deleted) || !got[1].IsZero() {
		t.Errorf("deletions carried %v, want [%v, zero]", got, deleted)
	}
}

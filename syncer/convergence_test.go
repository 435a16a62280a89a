package syncer

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// storeStageSamples is the sample count of
// meshbridge_convergence_seconds{stage="store"}.
func storeStageSamples(t *testing.T) uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(serviceentry.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == serviceentry.StageStore {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// observedWrites records, through a store handler, each write's event,
// kind, name and observation time.
type observedWrites struct {
	mu     sync.Mutex
	writes []string
}

func (o *observedWrites) handler(_, cur model.Object, ev model.Event) {
	key := cur.Key()
	o.mu.Lock()
	o.writes = append(o.writes, fmt.Sprintf("%s %s %s @%s", ev, key.Kind, key.Name, observedUnix(cur.AsConfig())))
	o.mu.Unlock()
}

// observedUnix renders cfg's observation time in Unix seconds, "none" when
// it carries none.
func observedUnix(cfg *model.Config) string {
	if cfg.Observed == nil {
		return "none"
	}
	return strconv.FormatInt(cfg.Observed.Unix(), 10)
}

func (o *observedWrites) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.writes
	o.writes = nil
	return out
}

// TestSnapshotWritesCarryTheObservation: the objects a snapshot writes,
// its deletions included, carry its Observed (model.Meta.Observed), and the
// store stage gets one sample per snapshot that wrote anything.
func TestSnapshotWritesCarryTheObservation(t *testing.T) {
	sy, store, _ := newTestSyncer(t, "c")
	ow := &observedWrites{}
	store.RegisterEventHandler(model.KindServiceEntry, ow.handler)
	store.RegisterEventHandler(model.KindWorkloadEntry, ow.handler)
	we := func(id string) string { return translate.WorkloadEntryName("web.service.consul", "c", id) }
	at := func(sec int64, s registries.Snapshot) registries.Snapshot {
		s.Observed = time.Unix(sec, 0)
		return s
	}
	observed := func(name string) string {
		cfg := store.Get(model.KindWorkloadEntry, name, "mesh")
		if cfg == nil {
			return "absent"
		}
		return observedUnix(cfg)
	}
	steps := []struct {
		name    string
		snap    registries.Snapshot
		want    []string
		samples uint64
		check   func()
	}{
		{
			name: "a new service: its objects carry the observation",
			snap: at(100, snap("c", "web", instance("i1", "10.0.0.1", 80))),
			want: []string{
				"add WorkloadEntry " + we("i1") + " @100",
				"add ServiceEntry web.service.consul @100",
			},
			samples: 1,
		},
		{
			name:    "a second instance: only its object is written, with the new observation",
			snap:    at(200, snap("c", "web", instance("i1", "10.0.0.1", 80), instance("i2", "10.0.0.2", 80))),
			want:    []string{"add WorkloadEntry " + we("i2") + " @200"},
			samples: 1,
			check: func() {
				// The translator reuses i1's object: the store's copy
				// keeps its own observation.
				if got := observed(we("i1")); got != "100" {
					t.Errorf("i1 carries observation %s, want 100", got)
				}
			},
		},
		{
			name: "a read that changes nothing writes nothing and has no sample",
			snap: at(300, snap("c", "web", instance("i1", "10.0.0.1", 80), instance("i2", "10.0.0.2", 80))),
		},
		{
			name:    "an instance gone: its deletion carries the observation",
			snap:    at(400, snap("c", "web", instance("i2", "10.0.0.2", 80))),
			want:    []string{"delete WorkloadEntry " + we("i1") + " @400"},
			samples: 1,
		},
		{
			name: "the service removed: every deletion carries the observation",
			snap: func() registries.Snapshot {
				s := at(500, snap("c", "web"))
				s.Removed = true
				return s
			}(),
			want: []string{
				"delete ServiceEntry web.service.consul @500",
				"delete WorkloadEntry " + we("i2") + " @500",
			},
			samples: 1,
		},
	}
	for _, step := range steps {
		before := storeStageSamples(t)
		sy.Snapshot(step.snap)
		flush(t, store)
		got := ow.take()
		if fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Errorf("%s:\n got  %q\n want %q", step.name, got, step.want)
		}
		if n := storeStageSamples(t) - before; n != step.samples {
			t.Errorf("%s: %d store stage samples, want %d", step.name, n, step.samples)
		}
		if step.check != nil {
			step.check()
		}
	}
}

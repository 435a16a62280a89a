package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// recordHandler keeps the records logged at info and above, their
// attributes rendered with fmt.
type recordHandler struct {
	mu      sync.Mutex
	records []string
}

func (h *recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *recordHandler) WithGroup(string) slog.Handler                { return h }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Any())
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, b.String())
	h.mu.Unlock()
	return nil
}

func (h *recordHandler) take(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	h.records = nil
	return out
}

// TestSyncerCountsAndLogsLabelChangesOnce follows services through
// snapshots: meshbridge_translate_labels_changed_total counts each changed
// or dropped label of an instance once (again only when its label or the
// outcome changes), and one info line per service reports its changes when
// their set changes, not per instance nor per snapshot.
func TestSyncerCountsAndLogsLabelChangesOnce(t *testing.T) {
	bad := map[string]string{"k": "v!!", "ünïcode": "ü", "version": "v1"}
	withLabels := func(id, addr string, labels map[string]string) registries.Instance {
		i := instance(id, addr, 8080)
		i.Labels = labels
		return i
	}
	type step struct {
		name      string
		snap      registries.Snapshot
		wantCount map[string]float64 // reason → increase
		wantLogs  []string           // the lines starting "Registry labels", whole
	}
	const reg = "labels"
	steps := []step{
		{
			name:      "first snapshot: counted per instance, logged once for the service",
			snap:      snap(reg, "web", withLabels("n1/web-1", "10.0.0.1", bad), withLabels("n2/web-2", "10.0.0.2", bad)),
			wantCount: map[string]float64{translate.ChangeValue: 2, translate.DropInvalidKey: 2},
			wantLogs: []string{`Registry labels changed or dropped registry=labels service=web instances=2 ` +
				`keys=map[invalid-key:1 value-changed:1] examples=[k=v!!→k=v "ünïcode"="ü"→dropped]`},
		},
		{name: "the same snapshot counts and logs nothing",
			snap: snap(reg, "web", withLabels("n1/web-1", "10.0.0.1", bad), withLabels("n2/web-2", "10.0.0.2", bad))},
		{name: "an unrelated change of an instance counts and logs nothing",
			snap: snap(reg, "web", withLabels("n1/web-1", "10.0.0.9", bad), withLabels("n2/web-2", "10.0.0.2", bad))},
		{name: "a read error counts and logs nothing",
			snap: registries.Snapshot{Registry: reg, Service: registries.Service{Name: "web"}, Err: errors.New("timeout")}},
		{
			name: "a new instance with the same labels is counted, the service's set is unchanged",
			snap: snap(reg, "web", withLabels("n1/web-1", "10.0.0.9", bad), withLabels("n2/web-2", "10.0.0.2", bad),
				withLabels("n3/web-3", "10.0.0.3", bad)),
			wantCount: map[string]float64{translate.ChangeValue: 1, translate.DropInvalidKey: 1},
		},
		{
			name:      "another service logs its own line",
			snap:      snap(reg, "api", withLabels("n1/api-1", "10.0.1.1", map[string]string{"security.istio.io/tlsMode": "disabled"})),
			wantCount: map[string]float64{translate.DropReservedPrefix: 1},
			wantLogs: []string{`Registry labels changed or dropped registry=labels service=api instances=1 ` +
				`keys=map[reserved-prefix:1] examples=[security.istio.io/tlsMode=disabled→dropped]`},
		},
		{
			name: "a changed raw value is counted again, the set is unchanged",
			snap: snap(reg, "web", withLabels("n1/web-1", "10.0.0.9", map[string]string{"k": "w!!", "ünïcode": "ü"}),
				withLabels("n2/web-2", "10.0.0.2", bad), withLabels("n3/web-3", "10.0.0.3", bad)),
			wantCount: map[string]float64{translate.ChangeValue: 1},
		},
		{
			name: "labels fixed: one line, nothing counted",
			snap: snap(reg, "web", withLabels("n1/web-1", "10.0.0.9", nil), withLabels("n2/web-2", "10.0.0.2", nil),
				withLabels("n3/web-3", "10.0.0.3", nil)),
			wantLogs: []string{"Registry labels all kept as written registry=labels service=web"},
		},
		{name: "and then quiet", snap: snap(reg, "web", withLabels("n1/web-1", "10.0.0.9", nil),
			withLabels("n2/web-2", "10.0.0.2", nil), withLabels("n3/web-3", "10.0.0.3", nil))},
	}

	tr, err := translate.New(translate.Options{Registry: reg, HostTemplate: consul.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	runStore(t, store)
	logs := &recordHandler{}
	sy := New(store, Config{
		Registries: []Registry{{Name: reg, Type: "consul", Translator: tr}},
		Logger:     slog.New(logs),
	})
	reasons := []string{
		translate.ChangeKey, translate.ChangeValue, translate.ChangeTruncated, translate.DropInvalidKey,
		translate.DropInvalidValue, translate.DropReservedPrefix, translate.DropCollision, translate.DropVolatile,
		translate.DropTooMany,
	}
	counts := func() map[string]float64 {
		m := make(map[string]float64, len(reasons))
		for _, r := range reasons {
			m[r] = testutil.ToFloat64(labelsChanged.WithLabelValues(reg, r))
		}
		return m
	}
	for _, s := range steps {
		before := counts()
		sy.Snapshot(s.snap)
		after := counts()
		increase := make(map[string]float64)
		for r, n := range after {
			if d := n - before[r]; d != 0 {
				increase[r] = d
			}
		}
		if !maps.Equal(increase, s.wantCount) {
			t.Errorf("%s: counter increased by %v, want %v", s.name, increase, s.wantCount)
		}
		got := logs.take("Registry labels")
		if diff := cmp.Diff(s.wantLogs, got); diff != "" {
			t.Errorf("%s: log lines (-want +got):\n%s", s.name, diff)
		}
	}
	flush(t, store)
	if we := store.List(model.KindWorkloadEntry, "mesh"); len(we) != 4 {
		t.Fatalf("%d WorkloadEntries, want 4", len(we))
	}
}

// TestLabelChangeExamplesAreBounded: a service whose instances carry
// thousands of dropped labels logs one line with a handful of examples.
func TestLabelChangeExamplesAreBounded(t *testing.T) {
	labels := make(map[string]string, 2000)
	for i := range 2000 {
		labels[fmt.Sprintf("tag%04d", i)] = "x y"
	}
	labels["a b"], labels["a-b"], labels["pid"], labels["istio.io/rev"], labels["delay"] = "1", "2", "3", "4", "-1"
	tr, err := translate.New(translate.Options{Registry: "many", HostTemplate: consul.HostTemplate, Namespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	runStore(t, store)
	logs := &recordHandler{}
	sy := New(store, Config{Registries: []Registry{{Name: "many", Type: "consul", Translator: tr}}, Logger: slog.New(logs)})
	i := instance("n1/big-1", "10.0.0.1", 8080)
	i.Labels = labels
	sy.Snapshot(snap("many", "big", i))
	got := logs.take("Registry labels")
	if len(got) != 1 {
		t.Fatalf("log lines %q, want one", got)
	}
	for _, want := range []string{"instances=1", "collision:1", "too-many-labels:1746", "value-changed:254",
		"volatile:1", "reserved-prefix:1", "invalid-value:1"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("line %q lacks %q", got[0], want)
		}
	}
	if n := strings.Count(got[0], "→"); n != 5 {
		t.Errorf("line %q has %d examples, want 5", got[0], n)
	}
	if got := testutil.ToFloat64(labelsChanged.WithLabelValues("many", translate.DropTooMany)); got != 1746 {
		t.Errorf("too-many-labels counted %v, want 1746", got)
	}
}

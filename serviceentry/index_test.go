package serviceentry

import (
	"slices"
	"testing"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

func TestIndexSelecting(t *testing.T) {
	entry := func(name string, selector map[string]string) (model.ConfigKey, *model.Config, []*model.Service) {
		cfg := &model.Config{Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "mesh", Name: name},
			Spec: &networking.ServiceEntry{Hosts: []string{name}, WorkloadSelector: &networking.WorkloadSelector{Labels: selector}}}
		return cfg.Key(), cfg, []*model.Service{{Hostname: name, Namespace: "mesh"}}
	}
	byService := func(v string) map[string]string { return map[string]string{model.LabelService: v} }
	type step struct {
		put    string // entry name to put; "-name" removes it
		sel    map[string]string
		labels map[string]string // then: the workload labels to look up
		want   []string          // hosts selecting them, sorted
	}
	tests := map[string][]step{
		"one entry per selector value": {
			{put: "a", sel: byService("x"), labels: byService("x"), want: []string{"a"}},
			{put: "b", sel: byService("y"), labels: byService("x"), want: []string{"a"}},
		},
		"two entries with one value, then one removed": {
			{put: "a", sel: byService("x")},
			{put: "b", sel: byService("x"), labels: byService("x"), want: []string{"a", "b"}},
			{put: "-a", labels: byService("x"), want: []string{"b"}},
			{put: "-b", labels: byService("x")},
		},
		"an entry moving to another value leaves the first": {
			{put: "a", sel: byService("x")},
			{put: "a", sel: byService("y"), labels: byService("x")},
			{put: "a", sel: byService("y"), labels: byService("y"), want: []string{"a"}},
		},
		"other selectors match by label, scanned per namespace": {
			{put: "a", sel: map[string]string{"app": "web"}, labels: map[string]string{"app": "web", "v": "1"}, want: []string{"a"}},
			{put: "b", sel: byService("x"), labels: map[string]string{"app": "web", model.LabelService: "x"}, want: []string{"a", "b"}},
			{put: "-a", labels: map[string]string{"app": "web"}},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			x := newIndex()
			for i, st := range steps {
				if st.put[0] == '-' {
					key, _, _ := entry(st.put[1:], nil)
					x.putEntry(key, nil, nil)
				} else {
					x.putEntry(entry(st.put, st.sel))
				}
				var got []string
				for _, svc := range x.selecting("mesh", mapLabel(st.labels)) {
					got = append(got, svc.Hostname)
				}
				slices.Sort(got)
				if !slices.Equal(got, st.want) {
					t.Errorf("step %d: selecting %v = %v, want %v", i, st.labels, got, st.want)
				}
			}
			if len(x.bySelector)+len(x.otherSelectors) > len(x.entries) {
				t.Errorf("%d selector sets left for %d entries", len(x.bySelector)+len(x.otherSelectors), len(x.entries))
			}
		})
	}
}

func TestIndexWorkloads(t *testing.T) {
	we := func(name string, labels map[string]string) *model.WorkloadEntry {
		return model.WorkloadEntryOf(&model.Config{Meta: model.Meta{Kind: model.KindWorkloadEntry, Namespace: "mesh", Name: name, Labels: labels},
			Spec: &networking.WorkloadEntry{Address: "10.0.0.1", Labels: labels}})
	}
	svc := func(v string) map[string]string { return map[string]string{model.LabelService: v, "app": "web"} }
	a1, b1, c1 := we("a", svc("x")), we("b", svc("x")), we("c", map[string]string{"app": "web"})
	a2 := we("a", svc("y"))
	type query struct {
		selector map[string]string
		want     []string
	}
	steps := []struct {
		old, cur *model.WorkloadEntry
		queries  []query
	}{
		{cur: a1, queries: []query{{map[string]string{model.LabelService: "x"}, []string{"a"}}}},
		{cur: b1},
		{cur: c1, queries: []query{
			{map[string]string{model.LabelService: "x"}, []string{"a", "b"}},
			{map[string]string{"app": "web"}, []string{"a", "b", "c"}},
		}},
		{old: a1, cur: a2, queries: []query{
			{map[string]string{model.LabelService: "x"}, []string{"b"}},
			{map[string]string{model.LabelService: "y"}, []string{"a"}},
			{map[string]string{"app": "web"}, []string{"a", "b", "c"}},
		}},
		{old: b1, queries: []query{{map[string]string{model.LabelService: "x"}, nil}}},
		{old: a2},
		{old: c1, queries: []query{{map[string]string{"app": "web"}, nil}}},
	}
	x := newIndex()
	for i, st := range steps {
		x.putWorkload(st.old, st.cur)
		for _, q := range st.queries {
			name := "q"
			cfg := &model.Config{Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "mesh", Name: name},
				Spec: &networking.ServiceEntry{Hosts: []string{name}, Ports: []*networking.ServicePort{{Name: "grpc", Number: 80}},
					WorkloadSelector: &networking.WorkloadSelector{Labels: q.selector}}}
			s := &model.Service{Hostname: name, Namespace: "mesh", Ports: []model.Port{{Name: "grpc", Number: 80}}}
			x.putEntry(cfg.Key(), cfg, []*model.Service{s})
			var got []string
			for _, ep := range x.endpoints(s) {
				got = append(got, ep.WorkloadName)
			}
			if !slices.Equal(got, q.want) {
				t.Errorf("step %d, selector %v: %v, want %v", i, q.selector, got, q.want)
			}
		}
	}
	if len(x.workloads) != 0 {
		t.Errorf("workloads left: %v", x.workloads)
	}
}

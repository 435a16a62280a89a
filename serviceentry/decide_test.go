package serviceentry

import (
	"maps"
	"slices"
	"testing"

	"github.com/meshbridge/meshbridge/model"
)

func svc(host string, mut ...func(*model.Service)) *model.Service {
	s := &model.Service{
		Hostname:   host,
		Namespace:  "ns",
		Ports:      []model.Port{{Name: "grpc-8080", Number: 8080, Protocol: model.ProtocolGRPC}},
		Resolution: model.ResolutionStatic,
		Selector:   map[string]string{model.LabelService: host},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func dns(s *model.Service) { s.Resolution = model.ResolutionDNS }

func hosts(svcs []*model.Service) []string {
	out := make([]string, 0, len(svcs))
	for _, s := range svcs {
		out = append(out, s.Hostname)
	}
	return out
}

func keyHosts(keys map[model.ConfigKey]struct{}) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range maps.Keys(keys) {
			if !yield(k.Name) {
				return
			}
		}
	})
}

func TestDecideServiceEntryPush(t *testing.T) {
	cases := map[string]struct {
		old, cur      []*model.Service
		event         model.Event
		wantFull      bool
		wantConfigs   []string
		wantUnchanged []string
	}{
		"add makes every host added and pushes full": {
			cur: []*model.Service{svc("a"), svc("b")}, event: model.EventAdd,
			wantFull: true, wantConfigs: []string{"a", "b"},
		},
		"delete makes every host deleted and pushes full": {
			cur: []*model.Service{svc("a")}, event: model.EventDelete,
			wantFull: true, wantConfigs: []string{"a"},
		},
		"update with equal services pushes EDS only": {
			old: []*model.Service{svc("a")}, cur: []*model.Service{svc("a")}, event: model.EventUpdate,
			wantUnchanged: []string{"a"},
		},
		"update changing a port pushes full for that host only": {
			old:   []*model.Service{svc("a"), svc("b")},
			cur:   []*model.Service{svc("a", func(s *model.Service) { s.Ports[0].Number = 9090 }), svc("b")},
			event: model.EventUpdate, wantFull: true, wantConfigs: []string{"a"}, wantUnchanged: []string{"b"},
		},
		"update adding a host pushes full for the new host": {
			old: []*model.Service{svc("a")}, cur: []*model.Service{svc("a"), svc("b")}, event: model.EventUpdate,
			wantFull: true, wantConfigs: []string{"b"}, wantUnchanged: []string{"a"},
		},
		"update removing a host pushes full for the removed host": {
			old: []*model.Service{svc("a"), svc("b")}, cur: []*model.Service{svc("a")}, event: model.EventUpdate,
			wantFull: true, wantConfigs: []string{"b"}, wantUnchanged: []string{"a"},
		},
		"update changing labels pushes EDS only: no generator reads them": {
			old:   []*model.Service{svc("a")},
			cur:   []*model.Service{svc("a", func(s *model.Service) { s.Labels = map[string]string{"x": "y"} })},
			event: model.EventUpdate, wantUnchanged: []string{"a"},
		},
		"update changing resolution pushes EDS only: every cluster is type EDS": {
			old: []*model.Service{svc("a")}, cur: []*model.Service{svc("a", dns)}, event: model.EventUpdate,
			wantUnchanged: []string{"a"},
		},
		"update back to STATIC (the last hostname instance left) pushes EDS only": {
			old: []*model.Service{svc("a", dns)}, cur: []*model.Service{svc("a")}, event: model.EventUpdate,
			wantUnchanged: []string{"a"},
		},
		"update changing exportTo, addresses, location or selector pushes EDS only": {
			old: []*model.Service{svc("a")},
			cur: []*model.Service{svc("a", func(s *model.Service) {
				s.ExportTo, s.Addresses, s.MeshExternal = []string{"."}, []string{"240.0.0.1"}, true
				s.Selector = map[string]string{"app": "other"}
			})},
			event: model.EventUpdate, wantUnchanged: []string{"a"},
		},
		"update changing a port's protocol pushes full": {
			old:   []*model.Service{svc("a")},
			cur:   []*model.Service{svc("a", func(s *model.Service) { s.Ports[0].Protocol = model.ProtocolTCP })},
			event: model.EventUpdate, wantFull: true, wantConfigs: []string{"a"},
		},
		"update changing a port's name pushes full: EDS maps endpoints by it": {
			old:   []*model.Service{svc("a")},
			cur:   []*model.Service{svc("a", func(s *model.Service) { s.Ports[0].Name = "grpc-x" })},
			event: model.EventUpdate, wantFull: true, wantConfigs: []string{"a"},
		},
		"inline endpoints changing on a DNS entry push EDS only": {
			old: []*model.Service{svc("a", dns)}, cur: []*model.Service{svc("a", dns)}, event: model.EventUpdate,
			wantUnchanged: []string{"a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decideServiceEntry(tc.old, tc.cur, tc.event)
			if d.Full() != tc.wantFull {
				t.Errorf("Full() = %v, want %v", d.Full(), tc.wantFull)
			}
			if got := keyHosts(d.ConfigsUpdated); !slices.Equal(got, tc.wantConfigs) && !(len(got) == 0 && len(tc.wantConfigs) == 0) {
				t.Errorf("ConfigsUpdated = %v, want %v", got, tc.wantConfigs)
			}
			if got := hosts(d.Unchanged); !slices.Equal(got, tc.wantUnchanged) && !(len(got) == 0 && len(tc.wantUnchanged) == 0) {
				t.Errorf("Unchanged = %v, want %v", got, tc.wantUnchanged)
			}
		})
	}
}

func TestDecideWorkloadEntryPush(t *testing.T) {
	cases := map[string]struct {
		oldSel, newSel []*model.Service
		wantHosts      []string
	}{
		"new workload selected by a STATIC entry pushes EDS only": {
			newSel: []*model.Service{svc("a")}, wantHosts: []string{"a"},
		},
		"workload that stops matching leaves the old entry by EDS": {
			oldSel: []*model.Service{svc("a")}, newSel: []*model.Service{svc("b")}, wantHosts: []string{"a", "b"},
		},
		"workload selected before and after is pushed once": {
			oldSel: []*model.Service{svc("a")}, newSel: []*model.Service{svc("a")}, wantHosts: []string{"a"},
		},
		"workload selected by a DNS entry pushes EDS only: meshbridge's clusters do not carry endpoints": {
			newSel: []*model.Service{svc("a"), svc("d", dns)}, wantHosts: []string{"a", "d"},
		},
		"the last workload of a DNS entry deleted pushes EDS only": {
			oldSel: []*model.Service{svc("d", dns)}, wantHosts: []string{"d"},
		},
		"workload selected by nothing pushes nothing": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := hosts(decideWorkloadEntry(tc.oldSel, tc.newSel)); !slices.Equal(got, tc.wantHosts) && !(len(got) == 0 && len(tc.wantHosts) == 0) {
				t.Errorf("Hosts = %v, want %v", got, tc.wantHosts)
			}
		})
	}
}

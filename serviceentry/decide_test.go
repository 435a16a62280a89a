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
		old, cur         []*model.Service
		event            model.Event
		endpointsChanged bool
		wantFull         bool
		wantConfigs      []string
		wantUnchanged    []string
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
		"update changing labels is a service update": {
			old:   []*model.Service{svc("a")},
			cur:   []*model.Service{svc("a", func(s *model.Service) { s.Labels = map[string]string{"x": "y"} })},
			event: model.EventUpdate, wantFull: true, wantConfigs: []string{"a"},
		},
		"update changing resolution is a service update": {
			old: []*model.Service{svc("a")}, cur: []*model.Service{svc("a", dns)}, event: model.EventUpdate,
			wantFull: true, wantConfigs: []string{"a"},
		},
		"inline endpoints changing on a DNS entry push full": {
			old: []*model.Service{svc("a", dns)}, cur: []*model.Service{svc("a", dns)}, event: model.EventUpdate,
			endpointsChanged: true, wantFull: true, wantConfigs: []string{"a"}, wantUnchanged: []string{"a"},
		},
		"inline endpoints changing on a STATIC entry push EDS only": {
			old: []*model.Service{svc("a")}, cur: []*model.Service{svc("a")}, event: model.EventUpdate,
			endpointsChanged: true, wantUnchanged: []string{"a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decideServiceEntry(tc.old, tc.cur, tc.event, tc.endpointsChanged)
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
		wantConfigs    []string
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
		"workload selected by a DNS entry pushes full for that host": {
			newSel: []*model.Service{svc("a"), svc("d", dns)}, wantHosts: []string{"a", "d"}, wantConfigs: []string{"d"},
		},
		"workload selected by nothing pushes nothing": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decideWorkloadEntry(tc.oldSel, tc.newSel)
			if got := hosts(d.Hosts); !slices.Equal(got, tc.wantHosts) && !(len(got) == 0 && len(tc.wantHosts) == 0) {
				t.Errorf("Hosts = %v, want %v", got, tc.wantHosts)
			}
			if got := keyHosts(d.ConfigsUpdated); !slices.Equal(got, tc.wantConfigs) && !(len(got) == 0 && len(tc.wantConfigs) == 0) {
				t.Errorf("ConfigsUpdated = %v, want %v", got, tc.wantConfigs)
			}
		})
	}
}

func TestServicesEqual(t *testing.T) {
	base := svc("a")
	cases := map[string]struct {
		other *model.Service
		want  bool
	}{
		"identical services are equal":       {svc("a"), true},
		"another port number is not equal":   {svc("a", func(s *model.Service) { s.Ports[0].Number = 1 }), false},
		"another port protocol is not equal": {svc("a", func(s *model.Service) { s.Ports[0].Protocol = model.ProtocolTCP }), false},
		"another selector is not equal":      {svc("a", func(s *model.Service) { s.Selector = map[string]string{"x": "y"} }), false},
		"another exportTo is not equal":      {svc("a", func(s *model.Service) { s.ExportTo = []string{"."} }), false},
		"another address is not equal":       {svc("a", func(s *model.Service) { s.Addresses = []string{"10.0.0.1"} }), false},
		"mesh external is not equal":         {svc("a", func(s *model.Service) { s.MeshExternal = true }), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := servicesEqual(base, tc.other); got != tc.want {
				t.Errorf("servicesEqual = %v, want %v", got, tc.want)
			}
		})
	}
}

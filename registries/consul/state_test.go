package consul

import (
	"testing"

	"github.com/hashicorp/consul/api"
)

func TestFingerprints(t *testing.T) {
	base := api.HealthChecks{
		{Node: "n1", CheckID: "serfHealth", ModifyIndex: 10},
		{Node: "n2", CheckID: "serfHealth", ModifyIndex: 11},
		{Node: "n1", CheckID: "service:a1", ServiceID: "a1", ServiceName: "a", ModifyIndex: 12},
		{Node: "n2", CheckID: "service:b1", ServiceID: "b1", ServiceName: "b", ModifyIndex: 13},
	}
	nodes := map[string]map[string]bool{"a": {"n1": true}, "b": {"n2": true}, "c": {"n2": true}}
	with := func(change func(api.HealthChecks) api.HealthChecks) api.HealthChecks {
		cs := make(api.HealthChecks, 0, len(base))
		for _, c := range base {
			cc := *c
			cs = append(cs, &cc)
		}
		return change(cs)
	}
	tests := map[string]struct {
		checks      api.HealthChecks
		wantChanged map[string]bool
	}{
		"nothing changed, nothing to re-read": {checks: base, wantChanged: map[string]bool{}},
		"a service check's ModifyIndex moved re-reads that service only": {
			checks:      with(func(cs api.HealthChecks) api.HealthChecks { cs[2].ModifyIndex = 20; return cs }),
			wantChanged: map[string]bool{"a": true}},
		"a node check change re-reads every service on that node": {
			checks:      with(func(cs api.HealthChecks) api.HealthChecks { cs[1].ModifyIndex = 20; return cs }),
			wantChanged: map[string]bool{"b": true, "c": true}},
		"a new check of a service re-reads it": {
			checks: with(func(cs api.HealthChecks) api.HealthChecks {
				return append(cs, &api.HealthCheck{Node: "n3", CheckID: "service:a2", ServiceID: "a2", ServiceName: "a", ModifyIndex: 30})
			}),
			wantChanged: map[string]bool{"a": true}},
		"a removed check re-reads its service": {
			checks:      with(func(cs api.HealthChecks) api.HealthChecks { return cs[:3] }),
			wantChanged: map[string]bool{"b": true}},
		"a check of an unfollowed service changes nothing": {
			checks: with(func(cs api.HealthChecks) api.HealthChecks {
				return append(cs, &api.HealthCheck{Node: "n1", CheckID: "service:z", ServiceID: "z", ServiceName: "z", ModifyIndex: 40})
			}),
			wantChanged: map[string]bool{}},
		"order of checks does not matter": {
			checks:      with(func(cs api.HealthChecks) api.HealthChecks { cs[0], cs[3] = cs[3], cs[0]; return cs }),
			wantChanged: map[string]bool{}},
	}
	before := fingerprints(base, nodes)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			after := fingerprints(tc.checks, nodes)
			for svc := range nodes {
				if changed := before[svc] != after[svc]; changed != tc.wantChanged[svc] {
					t.Errorf("service %q: changed = %v, want %v", svc, changed, tc.wantChanged[svc])
				}
			}
		})
	}
}

func TestFingerprintsCountServiceChecks(t *testing.T) {
	checks := api.HealthChecks{
		{Node: "n1", CheckID: "serfHealth"},
		{Node: "n1", CheckID: "service:a1", ServiceID: "a1", ServiceName: "a"},
	}
	fps := fingerprints(checks, map[string]map[string]bool{"a": {"n1": true}, "nocheck": {"n1": true}})
	if got := fps["a"].serviceChecks; got != 1 {
		t.Errorf("service with a check: serviceChecks = %d, want 1", got)
	}
	if got := fps["nocheck"].serviceChecks; got != 0 {
		t.Errorf("check-less service: serviceChecks = %d, want 0 (re-read on catalog changes)", got)
	}
}

// TestBaselineOfARereadMatchesStateAny: the baseline a re-read gives
// (baselineOf, from the health entries' checks) equals the fingerprint
// state/any gives for the same checks, whatever repeats the entries hold:
// a re-read's baseline is compared with later state/any answers (doc.go
// rule 4).
func TestBaselineOfARereadMatchesStateAny(t *testing.T) {
	node := func(name string, idx uint64) *api.HealthCheck {
		return &api.HealthCheck{Node: name, CheckID: "serfHealth", ModifyIndex: idx}
	}
	own := func(n, id string, idx uint64) *api.HealthCheck {
		return &api.HealthCheck{Node: n, CheckID: "service:" + id, ServiceID: id, ServiceName: "web", ModifyIndex: idx}
	}
	entry := func(n, id string, checks ...*api.HealthCheck) *api.ServiceEntry {
		return &api.ServiceEntry{Node: &api.Node{Node: n}, Service: &api.AgentService{ID: id, Service: "web"}, Checks: checks}
	}
	other := &api.HealthCheck{Node: "n1", CheckID: "service:api", ServiceID: "api", ServiceName: "api", ModifyIndex: 99}
	cases := map[string]struct {
		checks  api.HealthChecks
		entries []*api.ServiceEntry
	}{
		"one instance": {
			checks:  api.HealthChecks{node("n1", 1), own("n1", "w1", 2), other},
			entries: []*api.ServiceEntry{entry("n1", "w1", node("n1", 1), own("n1", "w1", 2))},
		},
		"two instances on one node repeat its node check": {
			checks: api.HealthChecks{node("n1", 1), own("n1", "w1", 2), own("n1", "w2", 3)},
			entries: []*api.ServiceEntry{entry("n1", "w1", node("n1", 1), own("n1", "w1", 2)),
				entry("n1", "w2", node("n1", 1), own("n1", "w2", 3))},
		},
		"instances on two nodes": {
			checks: api.HealthChecks{node("n1", 1), node("n2", 4), own("n1", "w1", 2), own("n2", "w2", 3)},
			entries: []*api.ServiceEntry{entry("n1", "w1", node("n1", 1), own("n1", "w1", 2)),
				entry("n2", "w2", node("n2", 4), own("n2", "w2", 3))},
		},
		"no service-level check": {
			checks:  api.HealthChecks{node("n1", 1)},
			entries: []*api.ServiceEntry{entry("n1", "w1", node("n1", 1))},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := baselineOf(tc.entries)
			want := fingerprints(tc.checks, map[string]map[string]bool{"web": b.nodes})["web"]
			if b.fp != want {
				t.Errorf("baselineOf = %+v, state/any's fingerprint = %+v", b.fp, want)
			}
		})
	}
}

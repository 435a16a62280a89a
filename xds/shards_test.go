package xds

import (
	"testing"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

func TestEndpointShardsUpdate(t *testing.T) {
	a := ep("10.0.0.1", 80, "")
	b := ep("10.0.0.2", 80, "")
	withAccount := func(e *model.Endpoint, sa string) *model.Endpoint { c := *e; c.ServiceAccount = sa; return &c }
	with := func(e *model.Endpoint, edit func(*model.Endpoint)) *model.Endpoint { c := *e; edit(&c); return &c }
	type update struct {
		shard     string
		endpoints []*model.Endpoint
	}
	tests := map[string]struct {
		declared bool                        // SvcUpdate(add) came first: the service has clusters
		pushed   *networking.DestinationRule // the last full push's service had this rule
		before   []update                    // applied first, results ignored
		update   update
		want     pushKind
		known    bool // the service key exists afterwards
	}{
		"first endpoints of an unknown service push full": {
			update: update{"consul", []*model.Endpoint{a}},
			want:   fullPush, known: true,
		},
		"first endpoints of a declared service push EDS: its cluster came with the ServiceEntry": {
			declared: true,
			update:   update{"consul", []*model.Endpoint{a}},
			want:     edsPush, known: true,
		},
		"no endpoints for a declared service push nothing and keep the key": {
			declared: true,
			update:   update{"consul", nil},
			want:     noPush, known: true,
		},
		"no endpoints for an unknown service create no key and push nothing": {
			update: update{"consul", nil},
			want:   noPush, known: false,
		},
		"unchanged endpoint set pushes nothing": {
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{a, b}},
			want:   noPush, known: true,
		},
		"unchanged endpoint set in another order pushes nothing": {
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{b, a}},
			want:   noPush, known: true,
		},
		"changed endpoint set pushes EDS": {
			before: []update{{"consul", []*model.Endpoint{a}}},
			update: update{"consul", []*model.Endpoint{a, b}},
			want:   edsPush, known: true,
		},
		"zero endpoints keep the service key and push EDS": {
			before: []update{{"consul", []*model.Endpoint{a}}},
			update: update{"consul", nil},
			want:   edsPush, known: true,
		},
		"endpoints back after zero push EDS, not full": {
			before: []update{{"consul", []*model.Endpoint{a}}, {"consul", nil}},
			update: update{"consul", []*model.Endpoint{a}},
			want:   edsPush, known: true,
		},
		"zero endpoints again push nothing": {
			before: []update{{"consul", []*model.Endpoint{a}}, {"consul", nil}},
			update: update{"consul", nil},
			want:   noPush, known: true,
		},
		"changed set of service accounts pushes EDS: no cluster carries them": {
			before: []update{{"consul", []*model.Endpoint{withAccount(a, "sa1")}}},
			update: update{"consul", []*model.Endpoint{withAccount(a, "sa1"), withAccount(b, "sa2")}},
			want:   edsPush, known: true,
		},
		"an account's endpoints back after zero push EDS, not full": {
			before: []update{{"consul", []*model.Endpoint{withAccount(a, "sa1")}}, {"consul", nil}},
			update: update{"consul", []*model.Endpoint{withAccount(a, "sa1")}},
			want:   edsPush, known: true,
		},
		"an account's endpoints flapping 0 → N → 0 → N push EDS each time": {
			before: []update{{"consul", []*model.Endpoint{withAccount(a, "sa1")}}, {"consul", nil},
				{"consul", []*model.Endpoint{withAccount(a, "sa1")}}, {"consul", nil}},
			update: update{"consul", []*model.Endpoint{withAccount(a, "sa1")}},
			want:   edsPush, known: true,
		},
		"same service accounts from another endpoint push EDS": {
			before: []update{{"consul", []*model.Endpoint{withAccount(a, "sa1")}}},
			update: update{"consul", []*model.Endpoint{withAccount(a, "sa1"), withAccount(b, "sa1")}},
			want:   edsPush, known: true,
		},
		"a label, account or workload name change pushes nothing without subsets: no client is sent them": {
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{with(a, func(e *model.Endpoint) {
				e.Labels, e.ServiceAccount, e.WorkloadName = map[string]string{"version": "v2"}, "sa9", "renamed"
			}), b}},
			want: noPush, known: true,
		},
		"a label change pushes EDS when the pushed service's DestinationRule has subsets": {
			pushed: &networking.DestinationRule{Host: "a.local", Subsets: []*networking.Subset{{Name: "v2", Labels: map[string]string{"version": "v2"}}}},
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{with(a, func(e *model.Endpoint) { e.Labels = map[string]string{"version": "v2"} }), b}},
			want:   edsPush, known: true,
		},
		"an account or workload name change pushes nothing with subsets": {
			pushed: &networking.DestinationRule{Host: "a.local", Subsets: []*networking.Subset{{Name: "v2", Labels: map[string]string{"version": "v2"}}}},
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{with(a, func(e *model.Endpoint) { e.ServiceAccount, e.WorkloadName = "sa9", "renamed" }), b}},
			want:   noPush, known: true,
		},
		"a weight change pushes EDS": {
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{with(a, func(e *model.Endpoint) { e.Weight = 7 }), b}},
			want:   edsPush, known: true,
		},
		"a locality change pushes EDS": {
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{with(a, func(e *model.Endpoint) { e.Locality = "r/z9" }), b}},
			want:   edsPush, known: true,
		},
		"a port change pushes EDS": {
			before: []update{{"consul", []*model.Endpoint{a, b}}},
			update: update{"consul", []*model.Endpoint{with(a, func(e *model.Endpoint) { e.EndpointPort = 81 }), b}},
			want:   edsPush, known: true,
		},
		"first endpoints of a second shard push EDS": {
			before: []update{{"consul", []*model.Endpoint{a}}},
			update: update{"file", []*model.Endpoint{b}},
			want:   edsPush, known: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			shards := newEndpointShards()
			if tc.declared {
				shards.ensure("a.local", "mesh")
			}
			for _, u := range tc.before {
				shards.update(u.shard, "a.local", "mesh", u.endpoints)
			}
			if tc.pushed != nil {
				shards.swapPushed([]*model.Service{{Hostname: "a.local", Namespace: "mesh", Policy: tc.pushed}})
			}
			if got := shards.update(tc.update.shard, "a.local", "mesh", tc.update.endpoints); got != tc.want {
				t.Errorf("push = %v, want %v", got, tc.want)
			}
			if got := shards.known("a.local", "mesh"); got != tc.known {
				t.Errorf("known = %v, want %v", got, tc.known)
			}
		})
	}
}

func TestEndpointShardsDeleteAndMerge(t *testing.T) {
	shards := newEndpointShards()
	a, b := ep("10.0.0.1", 80, ""), ep("10.0.0.2", 80, "")
	shards.update("zk", "a.local", "mesh", []*model.Endpoint{a})
	shards.update("consul", "a.local", "mesh", []*model.Endpoint{b})
	var got []string
	for _, e := range shards.encoded("a.local", "mesh") {
		got = append(got, e.Address())
	}
	assertEqual(t, []string{b.Address, a.Address}, got) // shards in name order

	shards.delete("a.local", "mesh")
	if shards.known("a.local", "mesh") {
		t.Fatal("service key survived delete")
	}
	if got := shards.update("consul", "a.local", "mesh", []*model.Endpoint{b}); got != fullPush {
		t.Fatalf("first endpoints after delete: push = %v, want full", got)
	}
}

// TestEndpointShardsKeepTheLastPush: a service's entry holds its last full
// push's service beside its shards; a deleted service keeps it until the
// next full push says it vanished, then its entry goes; a service listed
// again after a delete is a new key.
func TestEndpointShardsKeepTheLastPush(t *testing.T) {
	shards := newEndpointShards()
	a, b := grpcService("a.local", 80), grpcService("b.local", 80)
	shards.update("consul", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, "")})
	if prev, vanished := shards.swapPushed([]*model.Service{a, b}); prev[0] != nil || prev[1] != nil || len(vanished) != 0 {
		t.Fatalf("first push: prev %v, vanished %v", prev, vanished)
	}
	if shards.pushedService("a.local", "mesh") != a || len(shards.pushedServices()) != 2 {
		t.Fatal("the push's services are not recorded")
	}
	shards.delete("a.local", "mesh")
	if shards.known("a.local", "mesh") || len(shards.encoded("a.local", "mesh")) != 0 {
		t.Fatal("a deleted service is still known or has endpoints")
	}
	if shards.pushedService("a.local", "mesh") != a {
		t.Fatal("a deleted service lost its pushed service before the next full push")
	}
	prev, vanished := shards.swapPushed([]*model.Service{b})
	if prev[0] != b || len(vanished) != 1 || vanished[0] != a {
		t.Fatalf("second push: prev %v, vanished %v; want b and a", prev, vanished)
	}
	if _, ok := shards.services[serviceID{"a.local", "mesh"}]; ok {
		t.Error("the vanished, deleted service's entry is kept")
	}
	if got := shards.update("consul", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, "")}); got != fullPush {
		t.Errorf("first endpoints after the delete: push %v, want full", got)
	}
}

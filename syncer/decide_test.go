package syncer

import (
	"errors"
	"slices"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate"
)

func TestPlanHost(t *testing.T) {
	c := func(rank int, registry, service string) claimant {
		return claimant{rank: rank, registry: registry, service: registries.ServiceKey{Name: service}}
	}
	cases := map[string]struct {
		claims []claimant // in rule 1's order
		merge  bool
		want   []role
	}{
		"one claimant wins": {claims: []claimant{c(0, "a", "web")}, merge: true, want: []role{roleWinner}},
		"merge: every later registry's first service merges": {
			claims: []claimant{c(0, "a", "web"), c(1, "b", "web"), c(2, "c", "web")}, merge: true,
			want: []role{roleWinner, roleMerged, roleMerged}},
		"merge: every service of every registry merges, a later registry's case variants alike": {
			claims: []claimant{c(0, "a", "Web"), c(0, "a", "web"), c(1, "b", "Orders-Service"), c(1, "b", "orders-service")}, merge: true,
			want: []role{roleWinner, roleMerged, roleMerged, roleMerged}},
		"case variants on their own ports: a newcomer that sorts first wins the name, the established one merges": {
			claims: []claimant{c(0, "a", "Orders-Service"), c(0, "a", "orders-service")},
			want:   []role{roleWinner, roleMerged}},
		"first: the winner's registry's other services merge, every other registry's collide": {
			claims: []claimant{c(0, "a", "Orders-Service"), c(0, "a", "orders-service"), c(1, "b", "orders-service"), c(1, "b", "web2")},
			want:   []role{roleWinner, roleMerged, roleCollision, roleCollision}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := planHost(tc.claims, tc.merge); !slices.Equal(got, tc.want) {
				t.Fatalf("roles %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHostPorts is rule 3's table (hostPorts), with the shapes users have:
// instances of one service on their own ports, a case-variant newcomer on a
// lower port that sorts first, the instance on the host's port leaving.
func TestHostPorts(t *testing.T) {
	http := func(n uint32) translate.Sticky { return translate.Sticky{Port: n, Protocol: model.ProtocolHTTP} }
	cases := map[string]struct {
		own      translate.Sticky // the first claimant's own ports
		declared bool
		host     translate.Sticky
		kept     bool
		want     translate.Sticky
	}{
		"a new host takes the first claimant's lowest instance port":     {own: http(35499), want: http(35499)},
		"before the bridge is ready the ports follow the first claimant": {own: http(34855), host: http(35499), want: http(34855)},
		"a newcomer on a lower port that sorts first keeps the host's port": {
			own: http(34855), host: http(35499), kept: true, want: http(35499)},
		"the instance on the host's port left, another remains on its own port": {
			own: http(36807), host: http(35499), kept: true, want: http(35499)},
		"no claimant has a port, the host keeps its own":   {host: http(35499), kept: true, want: http(35499)},
		"no claimant has a port and none was kept":         {want: translate.Sticky{}},
		"declared ports replace kept ones":                 {own: http(9090), declared: true, host: http(35499), kept: true, want: http(9090)},
		"servicePort (declared) replaces instance-derived": {own: http(80), declared: true, host: http(8080), kept: true, want: http(80)},
		"kept Dubbo ports per protocol stay": {
			own:  translate.Sticky{Port: 20881, Protocol: translate.ProtocolDubbo, ProtocolPorts: []translate.ProtocolPort{{Number: 20881, Protocol: translate.ProtocolDubbo}, {Number: 50052, Protocol: model.ProtocolGRPC}}},
			host: translate.Sticky{Port: 20880, Protocol: translate.ProtocolDubbo, ProtocolPorts: []translate.ProtocolPort{{Number: 20880, Protocol: translate.ProtocolDubbo}, {Number: 50051, Protocol: model.ProtocolGRPC}}},
			kept: true,
			want: translate.Sticky{Port: 20880, Protocol: translate.ProtocolDubbo, ProtocolPorts: []translate.ProtocolPort{{Number: 20880, Protocol: translate.ProtocolDubbo}, {Number: 50051, Protocol: model.ProtocolGRPC}}}},
		"only port fields are taken from own": {
			own: translate.Sticky{Port: 8080, Protocol: model.ProtocolGRPC, InlineFallback: true, Resolution: model.ResolutionDNS}, want: translate.Sticky{Port: 8080, Protocol: model.ProtocolGRPC}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := hostPorts(tc.own, tc.declared, tc.host, tc.kept)
			if got.Port != tc.want.Port || got.Protocol != tc.want.Protocol || !slices.Equal(got.ProtocolPorts, tc.want.ProtocolPorts) ||
				got.InlineFallback || got.Resolution != "" || got.LabelChanges != nil {
				t.Fatalf("hostPorts = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCompareClaimants(t *testing.T) {
	// Configuration order first, then the service key; the order of
	// arrival plays no part.
	got := []claimant{{rank: 1, registry: "a", service: registries.ServiceKey{Name: "web"}}, {rank: 0, registry: "b", service: registries.ServiceKey{Name: "web"}},
		{rank: 0, registry: "b", service: registries.ServiceKey{Name: "Web"}}, {rank: 0, registry: "b", service: registries.ServiceKey{Name: "a-web"}}}
	slices.SortFunc(got, compareClaimants)
	want := []claimant{{rank: 0, registry: "b", service: registries.ServiceKey{Name: "Web"}}, {rank: 0, registry: "b", service: registries.ServiceKey{Name: "a-web"}},
		{rank: 0, registry: "b", service: registries.ServiceKey{Name: "web"}}, {rank: 1, registry: "a", service: registries.ServiceKey{Name: "web"}}}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestMergeConflict(t *testing.T) {
	port := func(n uint32, proto string) *networking.ServicePort {
		return &networking.ServicePort{Number: n, Protocol: proto, Name: strings.ToLower(proto) + "-x"}
	}
	cases := map[string]struct {
		ours, theirs []*networking.ServicePort
		conflict     bool
	}{
		"same port and protocol": {ours: []*networking.ServicePort{port(8080, "GRPC")}, theirs: []*networking.ServicePort{port(8080, "GRPC")}},
		"shared ports agree, the primary ports differ": {
			ours:   []*networking.ServicePort{port(8080, "GRPC"), port(9090, "HTTP")},
			theirs: []*networking.ServicePort{port(9090, "HTTP")}},
		"a shared port disagrees": {
			ours:   []*networking.ServicePort{port(8080, "GRPC"), port(9090, "HTTP")},
			theirs: []*networking.ServicePort{port(9090, "GRPC")}, conflict: true},
		"no shared port, same protocol": {
			ours: []*networking.ServicePort{port(8080, "HTTP")}, theirs: []*networking.ServicePort{port(7070, "HTTP")}},
		"no shared port, another protocol": {
			ours: []*networking.ServicePort{port(8080, "GRPC")}, theirs: []*networking.ServicePort{port(9090, "HTTP")}, conflict: true},
		"nothing known of theirs": {ours: []*networking.ServicePort{port(8080, "GRPC")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := mergeConflict(tc.ours, tc.theirs); (got != "") != tc.conflict {
				t.Fatalf("conflict %q, want one: %v", got, tc.conflict)
			}
		})
	}
}

func TestDecideSnapshot(t *testing.T) {
	inst := []registries.Instance{{ID: "1", Address: "10.0.0.1", Port: 80}}
	read := registries.Snapshot{Service: registries.Service{Name: "web", Instances: inst}}
	empty := registries.Snapshot{Service: registries.Service{Name: "web"}}
	removed := registries.Snapshot{Service: registries.Service{Name: "web"}, Removed: true}
	relisted := func(s registries.Snapshot) registries.Snapshot { s.Relist = true; return s }
	failed := registries.Snapshot{Service: registries.Service{Name: "web"}, Err: errors.New("timeout")}
	cases := map[string]struct {
		snap                      registries.Snapshot
		serves, guarded, holdDown bool
		want                      snapshotAction
	}{
		"a read error keeps last-known-good":                {snap: failed, serves: true, guarded: true, holdDown: true, want: actReadError},
		"instances apply":                                   {snap: read, serves: true, holdDown: true, want: actApply},
		"a stable registry's disappearance applies at once": {snap: empty, serves: true, holdDown: true, want: actApply},
		"a disappearance after a reconnection is held down": {snap: relisted(empty), serves: true, holdDown: true, want: actHoldDown},
		"a removal after a reconnection is held down":       {snap: relisted(removed), serves: true, holdDown: true, want: actHoldDown},
		"no hold-down configured":                           {snap: relisted(removed), serves: true, want: actApply},
		"nothing served: nothing to hold":                   {snap: relisted(removed), holdDown: true, want: actApply},
		"the delete guard holds the removal":                {snap: removed, serves: true, guarded: true, holdDown: true, want: actGuarded},
		"a guarded service that is back applies":            {snap: read, serves: true, guarded: true, want: actApply},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := decideSnapshot(tc.snap, tc.serves, tc.guarded, tc.holdDown); got != tc.want {
				t.Fatalf("action %d, want %d", got, tc.want)
			}
		})
	}
}

func TestJudgeListing(t *testing.T) {
	p := OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 2}
	p2 := OutagePolicy{MaxDeleteRatio: 0.2, DeleteGuardFloor: 2}
	// "g/x" is service x of the listing scope "g/" (namespace g, group G);
	// the others are of no scope.
	key := func(s string) registries.ServiceKey {
		if name, ok := strings.CutPrefix(s, "g/"); ok {
			return registries.ServiceKey{Namespace: "g", Group: "G", Name: name}
		}
		return registries.ServiceKey{Name: s}
	}
	show := func(keys []registries.ServiceKey) []string {
		var out []string
		for _, k := range keys {
			out = append(out, strings.TrimPrefix(k.Namespace+"/", "/")+k.Name)
		}
		return out
	}
	set := func(keys ...string) map[registries.ServiceKey]bool {
		m := map[registries.ServiceKey]bool{}
		for _, k := range keys {
			m[key(k)] = true
		}
		return m
	}
	listed := set
	services := map[registries.ServiceKey]int{key("a"): 2, key("b"): 2, key("c"): 2, key("g/x"): 3}
	scopes := map[string]registries.Scope{"": {}, "g/": registries.ScopeOf("g", "G")}
	cases := map[string]struct {
		policy   OutagePolicy
		judged   bool
		scope    string
		listed   map[registries.ServiceKey]bool
		held     map[registries.ServiceKey]bool
		wantBack []string
		wantHold []string
		wantLost int
	}{
		"a small removal passes":                {policy: p, judged: true, listed: listed("a", "b", "g/x"), wantHold: nil},
		"most of the registry is held":          {policy: p, judged: true, listed: listed("a"), wantHold: []string{"b", "c", "g/x"}, wantLost: 7},
		"not before the first complete listing": {policy: p, listed: listed("a")},
		"guard off":                             {policy: OutagePolicy{}, judged: true, listed: listed()},
		"within the floor":                      {policy: OutagePolicy{MaxDeleteRatio: 0.1, DeleteGuardFloor: 3}, judged: true, listed: listed("a", "b", "g/x")},
		"a scope judges its own services only":  {policy: p2, judged: true, scope: "g/", listed: listed(), wantHold: []string{"g/x"}, wantLost: 3},
		"held services listed again come back": {policy: p, judged: true, listed: listed("a", "b", "c", "g/x"), held: set("b", "c"),
			wantBack: []string{"b", "c"}},
		"held services are not held twice": {policy: p2, judged: true, listed: listed("a"), held: set("b", "c"),
			wantHold: []string{"g/x"}, wantLost: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := judgeListing(tc.policy, tc.judged, scopes[tc.scope], tc.listed, services, tc.held, 9)
			if !slices.Equal(show(j.back), tc.wantBack) || !slices.Equal(show(j.hold), tc.wantHold) || j.lost != tc.wantLost {
				t.Fatalf("judgement %+v, want back %v hold %v lost %d", j, tc.wantBack, tc.wantHold, tc.wantLost)
			}
		})
	}
}

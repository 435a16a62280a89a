package gen

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/model"
)

// localityEndpoints are the endpoints of the locality tests: several
// localities of three regions, one endpoint each (two in r1/z2, on their
// own ports of one machine), tier gold but one.
func localityEndpoints() []*model.Endpoint {
	at := func(addr string, port uint32, loc, tier string) *model.Endpoint {
		e := ep(addr, 80, loc)
		e.EndpointPort = port
		e.Labels = map[string]string{"tier": tier, "app": "a"}
		return e
	}
	return []*model.Endpoint{
		at("10.0.0.1", 80, "r1/z1/s1", "gold"),
		at("10.0.0.2", 80, "r1/z1/s2", "silver"),
		at("10.0.0.3", 8081, "r1/z2", "gold"),
		at("10.0.0.3", 8082, "r1/z2", "gold"),
		at("10.0.0.4", 80, "r2/z1", "gold"),
		at("10.0.0.5", 80, "r3/z1", "gold"),
	}
}

// at returns the LocalityLbEndpoints of loc ("region/zone/subzone") at
// priority 0 of one weight-1 endpoint per "address[:port]" (port 80 when
// none), weighted by their count.
func at(loc string, addrs ...string) *endpoint.LocalityLbEndpoints {
	var lbs []*endpoint.LbEndpoint
	for _, a := range addrs {
		host, port, ok := strings.Cut(a, ":")
		p := uint64(80)
		if ok {
			p, _ = strconv.ParseUint(port, 10, 32)
		}
		lbs = append(lbs, lbEndpoint(host, uint32(p), 1))
	}
	r, z, s := wire.SplitLocality(loc)
	return locality(r, z, s, uint32(len(lbs)), lbs...)
}

// TestLocalityLoadBalancing: a DestinationRule's localityLbSetting gives
// each client the assignment of where it runs, as istiod builds a
// proxy's (ApplyLocalityLoadBalancer): failover priorities by locality
// (with outlier detection only), failover regions, failoverPriority
// labels (a client's labels and its locality's topology labels), and
// distribute weights; a client without locality or labels gets the
// resource's own form; a cluster without locality load balancing gets one
// form for every client.
func TestLocalityLoadBalancing(t *testing.T) {
	const name = "outbound|80||a.local"
	outliers := &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)}
	setting := func(s *networking.LocalityLoadBalancerSetting) *networking.LoadBalancerSettings {
		return &networking.LoadBalancerSettings{LocalityLbSetting: s}
	}
	type client struct {
		locality string
		labels   map[string]string
		want     []*endpoint.LocalityLbEndpoints
	}
	r1z1s1 := at("r1/z1/s1", "10.0.0.1")
	r1z1s2 := at("r1/z1/s2", "10.0.0.2")
	r1z2 := at("r1/z2", "10.0.0.3:8081", "10.0.0.3:8082")
	r2 := at("r2/z1", "10.0.0.4")
	r3 := at("r3/z1", "10.0.0.5")
	prio := func(l *endpoint.LocalityLbEndpoints, p uint32) *endpoint.LocalityLbEndpoints {
		c := proto.Clone(l).(*endpoint.LocalityLbEndpoints)
		c.Priority = p
		return c
	}
	weighted := func(l *endpoint.LocalityLbEndpoints, w uint32) *endpoint.LocalityLbEndpoints {
		c := proto.Clone(l).(*endpoint.LocalityLbEndpoints)
		c.LoadBalancingWeight = wrapperspb.UInt32(w)
		return c
	}
	plain := []*endpoint.LocalityLbEndpoints{r1z1s1, r1z1s2, r1z2, r2, r3}
	for _, tc := range []struct {
		name    string
		policy  *networking.TrafficPolicy
		clients []client // nil: one form for every client (not Localized)
	}{
		{name: "no setting, no outlier detection", policy: &networking.TrafficPolicy{}},
		{name: "failover without outlier detection does nothing", policy: &networking.TrafficPolicy{
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{
				Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "r1", To: "r2"}}})}},
		{name: "disabled", policy: &networking.TrafficPolicy{OutlierDetection: outliers,
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(false)})}},
		{name: "outlier detection: priorities by locality", policy: &networking.TrafficPolicy{OutlierDetection: outliers},
			clients: []client{
				{locality: "r1/z1/s1", want: []*endpoint.LocalityLbEndpoints{r1z1s1, prio(r1z1s2, 1), prio(r1z2, 2), prio(r2, 3), prio(r3, 3)}},
				{locality: "r1/z2", want: []*endpoint.LocalityLbEndpoints{r1z2, prio(r1z1s1, 1), prio(r1z1s2, 1), prio(r2, 2), prio(r3, 2)}},
				{locality: "r2", want: []*endpoint.LocalityLbEndpoints{prio(r2, 0), prio(r1z1s1, 1), prio(r1z1s2, 1), prio(r1z2, 1), prio(r3, 1)}},
				{locality: "r9/z1", want: plain},
				{want: plain},
			}},
		{name: "failover regions", policy: &networking.TrafficPolicy{OutlierDetection: outliers,
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{
				Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "r1", To: "r3"}}})},
			clients: []client{
				{locality: "r1/z1/s1", want: []*endpoint.LocalityLbEndpoints{r1z1s1, prio(r1z1s2, 1), prio(r1z2, 2), prio(r3, 3), prio(r2, 4)}},
				{locality: "r2/z1", want: []*endpoint.LocalityLbEndpoints{r2, prio(r1z1s1, 1), prio(r1z1s2, 1), prio(r1z2, 1), prio(r3, 1)}},
			}},
		{name: "failoverPriority label", policy: &networking.TrafficPolicy{OutlierDetection: outliers,
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"tier"}})},
			clients: []client{
				{locality: "r2/z1", labels: map[string]string{"tier": "gold"},
					want: []*endpoint.LocalityLbEndpoints{r1z1s1, r1z2, r2, r3, prio(r1z1s2, 1)}},
				{labels: map[string]string{"tier": "silver"},
					want: []*endpoint.LocalityLbEndpoints{r1z1s2, prio(r1z1s1, 1), prio(r1z2, 1), prio(r2, 1), prio(r3, 1)}},
				{labels: map[string]string{"tier": "bronze"}, want: plain},
				// Only the locality: its topology labels are labels, so
				// the client's tier is "".
				{locality: "r1", want: plain},
				{want: plain},
			}},
		{name: "failoverPriority topology label, then a label", policy: &networking.TrafficPolicy{OutlierDetection: outliers,
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{
				FailoverPriority: []string{"topology.kubernetes.io/region", "tier"}})},
			clients: []client{
				{locality: "r1/z9", labels: map[string]string{"tier": "gold"},
					want: []*endpoint.LocalityLbEndpoints{r1z1s1, r1z2, prio(r1z1s2, 1), prio(r2, 2), prio(r3, 2)}},
			}},
		{name: "failoverPriority with a fixed value and failover regions", policy: &networking.TrafficPolicy{OutlierDetection: outliers,
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"tier=silver"},
				Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "r1", To: "r3"}}})},
			clients: []client{
				// tier=silver first, then by locality: silver×s2 is 0;
				// gold: s1 (same subzone), r1/z2, r3 (failover), r2.
				{locality: "r1/z1/s2", labels: map[string]string{"tier": "gold"},
					want: []*endpoint.LocalityLbEndpoints{r1z1s2, prio(r1z1s1, 1), prio(r1z2, 2), prio(r3, 3), prio(r2, 4)}},
			}},
		{name: "distribute", policy: &networking.TrafficPolicy{
			LoadBalancer: setting(&networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
				{From: "r1/z1/*", To: map[string]uint32{"r1/z1/*": 80, "r2/*": 20}},
				{From: "r3", To: map[string]uint32{"r1/*": 30, "r1/z2": 70}},
			}})},
			clients: []client{
				{locality: "r1/z1/s2", want: []*endpoint.LocalityLbEndpoints{weighted(r1z1s1, 40), weighted(r1z1s2, 40), weighted(r2, 20)}},
				// The most specific entry counts: r1/z2 is 70, the
				// rest of r1 shares 30 by its weights.
				{locality: "r3/z1", want: []*endpoint.LocalityLbEndpoints{weighted(r1z1s1, 15), weighted(r1z1s2, 15), weighted(r1z2, 70)}},
				{locality: "r2/z1", want: plain},
				{want: plain},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := grpcService("a.local", 80)
			svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: tc.policy}
			res := encodeEveryPort(svc, encodeEach(localityEndpoints()))[name]
			if tc.clients == nil {
				if _, ok := res.(*Localized); ok {
					t.Fatalf("a Localized assignment, want one form for every client")
				}
				assertEncodes(t, &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: plain}, res)
				return
			}
			l, ok := res.(*Localized)
			if !ok {
				t.Fatalf("a %T, want a Localized assignment", res)
			}
			if own := l.Form(l.FormKey("", nil)); !bytes.Equal(l.Encoding(), own) {
				t.Errorf("the own encoding is not the form of a client without locality or labels")
			}
			for _, c := range tc.clients {
				want := &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: c.want}
				wire := l.Form(l.FormKey(c.locality, c.labels))
				assertForm(t, want, wire, c.locality, c.labels)
			}
		})
	}
}

// assertForm checks that wire is proto.Marshal's encoding of want.
func assertForm(t *testing.T, want *endpoint.ClusterLoadAssignment, wire []byte, locality string, labels map[string]string) {
	t.Helper()
	wantBytes, err := cachev3.MarshalResource(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wire, wantBytes) {
		got := &endpoint.ClusterLoadAssignment{}
		if err := proto.Unmarshal(wire, got); err != nil {
			t.Fatalf("client %q %v: %v", locality, labels, err)
		}
		t.Errorf("client %q %v:", locality, labels)
		assertEqual(t, want, got)
	}
}

// TestLocalizedForms: clients whose keys are equal are sent equal forms;
// SameForms tells a changed setting or changed labels that matter from an
// equal rebuild.
func TestLocalizedForms(t *testing.T) {
	build := func(priorities []string, eps []*model.Endpoint) *Localized {
		svc := grpcService("a.local", 80)
		svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
			OutlierDetection: &networking.OutlierDetection{},
			LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
				FailoverPriority: priorities}}}}
		var res types.Resource = encodeEveryPort(svc, encodeEach(eps))["outbound|80||a.local"]
		return res.(*Localized)
	}
	a := build([]string{"tier"}, localityEndpoints())
	if !a.SameForms(build([]string{"tier"}, localityEndpoints())) {
		t.Errorf("an equal rebuild is not SameForms")
	}
	if a.SameForms(build([]string{"app"}, localityEndpoints())) {
		t.Errorf("another failoverPriority is SameForms")
	}
	relabelled := localityEndpoints()
	relabelled[0].Labels = map[string]string{"tier": "silver", "app": "a"}
	if a.SameForms(build([]string{"tier"}, relabelled)) {
		t.Errorf("a changed tier is SameForms")
	}
	// Labels other than the failoverPriority ones do not name the form.
	if a.FormKey("r1", map[string]string{"tier": "gold", "pod": "x"}) != a.FormKey("r1", map[string]string{"tier": "gold", "pod": "y"}) {
		t.Errorf("a label failoverPriority does not name changes the key")
	}
	if a.FormKey("r1", map[string]string{"tier": "gold"}) == a.FormKey("r2", map[string]string{"tier": "gold"}) {
		t.Errorf("two localities share a key")
	}
	if a.FormKey("", map[string]string{}) != a.FormKey("", nil) {
		t.Errorf("no labels and empty labels differ")
	}
	if a.FormKey("", map[string]string{"x": "y"}) == a.FormKey("", nil) {
		t.Errorf("a client with labels shares the key of one without (istiod prioritizes only a client with labels)")
	}
}

// TestLocalityFailoverOfOneLocality: failover by locality over endpoints
// of one locality sends every client the plain assignment, so it is not
// Localized; failoverPriority labels still split it.
func TestLocalityFailoverOfOneLocality(t *testing.T) {
	eps := []*model.Endpoint{ep("10.0.0.1", 80, "r1/z1"), ep("10.0.0.2", 80, "r1/z1")}
	eps[0].Labels = map[string]string{"tier": "gold"}
	for _, tc := range []struct {
		priorities []string
		localized  bool
	}{{nil, false}, {[]string{"tier"}, true}} {
		svc := grpcService("a.local", 80)
		svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
			OutlierDetection: &networking.OutlierDetection{},
			LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
				FailoverPriority: tc.priorities, Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "r2", To: "r3"}}}}}}
		res := encodeEveryPort(svc, encodeEach(eps))["outbound|80||a.local"]
		if _, ok := res.(*Localized); ok != tc.localized {
			t.Errorf("failoverPriority %v: Localized %v, want %v", tc.priorities, ok, tc.localized)
		}
	}
}

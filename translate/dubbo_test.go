package translate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// TestDubboPorts: a service with a port per protocol (a Dubbo service, as
// package registries/dubbo delivers it) has one ServiceEntry port per
// protocol, each instance mapped to its own port of that protocol; a
// protocol keeps its number while served.
func TestDubboPorts(t *testing.T) {
	both := func(id, addr string, dubbo, tri uint32) registries.Instance {
		return registries.Instance{ID: id, Address: addr, Port: min(dubbo, tri), Protocol: "dubbo",
			Extra: &registries.InstanceExtra{Ports: []registries.Port{{Number: dubbo, Protocol: "dubbo"}, {Number: tri, Protocol: "tri"}}}}
	}
	type port struct {
		Name   string
		Number uint32
	}
	for _, tc := range []struct {
		name      string
		prev      Sticky
		instances []registries.Instance
		wantPorts []port
		wantMaps  map[string]map[string]uint32 // by address
	}{
		{
			name:      "one protocol",
			instances: []registries.Instance{inst("a", "10.0.0.1", 20880, "dubbo"), inst("b", "10.0.0.2", 20881, "dubbo")},
			wantPorts: []port{{"tcp-dubbo-20880", 20880}},
			wantMaps:  map[string]map[string]uint32{"10.0.0.1": nil, "10.0.0.2": {"tcp-dubbo-20880": 20881}},
		},
		{
			name:      "dubbo and tri on one process",
			instances: []registries.Instance{both("a", "10.0.0.1", 20880, 50051), both("b", "10.0.0.2", 20881, 50052)},
			wantPorts: []port{{"tcp-dubbo-20880", 20880}, {"grpc-50051", 50051}},
			wantMaps: map[string]map[string]uint32{
				"10.0.0.1": nil, "10.0.0.2": {"tcp-dubbo-20880": 20881, "grpc-50051": 50052},
			},
		},
		{
			name:      "tri only",
			instances: []registries.Instance{inst("a", "10.0.0.1", 50051, "tri")},
			wantPorts: []port{{"grpc-50051", 50051}},
			wantMaps:  map[string]map[string]uint32{"10.0.0.1": nil},
		},
		{
			name: "kept numbers win over lower ones",
			prev: Sticky{Port: 20881, Protocol: ProtocolDubbo, ProtocolPorts: []ProtocolPort{
				{Number: 20881, Protocol: ProtocolDubbo}, {Number: 50052, Protocol: model.ProtocolGRPC}}},
			instances: []registries.Instance{both("a", "10.0.0.1", 20880, 50051), both("b", "10.0.0.2", 20881, 50052)},
			wantPorts: []port{{"tcp-dubbo-20881", 20881}, {"grpc-50052", 50052}},
			wantMaps: map[string]map[string]uint32{
				"10.0.0.1": {"tcp-dubbo-20881": 20880, "grpc-50052": 50051}, "10.0.0.2": nil,
			},
		},
		{
			name: "a protocol no longer served loses its port",
			prev: Sticky{Port: 20880, Protocol: ProtocolDubbo, ProtocolPorts: []ProtocolPort{
				{Number: 20880, Protocol: ProtocolDubbo}, {Number: 50051, Protocol: model.ProtocolGRPC}}},
			instances: []registries.Instance{inst("a", "10.0.0.1", 20880, "dubbo")},
			wantPorts: []port{{"tcp-dubbo-20880", 20880}},
			wantMaps:  map[string]map[string]uint32{"10.0.0.1": nil},
		},
		{
			name: "no instance keeps the ports",
			prev: Sticky{Port: 20880, Protocol: ProtocolDubbo, ProtocolPorts: []ProtocolPort{
				{Number: 20880, Protocol: ProtocolDubbo}, {Number: 50051, Protocol: model.ProtocolGRPC}}},
			wantPorts: []port{{"tcp-dubbo-20880", 20880}, {"grpc-50051", 50051}},
		},
		{
			name:      "two protocols on one number: the second takes its next",
			instances: []registries.Instance{inst("a", "10.0.0.1", 20880, "dubbo"), inst("b", "10.0.0.2", 20880, "tri"), inst("c", "10.0.0.3", 20890, "tri")},
			wantPorts: []port{{"tcp-dubbo-20880", 20880}, {"grpc-20890", 20890}},
			wantMaps: map[string]map[string]uint32{
				"10.0.0.1": nil, "10.0.0.2": {"grpc-20890": 20880}, "10.0.0.3": nil,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustNew(t, Options{Registry: "zk", HostTemplate: DefaultHostTemplate})
			svc := registries.Service{Name: "providers:a.B::", Host: "a.B.dubbo", PortPerProtocol: true, Instances: tc.instances}
			res := mustTranslate(t, tr, svc, tc.prev)
			var got []port
			for _, p := range res.ServiceEntry.ServiceEntry().GetPorts() {
				got = append(got, port{p.GetName(), p.GetNumber()})
			}
			if diff := cmp.Diff(tc.wantPorts, got); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			maps := map[string]map[string]uint32{}
			for _, we := range res.WorkloadEntries {
				maps[we.Spec().GetAddress()] = we.Spec().GetPorts()
			}
			if tc.wantMaps == nil {
				tc.wantMaps = map[string]map[string]uint32{}
			}
			if diff := cmp.Diff(tc.wantMaps, maps); diff != "" {
				t.Errorf("WorkloadEntry ports by address (-want +got):\n%s", diff)
			}
			// Translating again with the returned Sticky changes nothing.
			again := mustTranslate(t, tr, svc, res.Sticky)
			if again.ServiceEntry.ContentHash() != res.ServiceEntry.ContentHash() {
				t.Errorf("ServiceEntry changed when translated again with its Sticky")
			}
		})
	}
}

func TestDubboMethodsAnnotation(t *testing.T) {
	tr := mustNew(t, Options{Registry: "zk", HostTemplate: DefaultHostTemplate})
	withMethods := func(id, addr string, methods ...string) registries.Instance {
		i := inst(id, addr, 20880, "dubbo")
		i.Extra = &registries.InstanceExtra{Methods: methods}
		return i
	}
	svc := registries.Service{Name: "providers:a.B::", Host: "a.B.dubbo", PortPerProtocol: true,
		Instances: []registries.Instance{
			withMethods("a", "10.0.0.1", "sayHello", "greet"),
			withMethods("b", "10.0.0.2", "greet", "bye"),
			withMethods("c", "not an address", "hidden"), // rejected: its methods are not served
		}}
	res := mustTranslate(t, tr, svc, Sticky{})
	if got := res.ServiceEntry.Annotations[model.AnnotationDubboMethods]; got != "bye,greet,sayHello" {
		t.Errorf("methods annotation %q, want bye,greet,sayHello", got)
	}
	// A changed method set changes the ServiceEntry's content hash (and
	// so its write and push), though its spec is unchanged.
	svc.Instances[1].Extra = &registries.InstanceExtra{Methods: []string{"greet", "bye", "added"}}
	changed, err := tr.TranslateReusing(svc, res.Sticky, res)
	if err != nil {
		t.Fatal(err)
	}
	if changed.ServiceEntry == res.ServiceEntry || changed.ServiceEntry.ContentHash() == res.ServiceEntry.ContentHash() {
		t.Errorf("a changed method set kept the ServiceEntry (hash %s)", changed.ServiceEntry.ContentHash())
	}
	if got := changed.ServiceEntry.Annotations[model.AnnotationDubboMethods]; got != "added,bye,greet,sayHello" {
		t.Errorf("methods annotation %q after the change", got)
	}
	// Unchanged methods reuse the ServiceEntry.
	same, err := tr.TranslateReusing(svc, changed.Sticky, changed)
	if err != nil || same.ServiceEntry != changed.ServiceEntry {
		t.Errorf("an unchanged Dubbo service did not reuse its ServiceEntry (err %v)", err)
	}
	// A service whose instances declare no methods (every non-Dubbo
	// service: only package registries/dubbo fills InstanceExtra.Methods)
	// never carries the annotation.
	plain := mustTranslate(t, tr, registries.Service{Name: "web", Instances: []registries.Instance{inst("a", "10.0.0.1", 8080, "http")}}, Sticky{})
	if _, ok := plain.ServiceEntry.Annotations[model.AnnotationDubboMethods]; ok {
		t.Errorf("a service without methods got a methods annotation")
	}
}

func TestJoinMethods(t *testing.T) {
	for _, tc := range []struct {
		methods []string
		limit   int
		want    string
	}{
		{[]string{"a", "b"}, 100, "a,b"},
		{[]string{"alpha", "beta", "gamma"}, 16, "alpha,beta,gamma"},
		{[]string{"alpha", "beta", "gamma", "delta", "epsilon"}, 24, "alpha,beta,...(+3 more)"},
		{[]string{"alpha", "beta", "gamma", "delta"}, 20, "alpha,...(+3 more)"},
		{[]string{"alpha", "beta", "gamma", "delta"}, 12, "...(+4 more)"},
	} {
		got := joinMethods(tc.methods, tc.limit)
		if got != tc.want || len(got) > max(tc.limit, len(tc.want)) {
			t.Errorf("joinMethods(%v, %d) = %q, want %q", tc.methods, tc.limit, got, tc.want)
		}
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = "method" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
	}
	if got := joinMethods(many, MaxDubboMethodsBytes); len(got) > MaxDubboMethodsBytes || !strings.HasSuffix(got, " more)") {
		t.Errorf("1,000 methods: %d bytes ending %q", len(got), got[max(0, len(got)-20):])
	}
}

func TestMalformedInstanceIsRejected(t *testing.T) {
	tr := mustNew(t, Options{Registry: "zk", HostTemplate: DefaultHostTemplate})
	res := mustTranslate(t, tr, registries.Service{Name: "providers:a.B::", Host: "a.B.dubbo", PortPerProtocol: true,
		Instances: []registries.Instance{inst("ok", "10.0.0.1", 20880, "dubbo"), registries.InvalidInstance("raw%20url", "no port")}}, Sticky{})
	want := []Rejection{{InstanceID: "raw%20url", Reason: RejectMalformed, Detail: "no port"}}
	if diff := cmp.Diff(want, res.Rejected); diff != "" || len(res.WorkloadEntries) != 1 {
		t.Errorf("rejections (-want +got):\n%s\nWorkloadEntries: %d, want 1", diff, len(res.WorkloadEntries))
	}
}

// TestDubboDefaultsAnnotation: the call defaults a Dubbo service's
// providers declare become meshbridge.io/dubbo-defaults: for each, the
// value most providers declare (ties: the longer timeout, the fewer
// retries), values that do not parse left out; none without any.
func TestDubboDefaultsAnnotation(t *testing.T) {
	tr := mustNew(t, Options{Registry: "zk", HostTemplate: DefaultHostTemplate})
	declaring := func(id, addr string, d registries.ProviderDefaults) registries.Instance {
		i := inst(id, addr, 20880, "dubbo")
		i.Extra = &registries.InstanceExtra{Defaults: d}
		return i
	}
	cases := map[string]struct {
		defaults []registries.ProviderDefaults
		want     string // "" no annotation
	}{
		"one provider": {defaults: []registries.ProviderDefaults{{Timeout: "200", Retries: "2", LoadBalance: "leastactive"}},
			want: "timeout=200ms,retries=2,loadbalance=leastactive"},
		"the most common; ties: the longer timeout, the fewer retries": {defaults: []registries.ProviderDefaults{
			{Timeout: "200", Retries: "3"}, {Timeout: "500", Retries: "1"}, {Timeout: "200", Retries: "1"},
			{Timeout: "500", Retries: "3", LoadBalance: "RoundRobin"}},
			want: "timeout=500ms,retries=1,loadbalance=roundrobin"},
		"values that do not parse are left out": {defaults: []registries.ProviderDefaults{{Timeout: "2s", Retries: "-1"},
			{Timeout: "0"}}},
		"nothing declared": {defaults: []registries.ProviderDefaults{{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := registries.Service{Name: "providers:a.B::", Host: "a.B.dubbo", PortPerProtocol: true}
			for i, d := range tc.defaults {
				svc.Instances = append(svc.Instances, declaring(fmt.Sprint(i), fmt.Sprintf("10.0.0.%d", i+1), d))
			}
			res := mustTranslate(t, tr, svc, Sticky{})
			got, ok := res.ServiceEntry.Annotations[model.AnnotationDubboDefaults]
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("annotation %q (present %v), want %q", got, ok, tc.want)
			}
		})
	}
}

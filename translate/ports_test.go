package translate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// TestPortsStick runs a service through successive Translate calls, passing
// Sticky along as the caller does, and checks the ServiceEntry port after each.
func TestPortsStick(t *testing.T) {
	type step struct {
		instances []registries.Instance
		wantPort  uint32 // 0: no ServiceEntry
		wantName  string
		wantProto model.Protocol // Istio protocol on the ServiceEntry port
		wantKept  Sticky
	}
	cases := map[string]struct {
		opts  Options
		ports []registries.Port
		steps []step
	}{
		"ports stick to the lowest port seen after that instance leaves, the protocol follows those left": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 9090, "http"), inst("b", "10.0.0.2", 8080, "grpc")},
					8080, "grpc-8080", model.ProtocolGRPC, Sticky{Port: 8080, Protocol: model.ProtocolGRPC}},
				{[]registries.Instance{inst("a", "10.0.0.1", 9090, "http")},
					8080, "http-8080", model.ProtocolHTTP, Sticky{Port: 8080, Protocol: model.ProtocolHTTP}},
			},
		},
		"a lower port appearing later does not move the port": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 9090, "http")}, 9090, "http-9090", model.ProtocolHTTP, Sticky{Port: 9090, Protocol: model.ProtocolHTTP}},
				{[]registries.Instance{inst("a", "10.0.0.1", 9090, "http"), inst("b", "10.0.0.2", 80, "grpc")},
					9090, "http-9090", model.ProtocolHTTP, Sticky{Port: 9090, Protocol: model.ProtocolHTTP}},
			},
		},
		"zero instances keep the service entry and its port": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "http")}, 8080, "http-8080", model.ProtocolHTTP, Sticky{Port: 8080, Protocol: model.ProtocolHTTP}},
				{nil, 8080, "http-8080", model.ProtocolHTTP, Sticky{Port: 8080, Protocol: model.ProtocolHTTP}},
			},
		},
		"no service entry before any port is known": {
			steps: []step{
				{nil, 0, "", "", Sticky{}},
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "")}, 8080, "tcp-8080", model.ProtocolTCP, Sticky{Port: 8080, Protocol: model.ProtocolTCP}},
			},
		},
		"the protocol follows the instances: one that starts declaring http turns the port http, and back": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "")}, 8080, "tcp-8080", model.ProtocolTCP, Sticky{Port: 8080, Protocol: model.ProtocolTCP}},
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "http")}, 8080, "http-8080", model.ProtocolHTTP, Sticky{Port: 8080, Protocol: model.ProtocolHTTP}},
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "")}, 8080, "tcp-8080", model.ProtocolTCP, Sticky{Port: 8080, Protocol: model.ProtocolTCP}},
			},
		},
		"a newcomer declaring a protocol turns the port to it": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "")}, 8080, "tcp-8080", model.ProtocolTCP, Sticky{Port: 8080, Protocol: model.ProtocolTCP}},
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, ""), inst("b", "10.0.0.2", 8080, "grpc")},
					8080, "grpc-8080", model.ProtocolGRPC, Sticky{Port: 8080, Protocol: model.ProtocolGRPC}},
			},
		},
		"servicePort wins over instance ports": {
			opts: Options{ServicePort: 80},
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "http")}, 80, "http-80", model.ProtocolHTTP, Sticky{Port: 80, Protocol: model.ProtocolHTTP}},
			},
		},
		"servicePort with no instance is a provisional tcp port decided by the first instance": {
			opts: Options{ServicePort: 80},
			steps: []step{
				{nil, 80, "tcp-80", model.ProtocolTCP, Sticky{Port: 80, Protocol: ""}},
				{[]registries.Instance{inst("a", "10.0.0.1", 8080, "grpc")}, 80, "grpc-80", model.ProtocolGRPC, Sticky{Port: 80, Protocol: model.ProtocolGRPC}},
			},
		},
		"protocol comes from the instance that owns the port": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 9090, "http"), inst("b", "10.0.0.2", 8080, "http2")},
					8080, "http2-8080", model.ProtocolHTTP2, Sticky{Port: 8080, Protocol: model.ProtocolHTTP2}},
			},
		},
		"dubbo names a tcp-dubbo port, kept while the service has no instance": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 20880, "dubbo")}, 20880, "tcp-dubbo-20880", model.ProtocolTCP, Sticky{Port: 20880, Protocol: ProtocolDubbo}},
				{nil, 20880, "tcp-dubbo-20880", model.ProtocolTCP, Sticky{Port: 20880, Protocol: ProtocolDubbo}},
				{[]registries.Instance{inst("b", "10.0.0.2", 20880, "")}, 20880, "tcp-20880", model.ProtocolTCP, Sticky{Port: 20880, Protocol: model.ProtocolTCP}},
			},
		},
		"unknown protocol names a tcp port": {
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 6379, "redis")}, 6379, "tcp-6379", model.ProtocolTCP, Sticky{Port: 6379, Protocol: model.ProtocolTCP}},
			},
		},
		"declared ports win over instances": {
			ports: []registries.Port{{Number: 9000, Protocol: "grpc"}, {Number: 8000, Protocol: "HTTP"}},
			steps: []step{
				{[]registries.Instance{inst("a", "10.0.0.1", 7000, "tcp")}, 8000, "http-8000", model.ProtocolHTTP, Sticky{Port: 8000, Protocol: model.ProtocolHTTP}},
			},
		},
		"invalid instances do not choose the port": {
			opts: Options{Resolution: model.ResolutionStatic},
			steps: []step{
				{[]registries.Instance{inst("a", "db.example.com", 80, "http"), inst("b", "10.0.0.2", 8080, "grpc")},
					8080, "grpc-8080", model.ProtocolGRPC, Sticky{Port: 8080, Protocol: model.ProtocolGRPC}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := mustNew(t, tc.opts)
			var kept Sticky
			for i, s := range tc.steps {
				res := mustTranslate(t, tr, registries.Service{Name: "svc", Ports: tc.ports, Instances: s.instances}, kept)
				kept = res.Sticky
				if res.Sticky.Port != s.wantKept.Port || res.Sticky.Protocol != s.wantKept.Protocol {
					t.Errorf("step %d: Sticky = %+v, want %+v", i, res.Sticky, s.wantKept)
				}
				if s.wantPort == 0 {
					if res.ServiceEntry != nil {
						t.Errorf("step %d: ServiceEntry = %v, want none", i, res.ServiceEntry.Spec)
					}
					continue
				}
				if res.ServiceEntry == nil {
					t.Fatalf("step %d: no ServiceEntry", i)
				}
				p := res.ServiceEntry.ServiceEntry().GetPorts()[0]
				if p.GetNumber() != s.wantPort || p.GetName() != s.wantName || p.GetProtocol() != string(s.wantProto) {
					t.Errorf("step %d: port = %v, want %d %s %s", i, p, s.wantPort, s.wantName, s.wantProto)
				}
			}
		})
	}
}

// TestServiceEntryStableWhenOnlyInstancesChange pins the incremental-EDS
// contract: in workloadentry mode, once the port is chosen, the ServiceEntry's
// spec, labels and content hash do not change as instances come and go on
// any port, as long as those that declare a protocol declare the same one
// (rule 3: the protocol follows the instances).
func TestServiceEntryStableWhenOnlyInstancesChange(t *testing.T) {
	tr := mustNew(t, Options{HostTemplate: DefaultHostTemplate})
	sets := [][]registries.Instance{
		{inst("a", "10.0.0.1", 8080, "grpc")},
		{inst("a", "10.0.0.1", 8080, "grpc"), inst("b", "10.0.0.2", 8081, "grpc")},
		{inst("b", "10.0.0.2", 8081, "grpc"), inst("c", "10.0.0.3", 7000, "")},
		nil,
		{inst("d", "10.0.0.4", 9000, "grpc")},
	}
	var first *model.Config
	var kept Sticky
	for i, insts := range sets {
		res := mustTranslate(t, tr, registries.Service{Name: "svc", Instances: insts}, kept)
		kept = res.Sticky
		if first == nil {
			first = res.ServiceEntry
			continue
		}
		if diff := cmp.Diff(first.Spec, res.ServiceEntry.Spec, protocmp.Transform()); diff != "" {
			t.Errorf("set %d: ServiceEntry spec changed (-first +now):\n%s", i, diff)
		}
		if diff := cmp.Diff(first.Meta, res.ServiceEntry.Meta); diff != "" {
			t.Errorf("set %d: ServiceEntry metadata changed (-first +now):\n%s", i, diff)
		}
	}
}

func TestTargetPorts(t *testing.T) {
	tr := mustNew(t, Options{HostTemplate: DefaultHostTemplate})
	res := mustTranslate(t, tr, registries.Service{Name: "svc", Instances: []registries.Instance{
		inst("a", "10.0.0.1", 8080, "grpc"), inst("b", "10.0.0.2", 9090, "grpc"),
	}}, Sticky{})
	want := map[string]map[string]uint32{"10.0.0.1": nil, "10.0.0.2": {"grpc-8080": 9090}}
	for _, we := range res.WorkloadEntries {
		spec := we.Spec()
		if diff := cmp.Diff(want[spec.GetAddress()], spec.GetPorts()); diff != "" {
			t.Errorf("%s ports (-want +got):\n%s", spec.GetAddress(), diff)
		}
	}
}

func TestDeclaredPortErrors(t *testing.T) {
	tr := mustNew(t, Options{HostTemplate: DefaultHostTemplate})
	_, err := tr.Translate(registries.Service{Name: "web.local", Ports: []registries.Port{{Number: 0}}}, Sticky{})
	if err == nil {
		t.Fatal("declared port 0 accepted")
	}
}

func TestPortName(t *testing.T) {
	cases := map[string]struct {
		registry string
		want     string
		istio    string
	}{
		"http":                        {"http", "http-80", "HTTP"},
		"http2":                       {"HTTP2", "http2-80", "HTTP2"},
		"grpc":                        {"grpc", "grpc-80", "GRPC"},
		"tcp":                         {"tcp", "tcp-80", "TCP"},
		"https is passed-through TLS": {"https", "https-80", "HTTPS"},
		"tls is https":                {"TLS", "https-80", "HTTPS"},
		"dubbo is tcp-dubbo":          {"dubbo", "tcp-dubbo-80", "TCP"},
		"empty is tcp":                {"", "tcp-80", "TCP"},
		"unknown is tcp":              {"thrift", "tcp-80", "TCP"},
		"case does not matter":        {"GrPc", "grpc-80", "GRPC"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := servicePort(ParseProtocol(tc.registry), 80)
			want := &networking.ServicePort{Number: 80, Name: tc.want, Protocol: tc.istio}
			if diff := cmp.Diff(want, p, protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"
)

// The references each encoder is held to.

// marshal is the deterministic proto marshal, as the content hash and the
// xDS caches use it.
func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// objectJSON is an object's JSON as translate.ToJSON renders one item:
// compact protojson spec inside encoding/json.
func objectJSON(apiVersion, kind, name, namespace string, labels, annotations map[string]string, spec proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	type meta struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	return json.Marshal(struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   meta            `json:"metadata"`
		Spec       json.RawMessage `json:"spec"`
	}{apiVersion, kind, meta{name, namespace, labels, annotations}, compact.Bytes()})
}

// lbEndpointMessage is the message LbEndpoint encodes.
func lbEndpointMessage(address string, port, weight uint32) *endpoint.LbEndpoint {
	return &endpoint.LbEndpoint{
		HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
				Address: address, PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
			}}},
		}},
		HealthStatus:        core.HealthStatus_HEALTHY,
		LoadBalancingWeight: wrapperspb.UInt32(weight),
	}
}

// endpointInput is one LbEndpoint's fields.
type endpointInput struct {
	address      string
	port, weight uint32
}

// loadAssignmentMessage is the message LoadAssignment encodes, from the
// fields of each locality's endpoints.
func loadAssignmentMessage(name string, localities []Locality, inputs [][]endpointInput) *endpoint.ClusterLoadAssignment {
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	for i, l := range localities {
		region, zone, subZone := SplitLocality(l.Name)
		loc := &endpoint.LocalityLbEndpoints{
			Locality:            &core.Locality{Region: region, Zone: zone, SubZone: subZone},
			LoadBalancingWeight: wrapperspb.UInt32(l.Weight),
		}
		for _, in := range inputs[i] {
			loc.LbEndpoints = append(loc.LbEndpoints, lbEndpointMessage(in.address, in.port, in.weight))
		}
		cla.Endpoints = append(cla.Endpoints, loc)
	}
	return cla
}

// checkWorkloadEntry holds AppendWorkloadEntry and WorkloadEntryJSONSize to
// their references for we.
func checkWorkloadEntry(t *testing.T, we *networking.WorkloadEntry) {
	t.Helper()
	want, err := marshal(we)
	got, ok := AppendWorkloadEntry([]byte("prefix"), we)
	switch {
	case ok && err != nil:
		t.Fatalf("AppendWorkloadEntry encoded what the marshal refuses (%v): %v", err, we)
	case ok && !bytes.Equal(got, append([]byte("prefix"), want...)):
		t.Fatalf("AppendWorkloadEntry = %x, want prefix and %x\n%v", got, want, we)
	case !ok && !bytes.Equal(got, []byte("prefix")):
		t.Fatalf("AppendWorkloadEntry declined but appended: %x", got)
	case !ok && err == nil && plainWorkloadEntry(we):
		t.Fatalf("AppendWorkloadEntry declined a plain WorkloadEntry: %v", we)
	}
	checkJSONSize(t, "WorkloadEntry", we, func() (int, bool) { return WorkloadEntryJSONSize(we) })
}

// checkServiceEntry holds ServiceEntryJSONSize to its reference for se.
func checkServiceEntry(t *testing.T, se *networking.ServiceEntry) {
	t.Helper()
	checkJSONSize(t, "ServiceEntry", se, func() (int, bool) { return ServiceEntryJSONSize(se) })
	for _, we := range se.GetEndpoints() {
		checkWorkloadEntry(t, we)
	}
}

// checkJSONSize holds a spec size and ObjectJSONSize to the object's JSON,
// for a few metadata shapes.
func checkJSONSize(t *testing.T, kind string, spec proto.Message, size func() (int, bool)) {
	t.Helper()
	specSize, specOK := size()
	for _, m := range []struct {
		name, namespace     string
		labels, annotations map[string]string
	}{
		{"x.example.com", "mesh", nil, map[string]string{"meshbridge.io/content-hash": strings.Repeat("0", 64)}},
		{"<é>", "", map[string]string{"app.kubernetes.io/managed-by": "meshbridge", "k": "\u2028&"}, map[string]string{"m": "a,<b>,é"}},
	} {
		want, err := objectJSON("networking.istio.io/v1", kind, m.name, m.namespace, m.labels, m.annotations, spec)
		got, ok := ObjectJSONSize("networking.istio.io/v1", kind, m.name, m.namespace, m.labels, m.annotations, specSize)
		ok = ok && specOK
		switch {
		case ok && err != nil:
			t.Fatalf("%s: sized %d where the encoding fails (%v): %v", kind, got, err, spec)
		case ok && got != len(want):
			t.Fatalf("%s: sized %d, encoding takes %d:\n%s", kind, got, len(want), want)
		}
	}
}

// TestAppendWorkloadEntry holds the content hash's WorkloadEntry encoder to
// the deterministic proto marshal it replaces, on hand-picked specs;
// FuzzEncoders and TestEncodersOnRandomInputs add random ones.
func TestAppendWorkloadEntry(t *testing.T) {
	for name, we := range map[string]*networking.WorkloadEntry{
		"empty":                           {},
		"address only":                    {Address: "10.0.0.1"},
		"every field":                     {Address: "10.0.0.1", Ports: map[string]uint32{"grpc-80": 8080, "http-90": 9090}, Labels: map[string]string{"b": "2", "a": "1"}, Network: "n1", Locality: "r/z/s", Weight: 300, ServiceAccount: "sa"},
		"empty map key and values":        {Ports: map[string]uint32{"": 0}, Labels: map[string]string{"": "", "k": ""}},
		"more labels than a group":        {Labels: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9", "j": "10"}},
		"long values need 2-byte lengths": {Labels: map[string]string{"k": strings.Repeat("v", 300)}, Address: strings.Repeat("a", 200)},
		"non-ASCII":                       {Labels: map[string]string{"ключ": "значение"}, Locality: "zürich"},
		"max weight and port":             {Weight: math.MaxUint32, Ports: map[string]uint32{"p": math.MaxUint32}},
	} {
		t.Run(name, func(t *testing.T) {
			if !plainWorkloadEntry(we) {
				t.Fatal("not plain")
			}
			checkWorkloadEntry(t, we)
		})
	}
	if _, ok := AppendWorkloadEntry(nil, &networking.WorkloadEntry{Labels: map[string]string{"k": "\xff"}}); ok {
		t.Error("invalid UTF-8 must take the marshal's path")
	}
}

// TestJSONSize holds the JSON sizes to the encoding they predict, on
// specs with every field and every kind of escape; translate's TestJSONSize
// adds what Translate emits.
func TestJSONSize(t *testing.T) {
	for name, se := range map[string]*networking.ServiceEntry{
		"every field, every escape": {
			Hosts: []string{"a.example.com", "<b>.example.com"}, Addresses: []string{"10.0.0.0/8", ""},
			Ports: []*networking.ServicePort{
				{Number: 65535, Protocol: "HTTP", Name: "http-65535", TargetPort: 1},
				{}, {Name: `\u2028:` + "\u2028\u2029"},
			},
			Location: networking.ServiceEntry_MESH_EXTERNAL, Resolution: networking.ServiceEntry_DNS_ROUND_ROBIN,
			Endpoints: []*networking.WorkloadEntry{
				{},
				{
					Address: "unix:///var/run/x&y", Ports: map[string]uint32{"a": 0, "\\b\x00\x1f\x7f": 4294967295},
					Labels: map[string]string{"": "", "é": "日本", "\b\f\n\r\t": `"\\<>&`}, Network: "n\x01",
					Locality: "ü/\u2029", Weight: 7, ServiceAccount: "sa",
				},
			},
			ExportTo: []string{".", "*"}, SubjectAltNames: []string{"spiffe://x/ns/y/sa/z"},
		},
		"an empty selector":   {Hosts: []string{"a"}, WorkloadSelector: &networking.WorkloadSelector{}},
		"a selector":          {Hosts: []string{"a"}, WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"k": "v<"}}},
		"nothing set":         {},
		"an empty endpoint":   {Endpoints: []*networking.WorkloadEntry{{}}},
		"a zero port message": {Ports: []*networking.ServicePort{{}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := ServiceEntryJSONSize(se); !ok {
				t.Fatal("not sized")
			}
			checkServiceEntry(t, se)
		})
	}
}

// TestJSONSizeDoesNotGuess: what the walk cannot size it says so, and the
// caller encodes.
func TestJSONSizeDoesNotGuess(t *testing.T) {
	for name, se := range map[string]*networking.ServiceEntry{
		"invalid UTF-8 in a host":       {Hosts: []string{"a\xff"}},
		"invalid UTF-8 in a label":      {Endpoints: []*networking.WorkloadEntry{{Labels: map[string]string{"k": "\xc3"}}}},
		"an unknown enum value":         {Resolution: networking.ServiceEntry_Resolution(99)},
		"a nil endpoint":                {Endpoints: []*networking.WorkloadEntry{nil}},
		"a nil port":                    {Ports: []*networking.ServicePort{nil}},
		"invalid UTF-8 in the selector": {WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"\xff": ""}}},
	} {
		if n, ok := ServiceEntryJSONSize(se); ok {
			t.Errorf("%s: sized as %d", name, n)
		}
	}
	if _, ok := ObjectJSONSize("v1", "ServiceEntry", "\xff", "ns", nil, nil, 2); ok {
		t.Error("invalid UTF-8 in the name was sized")
	}
}

// TestLoadAssignmentMatchesMarshal holds LbEndpoint and LoadAssignment to
// proto.Marshal (deterministic and not) of the messages they encode.
func TestLoadAssignmentMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkLoadAssignment(t, randomAssignment(r)) })
	}
	if LbEndpoint("10.0.0.\xff", 80, 1) != "" {
		t.Error("an invalid UTF-8 address got an encoding")
	}
	if _, ok := LoadAssignment("c", []Locality{{Name: "r\xff", LbEndpoints: []string{LbEndpoint("10.0.0.1", 80, 1)}}}); ok {
		t.Error("an invalid UTF-8 locality was encoded")
	}
}

// assignment is a random LoadAssignment input and its endpoints' fields.
type assignment struct {
	name       string
	localities []Locality
	inputs     [][]endpointInput
}

func randomAssignment(r *rand.Rand) assignment {
	var a assignment
	a.name = []string{"outbound|80||a.local", "", strings.Repeat("n", 200), "ü"}[r.IntN(4)]
	for range r.IntN(4) {
		l := Locality{Name: []string{"", "r1", "r1/z1", "r1/z1/s1", "/z1/", "r1/z1/s1/x", "région/zöne/", strings.Repeat("r", 130)}[r.IntN(8)]}
		var in []endpointInput
		n := r.IntN(6)
		if r.IntN(20) == 0 {
			n = 200 + r.IntN(400) // a locality past two varint bytes of length
		}
		for range n {
			e := endpointInput{address: fmt.Sprintf("10.0.%d.%d", r.IntN(4), r.IntN(256)), port: r.Uint32() >> r.IntN(32), weight: r.Uint32() >> r.IntN(32)}
			if r.IntN(10) == 0 {
				e.address = []string{"", "fd00::1", "h.example.com", strings.Repeat("x", 150)}[r.IntN(4)]
			}
			in = append(in, e)
			l.LbEndpoints = append(l.LbEndpoints, LbEndpoint(e.address, e.port, e.weight))
		}
		l.Weight = r.Uint32() >> r.IntN(32)
		a.localities, a.inputs = append(a.localities, l), append(a.inputs, in)
	}
	return a
}

func checkLoadAssignment(t *testing.T, a assignment) {
	t.Helper()
	msg := loadAssignmentMessage(a.name, a.localities, a.inputs)
	got, ok := LoadAssignment(a.name, a.localities)
	for _, opts := range []proto.MarshalOptions{{Deterministic: true}, {}} {
		want, err := opts.Marshal(msg)
		switch {
		case ok != (err == nil):
			t.Fatalf("encoded %v, marshal error %v", ok, err)
		case ok && !bytes.Equal(got, want):
			t.Fatalf("LoadAssignment = %x\nwant proto.Marshal's %x\nmessage %v", got, want, msg)
		}
	}
	for i, l := range a.localities {
		for j, lb := range l.LbEndpoints {
			in := a.inputs[i][j]
			if want, err := marshal(lbEndpointMessage(in.address, in.port, in.weight)); err == nil && lb != string(want) {
				t.Fatalf("LbEndpoint(%q, %d, %d) = %x, want %x", in.address, in.port, in.weight, lb, want)
			}
		}
	}
}

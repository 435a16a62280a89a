package gen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/model"
)

// encodeEach pairs endpoints with their LbEndpoint encodings, in their
// order.
func encodeEach(endpoints []*model.Endpoint) []*Endpoint {
	out := plain(endpoints)
	for _, e := range out {
		e.lb = wire.LbEndpoint(e.address, e.port, e.weight)
	}
	return out
}

// shards stands in for the xDS server's endpoint shards of one service:
// each shard's endpoints as EncodeEndpoints keeps them, and all of them,
// shards in name order, as the server hands them to LoadAssignments.
type shards map[string][]*Endpoint

func (s shards) update(shard string, endpoints []*model.Endpoint) {
	s[shard] = EncodeEndpoints(endpoints, s[shard])
}

func (s shards) encoded() []*Endpoint {
	var out []*Endpoint
	for _, name := range slices.Sorted(maps.Keys(s)) {
		out = append(out, s[name]...)
	}
	return out
}

// assertEncodes fails the test unless got is pre-encoded, its marshal is
// proto.Marshal's of want, and it reads as want.
func assertEncodes(t *testing.T, want proto.Message, got types.Resource) {
	t.Helper()
	res, ok := got.(*Encoded)
	if !ok {
		t.Fatalf("got a %T, want the encoded form", got)
	}
	wantBytes, err := cachev3.MarshalResource(want)
	if err != nil {
		t.Fatal(err)
	}
	if gotBytes, err := cachev3.MarshalResource(res); err != nil || !bytes.Equal(gotBytes, wantBytes) {
		t.Fatalf("encoding %x (err %v), want proto.Marshal's %x", gotBytes, err, wantBytes)
	}
	assertEqual(t, want, res.message())
}

// endpointGen makes random services and endpoint sets for the byte-exactness
// tests: duplicate addresses, weights 0 to MaxUint32 (locality sums past
// the cap), ports of every varint size, localities with missing and extra
// parts, labels, accounts and workload names (not encoded), unicode, strings
// long enough for multi-byte lengths, and now and then invalid UTF-8.
type endpointGen struct{ r *rand.Rand }

func (g endpointGen) pick(options ...string) string { return options[g.r.IntN(len(options))] }

// raw is a string of random bytes, often invalid UTF-8.
func (g endpointGen) raw() string {
	b := make([]byte, g.r.IntN(6))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return string(b)
}

// rare is true once in n.
func (g endpointGen) rare(n int) bool { return g.r.IntN(n) == 0 }

func (g endpointGen) service() *model.Service {
	host := g.pick("a.local", "b.mesh.svc.cluster.local", "ü.local")
	if g.rare(50) {
		host = g.raw()
	}
	svc := &model.Service{Hostname: host, Namespace: "mesh"}
	for i := range 1 + g.r.IntN(3) {
		svc.Ports = append(svc.Ports, model.Port{Name: fmt.Sprintf("p%d", i), Number: uint32(80 + i), Protocol: model.ProtocolGRPC})
	}
	if g.rare(3) {
		// Subsets selecting by one label, two, none, and one no
		// endpoint carries.
		svc.Policy = &networking.DestinationRule{Host: host, Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "a-v2", Labels: map[string]string{"app": "a", "version": "v2"}},
			{Name: "all"},
			{Name: "none", Labels: map[string]string{"zone": "x"}},
		}}
	}
	return svc
}

func (g endpointGen) address() string {
	switch g.r.IntN(10) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("h%d.example.com", g.r.IntN(4))
	case 2:
		return fmt.Sprintf("fd00::%x", g.r.IntN(8))
	case 3:
		return strings.Repeat("x", 100+g.r.IntN(200)) // a length past one varint byte
	case 4:
		if g.rare(10) {
			return g.raw()
		}
	}
	return fmt.Sprintf("10.0.%d.%d", g.r.IntN(2), g.r.IntN(32))
}

func (g endpointGen) weight() uint32 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return model.DefaultWeight
	case 3:
		return math.MaxUint32 - uint32(g.r.IntN(3))
	}
	return g.r.Uint32() >> g.r.IntN(32)
}

func (g endpointGen) port() uint32 {
	switch g.r.IntN(5) {
	case 0:
		return 0
	case 1:
		return math.MaxUint32
	}
	return g.r.Uint32() >> g.r.IntN(32)
}

func (g endpointGen) locality() string {
	if g.rare(30) {
		return g.raw()
	}
	return g.pick("", "r1", "r1/z1", "r1/z1/s1", "r1/z2/", "/z1/", "//", "r1/z1/s1/x", "région/zöne/", strings.Repeat("r", 130))
}

func (g endpointGen) endpoint(svc *model.Service) *model.Endpoint {
	portName := svc.Ports[g.r.IntN(len(svc.Ports))].Name
	if g.rare(20) {
		portName = "other"
	}
	ep := &model.Endpoint{
		Address:         g.address(),
		ServicePortName: portName,
		EndpointPort:    g.port(),
		Weight:          g.weight(),
		Locality:        g.locality(),
		ServiceAccount:  g.pick("", "sa1", "sa2"),
		WorkloadName:    g.pick("", "w1", "w2", "w3"),
	}
	if g.rare(2) {
		ep.Labels = map[string]string{"app": g.pick("a", "b"), "version": g.pick("v1", "v2")}
	}
	return ep
}

func (g endpointGen) endpoints(svc *model.Service) []*model.Endpoint {
	n := g.r.IntN(12)
	switch g.r.IntN(20) {
	case 0:
		n = 0
	case 1:
		n = 200 + g.r.IntN(600) // groups past two varint bytes of length
	}
	out := make([]*model.Endpoint, n)
	for i := range out {
		out[i] = g.endpoint(svc)
	}
	return out
}

// mutate returns eps with a few endpoints changed (weight, address, port,
// locality, labels), removed or added; unchanged ones are fresh copies, as
// the ServiceEntry controller hands them over.
func (g endpointGen) mutate(svc *model.Service, eps []*model.Endpoint) []*model.Endpoint {
	out := make([]*model.Endpoint, 0, len(eps)+2)
	for _, ep := range eps {
		c := *ep
		switch g.r.IntN(12) {
		case 0:
			c.Weight = g.weight()
		case 1:
			c.Address = g.address()
		case 2:
			c.EndpointPort = g.port()
		case 3:
			c.Locality = g.locality()
		case 4:
			c.Labels = map[string]string{"version": g.pick("v1", "v2", "v3")}
			if g.rare(2) {
				c.Labels["app"] = g.pick("a", "b")
			}
		case 5:
			continue
		}
		out = append(out, &c)
	}
	for range g.r.IntN(3) {
		out = append(out, g.endpoint(svc))
	}
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// checkEncodedMatchesMarshal checks every assignment pushed from shards for
// svc: its marshal is byte for byte what proto.Marshal (deterministic, as
// go-control-plane's cache.MarshalResource, and not) gives for the message
// buildLoadAssignments makes from the same endpoints, both fail alike, and
// the encoded resource reads as that message. An assignment whose weights
// were scaled down is the message itself (encodeLoadAssignment).
func checkEncodedMatchesMarshal(t *testing.T, shards shards, svc *model.Service) {
	t.Helper()
	got, scaled := LoadAssignments(svc, shards.encoded())
	// The messages of the same endpoints, built from their fields.
	want := make(map[string]*endpoint.ClusterLoadAssignment)
	forEachPort(svc, shards.encoded(), func(port uint32, name string, selected []*Endpoint) {
		for _, sub := range svc.Policy.GetSubsets() {
			sname := SubsetClusterName(port, sub.GetName(), svc.Hostname)
			want[sname] = loadAssignmentMessage(sname, sortCompact(selectSubset(selected, sub.GetLabels())))
		}
		want[name] = loadAssignmentMessage(name, sortCompact(selected))
	})
	if len(got) != len(want) {
		t.Fatalf("%d assignments, want %d", len(got), len(want))
	}
	for name, msg := range want {
		res, ok := got[name]
		if !ok {
			t.Fatalf("no assignment %q", name)
		}
		for _, opts := range []proto.MarshalOptions{{Deterministic: true}, {}} {
			gotBytes, gotErr := opts.Marshal(res)
			wantBytes, wantErr := opts.Marshal(msg)
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("%q (deterministic %v): marshal error %v, want %v", name, opts.Deterministic, gotErr, wantErr)
			}
			if !bytes.Equal(gotBytes, wantBytes) {
				t.Fatalf("%q (deterministic %v): encoding differs from proto.Marshal\n got %x\nwant %x\nmessage %v",
					name, opts.Deterministic, gotBytes, wantBytes, msg)
			}
		}
		if _, err := cachev3.MarshalResource(msg); err != nil || slices.Contains(scaled, name) {
			continue // invalid UTF-8, or scaled weights: the resource is the message itself
		}
		if _, ok := res.(*Encoded); !ok {
			t.Fatalf("%q is a %T, want the encoded form", name, res)
		}
		if !proto.Equal(res, msg) {
			t.Fatalf("%q reads as another message than it encodes", name)
		}
	}
}

// checkFromModel checks every assignment pushed from shards for svc
// against buildLoadAssignments' message of the model endpoints they were
// encoded from (sets, per shard), subsets' included: what an update kept
// of an earlier one (EncodeEndpoints' reuse of labels and places) is what
// the endpoints say.
func checkFromModel(t *testing.T, shards shards, sets map[string][]*model.Endpoint, svc *model.Service) {
	t.Helper()
	var all []*model.Endpoint
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		all = append(all, SortEndpoints(sets[name])...)
	}
	got, _ := LoadAssignments(svc, shards.encoded())
	want := buildLoadAssignments(svc, all)
	if len(got) != len(want) || len(want) != len(ClusterNames(svc)) {
		t.Fatalf("%d assignments, want %d (%d clusters)", len(got), len(want), len(ClusterNames(svc)))
	}
	for name, msg := range want {
		if _, err := cachev3.MarshalResource(msg); err != nil {
			continue // invalid UTF-8: checkEncodedMatchesMarshal checks both fail
		}
		gotBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(got[name])
		wantBytes, _ := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil || !bytes.Equal(gotBytes, wantBytes) {
			t.Fatalf("%q (err %v) is not the model endpoints' assignment\nwant %v", name, err, msg)
		}
	}
}

func TestEncodedLoadAssignmentMatchesMarshal(t *testing.T) {
	g := endpointGen{rand.New(rand.NewPCG(1, 2))}
	for i := range 1500 {
		svc := g.service()
		shards := shards{}
		names := []string{"consul", "file", "zk"}[:1+g.r.IntN(3)]
		sets := make(map[string][]*model.Endpoint)
		for _, shard := range names {
			sets[shard] = g.endpoints(svc)
			shards.update(shard, sets[shard])
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkEncodedMatchesMarshal(t, shards, svc)
			checkFromModel(t, shards, sets, svc)
			// Later updates reuse the encodings of unchanged endpoints.
			for range 1 + g.r.IntN(3) {
				shard := names[g.r.IntN(len(names))]
				sets[shard] = g.mutate(svc, sets[shard])
				shards.update(shard, sets[shard])
				checkEncodedMatchesMarshal(t, shards, svc)
				checkFromModel(t, shards, sets, svc)
			}
		})
	}
}

// bytesSource is a rand.Source that reads the fuzzer's bytes, then goes on
// from a generator seeded by them.
type bytesSource struct {
	data []byte
	rest *rand.PCG
}

func (s *bytesSource) Uint64() uint64 {
	if len(s.data) >= 8 {
		v := binary.LittleEndian.Uint64(s.data)
		s.data = s.data[8:]
		return v
	}
	if s.rest == nil {
		var tail [8]byte
		copy(tail[:], s.data)
		s.rest = rand.NewPCG(binary.LittleEndian.Uint64(tail[:]), uint64(len(s.data)))
		s.data = nil
	}
	return s.rest.Uint64()
}

func FuzzEncodedLoadAssignment(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Add(bytes.Repeat([]byte{0x80}, 64))
	f.Add([]byte("r1/z1/s1 10.0.0.1:80 weight 4294967295 \xff\xfe"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := endpointGen{rand.New(&bytesSource{data: data})}
		svc := g.service()
		shards := shards{}
		eps := g.endpoints(svc)
		shards.update("consul", eps)
		shards.update("file", g.endpoints(svc))
		checkEncodedMatchesMarshal(t, shards, svc)
		shards.update("consul", g.mutate(svc, eps))
		checkEncodedMatchesMarshal(t, shards, svc)
	})
}

func TestEncodeEndpointsEncodesOnlyChangedEndpoints(t *testing.T) {
	a, b, c := ep("10.0.0.1", 80, "r1"), ep("10.0.0.2", 80, "r1"), ep("10.0.0.3", 80, "r2")
	before := EncodeEndpoints([]*model.Endpoint{a, b, c}, nil)

	// Fresh copies, b reweighted and c moved to another locality.
	a2, b2, c2 := *a, *b, *c
	b2.Weight = 7
	c2.Locality = "r3"
	after := EncodeEndpoints([]*model.Endpoint{&c2, &b2, &a2}, before)

	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(before[0].lb, after[0].lb) {
		t.Error("unchanged endpoint re-encoded, want its encoding kept")
	}
	if same(before[1].lb, after[1].lb) || after[1].lb != wire.LbEndpoint(b2.Address, b2.EndpointPort, b2.Weight) {
		t.Error("reweighted endpoint kept its old encoding")
	}
	if !same(before[2].lb, after[2].lb) {
		t.Error("endpoint moved to another locality re-encoded; its LbEndpoint did not change")
	}
	for i, e := range after {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(
			lbEndpoint(e.address, e.port, e.weight))
		if err != nil {
			t.Fatal(err)
		}
		if e.lb != string(want) {
			t.Errorf("endpoint %d: encoding %x, want proto.Marshal's %x", i, e.lb, want)
		}
	}
}

func TestEncodedLoadAssignmentReadsAsMessage(t *testing.T) {
	endpoints := []*model.Endpoint{ep("10.0.0.2", 80, "r1/z1/s1"), ep("10.0.0.1", 81, "r2")}
	name := ClusterName(80, "a.local")
	want := buildLoadAssignment(name, endpoints)
	eps := encodeEach(endpoints)
	res := encodeOne(name, eps).(*Encoded)

	assertEqual(t, want, proto.Clone(res))
	if !proto.Equal(res, want) || !proto.Equal(want, res) {
		t.Error("proto.Equal: the encoded resource differs from its message")
	}
	if got, want := proto.Size(res), proto.Size(want); got != want {
		t.Errorf("proto.Size = %d, want %d", got, want)
	}
	gotJSON, err := protojson.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if wantJSON, _ := protojson.Marshal(want); !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("protojson:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	appended, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend([]byte("prefix"), res)
	if err != nil || !bytes.Equal(appended, append([]byte("prefix"), res.wire...)) {
		t.Errorf("MarshalAppend = %q, %v; want the prefix and the encoding", appended, err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("proto.Reset of a pre-encoded assignment did not panic, want read-only")
			}
		}()
		proto.Reset(res)
	}()
	if !slices.Equal(encodeOne(name, eps).(*Encoded).wire, res.wire) {
		t.Error("encoding again gives other bytes")
	}
}

func TestEncodedLoadAssignmentFallsBackOnInvalidUTF8(t *testing.T) {
	bad := ep("10.0.0.1", 80, "r\xff")
	name := ClusterName(80, "a.local")
	eps := encodeEach([]*model.Endpoint{bad})
	res := encodeOne(name, eps)
	if _, ok := res.(*endpoint.ClusterLoadAssignment); !ok {
		t.Fatalf("got %T, want the message", res)
	}
	if _, err := cachev3.MarshalResource(res); err == nil {
		t.Error("marshal of an invalid UTF-8 locality succeeded, want proto.Marshal's error")
	}
	if bad := EncodeEndpoints([]*model.Endpoint{ep("10.0.0.\xff", 80, "")}, nil); bad[0].lb != "" {
		t.Error("an invalid UTF-8 address got an encoding")
	}
}

// TestResourcesEncodeTheirMessages: Resources gives, per port, the encoded
// forms of the Cluster, Listener and RouteConfiguration messages.
func TestResourcesEncodeTheirMessages(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Namespace: "mesh", Ports: []model.Port{
		{Name: "grpc-80", Number: 80, Protocol: model.ProtocolGRPC}, {Name: "tcp-81", Number: 81, Protocol: model.ProtocolTCP},
	}}
	clusters, listeners, routes := Resources(svc)
	services := []*model.Service{svc}
	for what, tc := range map[string]struct {
		got  []types.Resource
		want map[string]proto.Message
	}{
		"clusters":  {clusters, asMessages(buildClusters(services))},
		"listeners": {listeners, asMessages(buildListeners(services))},
		"routes":    {routes, asMessages(buildRoutes(services))},
	} {
		if len(tc.got) != len(tc.want) {
			t.Fatalf("%s: %d resources, want %d", what, len(tc.got), len(tc.want))
		}
		for _, res := range tc.got {
			name := res.(*Encoded).GetName()
			assertEncodes(t, tc.want[name], res)
		}
	}
}

func asMessages[M proto.Message](in map[string]M) map[string]proto.Message {
	out := make(map[string]proto.Message, len(in))
	for name, m := range in {
		out[name] = m
	}
	return out
}

// TestEndpointSize: the endpoint shards keep one Endpoint per endpoint for
// as long as it lives, so every byte of it is paid once per instance
// served.
func TestEndpointSize(t *testing.T) {
	if got := unsafe.Sizeof(Endpoint{}); got > 48 {
		t.Errorf("unsafe.Sizeof(Endpoint{}) = %d, want at most 48 (a size class)", got)
	}
}

// TestEndpointsSharePlaces: endpoints serving one port in one locality
// share one endpointPlace, in an update, across updates and across
// services; another port or locality has its own.
func TestEndpointsSharePlaces(t *testing.T) {
	eps := []*model.Endpoint{ep("10.0.0.1", 80, "r1"), ep("10.0.0.2", 80, "r1"), ep("10.0.0.3", 80, "r2"), ep("10.0.0.4", 80, "r1")}
	got := EncodeEndpoints(eps, nil)
	if got[0].place != got[1].place || got[0].place != got[3].place {
		t.Error("endpoints of one port and locality hold distinct places")
	}
	if got[2].place == got[0].place || got[2].locality() != "r2" {
		t.Errorf("the r2 endpoint's place is %+v, want its own", got[2].place.Value())
	}
	moved := *eps[1]
	moved.Weight = 5
	next := EncodeEndpoints([]*model.Endpoint{eps[0], &moved, eps[2], eps[3], ep("10.0.0.5", 80, "r1")}, got)
	if next[1].place != got[0].place || next[4].place != got[0].place {
		t.Error("an update does not reuse the shard's place for a changed or new endpoint")
	}
	if other := EncodeEndpoints([]*model.Endpoint{ep("10.9.0.1", 80, "r1")}, nil); other[0].place != got[0].place {
		t.Error("another service's endpoint of the same port name and locality holds another place")
	}
}

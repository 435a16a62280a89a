package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// responseInput is the input of SotWResponse (delta false) or
// DeltaResponse (delta true) and the nonce Parts adds.
type responseInput struct {
	delta        bool
	version, typ string
	values       [][]byte // SotWResponse
	resources    []DeltaResource
	removed      []string
	nonce        string
}

// encode returns the Response the input encodes.
func (in responseInput) encode() *Response {
	if in.delta {
		return DeltaResponse(in.version, in.typ, in.resources, in.removed)
	}
	return SotWResponse(in.version, in.typ, in.values)
}

// message is the go-control-plane message the input encodes, with its
// nonce.
func (in responseInput) message() proto.Message {
	if in.delta {
		m := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: in.version, TypeUrl: in.typ, RemovedResources: in.removed, Nonce: in.nonce}
		for _, r := range in.resources {
			m.Resources = append(m.Resources, &discovery.Resource{Name: r.Name, Version: r.Version,
				Resource: &anypb.Any{TypeUrl: in.typ, Value: r.Value}})
		}
		return m
	}
	m := &discovery.DiscoveryResponse{VersionInfo: in.version, TypeUrl: in.typ, Nonce: in.nonce}
	for _, v := range in.values {
		m.Resources = append(m.Resources, &anypb.Any{TypeUrl: in.typ, Value: v})
	}
	return m
}

// checkResponse holds the input's Response to proto.Marshal (deterministic
// and not) of its message, and checks that the bytes unmarshal to the
// message.
func checkResponse(t *testing.T, in responseInput) {
	t.Helper()
	r := in.encode()
	if r == nil {
		t.Fatalf("the input was declined: %+v", in)
	}
	head, rest := r.Parts(in.nonce)
	got := append(head, rest...) // head's capacity is its length: this copies
	if !bytes.Equal(got[:len(head)], r.head) {
		t.Fatal("appending to head wrote into the shared response")
	}
	if cap(head) != len(head) {
		t.Errorf("head has capacity %d past its length %d: an append would write into the shared response", cap(head), len(head))
	}
	if len(rest) == 0 && rest != nil {
		t.Error("Parts allocated an empty rest")
	}
	msg := in.message()
	for _, opts := range []proto.MarshalOptions{{Deterministic: true}, {}} {
		want, err := opts.Marshal(msg)
		if err != nil {
			t.Fatalf("proto.Marshal: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Parts(%q) = %x\nwant proto.Marshal's %x\nmessage %v", in.nonce, got, want, msg)
		}
	}
	if n := r.Size(in.nonce); n != len(got) {
		t.Errorf("Size(%q) = %d, Parts gave %d bytes", in.nonce, n, len(got))
	}
	back := msg.ProtoReflect().Type().New().Interface()
	if err := proto.Unmarshal(got, back); err != nil {
		t.Fatalf("the encoding does not unmarshal: %v", err)
	}
	if !proto.Equal(back, msg) {
		t.Fatalf("the encoding unmarshals to %v\nwant %v", back, msg)
	}
	// A second call shares head and allocates a rest of its own.
	head2, rest2 := r.Parts(in.nonce)
	if len(head) > 0 && &head2[0] != &head[0] {
		t.Error("Parts copied the shared head")
	}
	if len(rest) > 0 && &rest2[0] == &rest[0] {
		t.Error("two calls of Parts returned the same rest")
	}
}

// TestResponseMatchesMarshal holds SotWResponse and DeltaResponse, with
// Parts, to proto.Marshal of the messages they encode.
func TestResponseMatchesMarshal(t *testing.T) {
	const typ = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	big := bytes.Repeat([]byte{0x0a, 0x01, 'x'}, 6000) // 18,000 bytes: three varint bytes of length
	for _, tc := range []struct {
		name string
		in   responseInput
	}{
		{"sotw empty", responseInput{}},
		{"sotw nonce only", responseInput{nonce: "1"}},
		{"sotw no resources", responseInput{version: "v1", typ: typ, nonce: "7"}},
		{"sotw one", responseInput{version: "v1", typ: typ, values: [][]byte{{0x0a, 0x01, 'a'}}, nonce: "12"}},
		{"sotw empty value", responseInput{version: "v1", typ: typ, values: [][]byte{nil, {}}, nonce: "3"}},
		{"sotw empty version and nonce", responseInput{typ: typ, values: [][]byte{{0x0a, 0x01, 'a'}}}},
		{"sotw no type url", responseInput{version: "v", values: [][]byte{nil, {0x0a, 0x01, 'a'}}, nonce: "n"}},
		{"sotw values of 127 and 128 bytes", responseInput{version: "v", typ: typ, values: [][]byte{big[:127], big[:128]}, nonce: "n"}},
		{"sotw large values", responseInput{version: "v", typ: typ, values: [][]byte{big, big[:16383], big[:16384]}, nonce: "n"}},
		{"sotw unicode", responseInput{version: "vérsion-ü", typ: "type.googleapis.com/ünï", values: [][]byte{{0x0a, 0x01, 'a'}}, nonce: "nönce"}},

		{"delta empty", responseInput{delta: true}},
		{"delta nonce only", responseInput{delta: true, nonce: "1"}},
		{"delta removals only", responseInput{delta: true, typ: typ, removed: []string{"a", "", "b"}, nonce: "2"}},
		{"delta removals without nonce", responseInput{delta: true, removed: []string{"a"}}},
		{"delta empty removed list", responseInput{delta: true, version: "v1", typ: typ, removed: []string{},
			resources: []DeltaResource{{Name: "a", Version: "1", Value: []byte{0x0a, 0x01, 'a'}}}, nonce: "3"}},
		{"delta empty resource", responseInput{delta: true, version: "v1", typ: typ, resources: []DeltaResource{{}}, nonce: "4"}},
		{"delta empty resource, no type url", responseInput{delta: true, resources: []DeltaResource{{}, {Name: "a"}}, nonce: "4"}},
		{"delta no version", responseInput{delta: true, typ: typ, resources: []DeltaResource{{Name: "a", Value: []byte{0x0a, 0x01, 'a'}}}}},
		{"delta large", responseInput{delta: true, version: "v", typ: typ,
			resources: []DeltaResource{{Name: "a", Version: "1", Value: big}, {Name: strings.Repeat("n", 200), Version: "2", Value: big[:16000]}},
			removed:   []string{strings.Repeat("r", 20000)}, nonce: "5"}},
		{"delta unicode", responseInput{delta: true, version: "ü", typ: typ,
			resources: []DeltaResource{{Name: "nämé/ü", Version: "vé", Value: []byte{0x0a, 0x01, 'a'}}}, removed: []string{"rémoved"}, nonce: "ñ"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkResponse(t, tc.in) })
	}
}

// TestResponseOnRandomInputs holds the encoders to proto.Marshal on random
// inputs.
func TestResponseOnRandomInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pool := make([]byte, 1<<21+1) // the values are windows of one random buffer
	for i := range pool {
		pool[i] = byte(r.Uint32())
	}
	n := 2000
	if testing.Short() {
		n = 200
	}
	seen := map[string]int{}
	for i := range n {
		in := randomResponseInput(r, pool)
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkResponse(t, in) })
		for _, c := range responseCases(in) {
			seen[c]++
		}
	}
	for _, c := range []string{"sotw", "delta", "empty version", "empty nonce", "unicode", "no resources", "empty value",
		"empty removed list", "removals", "empty removal", "value > 127", "value > 16383", "value ≥ 2^21", "many resources"} {
		if seen[c] == 0 && !testing.Short() {
			t.Errorf("no random input has %s: %v", c, seen)
		}
	}
}

// responseCases names the edge cases the input has.
func responseCases(in responseInput) []string {
	var cases []string
	add := func(ok bool, c string) {
		if ok {
			cases = append(cases, c)
		}
	}
	values := in.values
	for _, r := range in.resources {
		values = append(values, r.Value)
		add(!responseIsASCII(r.Name), "unicode")
	}
	add(in.delta, "delta")
	add(!in.delta, "sotw")
	add(in.version == "", "empty version")
	add(in.nonce == "", "empty nonce")
	add(!responseIsASCII(in.version+in.typ+in.nonce), "unicode")
	add(len(values) == 0, "no resources")
	add(len(values) >= 100, "many resources")
	add(in.removed != nil && len(in.removed) == 0, "empty removed list")
	add(len(in.removed) > 0, "removals")
	add(slices.Contains(in.removed, ""), "empty removal")
	for _, v := range values {
		add(len(v) == 0, "empty value")
		add(len(v) > 127, "value > 127")
		add(len(v) > 16383, "value > 16383")
		add(len(v) >= 1<<21, "value ≥ 2^21")
	}
	return cases
}

func responseIsASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// randomResponseString is one of the strings an xDS response's fields take,
// or an edge case: empty, unicode, longer than 127 bytes.
func randomResponseString(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return ""
	case 1:
		return []string{"ü", "名前", "région/zöne", "\u00a0\U0001F600"}[r.IntN(4)]
	case 2:
		return strings.Repeat("s", 100+r.IntN(200))
	default:
		return fmt.Sprintf("outbound|%d||svc-%d.ns.svc.cluster.local", r.IntN(65536), r.IntN(1000))
	}
}

// randomResponseValue returns a window of pool whose length crosses the
// varint boundaries now and then (a length of 2^21 takes four bytes), and
// is small in a long list (many).
func randomResponseValue(r *rand.Rand, pool []byte, many bool) []byte {
	var n int
	switch k := r.IntN(20); {
	case k < 2:
		n = 0
	case k == 2 && !many:
		n = []int{127, 128, 16383, 16384, 16380, 1 << 21}[r.IntN(6)]
		if n == 1<<21 && r.IntN(10) != 0 {
			n = 20000
		}
	case k == 3 && !many:
		n = 128 + r.IntN(40000)
	default:
		n = 1 + r.IntN(200)
	}
	start := r.IntN(len(pool) - n)
	return pool[start : start+n]
}

func randomResponseInput(r *rand.Rand, pool []byte) responseInput {
	types := []string{"", "type.googleapis.com/envoy.config.listener.v3.Listener",
		"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "type.googleapis.com/ü"}
	in := responseInput{
		delta:   r.IntN(2) == 0,
		version: randomResponseString(r),
		typ:     types[r.IntN(len(types))],
		nonce:   []string{"", "1", fmt.Sprint(r.Uint64()), "nönce"}[r.IntN(4)],
	}
	count, many := r.IntN(6), false
	if r.IntN(15) == 0 {
		count, many = 100+r.IntN(200), true
	}
	for range count {
		if in.delta {
			in.resources = append(in.resources, DeltaResource{Name: randomResponseString(r), Version: randomResponseString(r), Value: randomResponseValue(r, pool, many)})
		} else {
			in.values = append(in.values, randomResponseValue(r, pool, many))
		}
	}
	if in.delta {
		switch r.IntN(3) {
		case 0: // nil
		case 1:
			in.removed = []string{}
		default:
			for range 1 + r.IntN(5) {
				in.removed = append(in.removed, randomResponseString(r))
			}
		}
	}
	return in
}

// TestResponseDeclinesInvalidUTF8: a string proto.Marshal refuses is never
// encoded.
func TestResponseDeclinesInvalidUTF8(t *testing.T) {
	const bad = "a\xffb"
	for _, in := range []responseInput{
		{version: bad}, {typ: bad},
		{delta: true, version: bad}, {delta: true, typ: bad},
		{delta: true, resources: []DeltaResource{{Name: bad}}},
		{delta: true, resources: []DeltaResource{{Version: bad}}},
		{delta: true, removed: []string{"a", bad}},
	} {
		if in.encode() != nil {
			t.Errorf("%+v was encoded", in)
		}
		if _, err := proto.Marshal(in.message()); err == nil {
			t.Errorf("proto.Marshal accepts %+v: the encoder need not decline it", in)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Parts accepted a nonce that is not valid UTF-8")
		}
	}()
	SotWResponse("v", "t", nil).Parts(bad)
}

// TestResponseConcurrentParts: streams share a Response (go test -race).
func TestResponseConcurrentParts(t *testing.T) {
	in := responseInput{delta: true, version: "v", typ: "t",
		resources: []DeltaResource{{Name: "a", Version: "1", Value: []byte("xyz")}}, removed: []string{"b"}}
	r := in.encode()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				in := in
				in.nonce = fmt.Sprint(g, "-", i)
				head, rest := r.Parts(in.nonce)
				want, _ := proto.Marshal(in.message())
				if got := append(head, rest...); !bytes.Equal(got, want) {
					t.Errorf("Parts(%q) = %x, want %x", in.nonce, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkResponseParts is the per-stream cost of sending a shared
// response: Parts with a nonce.
func BenchmarkResponseParts(b *testing.B) {
	values := make([][]byte, 100)
	resources := make([]DeltaResource, 100)
	for i := range values {
		values[i] = bytes.Repeat([]byte{'x'}, 300)
		resources[i] = DeltaResource{Name: fmt.Sprint("outbound|80||svc-", i, ".ns.svc.cluster.local"), Version: "abc123", Value: values[i]}
	}
	const typ = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	for _, bc := range []struct {
		name string
		r    *Response
	}{
		{"sotw", SotWResponse("2024-01-01T00:00:00Z/42", typ, values)},
		{"delta", DeltaResponse("2024-01-01T00:00:00Z/42", typ, resources, []string{"outbound|80||gone.ns.svc.cluster.local"})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				head, rest := bc.r.Parts("1234567")
				n += len(head) + len(rest)
			}
			if n == 0 {
				b.Fatal("empty")
			}
		})
	}
}

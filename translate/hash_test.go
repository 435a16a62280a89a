package translate

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
)

func TestContentHash(t *testing.T) {
	spec := func() *networking.WorkloadEntry {
		return &networking.WorkloadEntry{Address: "10.0.0.1", Labels: map[string]string{"a": "1", "b": "2", "c": "3"}}
	}
	base := ContentHash(map[string]string{"x": "1", "y": "2"}, nil, spec())
	if len(base) != 64 {
		t.Fatalf("hash %q is not hex SHA-256", base)
	}
	for range 20 { // map iteration order varies between runs
		if got := ContentHash(map[string]string{"y": "2", "x": "1"}, nil, spec()); got != base {
			t.Fatalf("hash not deterministic: %s vs %s", got, base)
		}
	}
	changed := map[string]string{
		"a label value changes it":     ContentHash(map[string]string{"x": "1", "y": "3"}, nil, spec()),
		"a label key changes it":       ContentHash(map[string]string{"x": "1", "z": "2"}, nil, spec()),
		"label boundaries matter":      ContentHash(map[string]string{"x": "1y", "": "2"}, nil, spec()),
		"no labels changes it":         ContentHash(nil, nil, spec()),
		"the spec changes it":          ContentHash(map[string]string{"x": "1", "y": "2"}, nil, &networking.WorkloadEntry{Address: "10.0.0.2"}),
		"a nil spec is a valid input":  ContentHash(map[string]string{"x": "1", "y": "2"}, nil, nil),
		"an annotation changes it":     ContentHash(map[string]string{"x": "1", "y": "2"}, map[string]string{"m": "a"}, spec()),
		"a label is not an annotation": ContentHash(map[string]string{"x": "1"}, map[string]string{"y": "2"}, spec()),
	}
	if a, b := ContentHash(nil, map[string]string{"m": "a,b"}, spec()), ContentHash(nil, map[string]string{"m": "a,c"}, spec()); a == b {
		t.Errorf("a changed annotation value keeps the hash")
	}
	for name, h := range changed {
		if h == base {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

func TestWorkloadEntryName(t *testing.T) {
	// sha256("consul-dc1/node-a/greeter-1") starts with 3c5b21f007.
	if got, want := WorkloadEntryName("greeter.service.consul", "consul-dc1", "node-a/greeter-1"),
		"greeter.service.consul-3c5b21f007"; got != want {
		t.Errorf("WorkloadEntryName = %q, want %q", got, want)
	}
	if WorkloadEntryName("h", "r1", "i") == WorkloadEntryName("h", "r2", "i") {
		t.Error("registry is not part of the name")
	}
}

// TestAppendWorkloadEntry holds ContentHash's WorkloadEntry encoder to the
// deterministic proto marshal it replaces, on hand-picked and random specs.
func TestAppendWorkloadEntry(t *testing.T) {
	specs := map[string]*networking.WorkloadEntry{
		"empty":                           {},
		"address only":                    {Address: "10.0.0.1"},
		"every field":                     {Address: "10.0.0.1", Ports: map[string]uint32{"grpc-80": 8080, "http-90": 9090}, Labels: map[string]string{"b": "2", "a": "1"}, Network: "n1", Locality: "r/z/s", Weight: 300, ServiceAccount: "sa"},
		"empty map key and values":        {Ports: map[string]uint32{"": 0}, Labels: map[string]string{"": "", "k": ""}},
		"more labels than a group":        {Labels: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9", "j": "10"}},
		"long values need 2-byte lengths": {Labels: map[string]string{"k": strings.Repeat("v", 300)}, Address: strings.Repeat("a", 200)},
		"non-ASCII":                       {Labels: map[string]string{"ключ": "значение"}, Locality: "zürich"},
		"max weight and port":             {Weight: math.MaxUint32, Ports: map[string]uint32{"p": math.MaxUint32}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string { return strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(4)) }
	for i := range 200 {
		we := &networking.WorkloadEntry{Address: str(), Network: str(), Locality: str(), ServiceAccount: str(), Weight: uint32(rng.IntN(3)) * uint32(rng.Uint32())}
		for range rng.IntN(12) {
			if we.Labels == nil {
				we.Labels, we.Ports = map[string]string{}, map[string]uint32{}
			}
			we.Labels[str()+str()] = str()
			we.Ports[str()] = uint32(rng.IntN(70000))
		}
		specs[fmt.Sprintf("random %d", i)] = we
	}
	for name, we := range specs {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(we)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !plainWorkloadEntry(we) {
			t.Fatalf("%s: not plain", name)
		}
		if got := appendWorkloadEntry(nil, we); !bytes.Equal(got, want) {
			t.Errorf("%s: appendWorkloadEntry = %x, want %x", name, got, want)
		}
	}
	if plainWorkloadEntry(&networking.WorkloadEntry{Labels: map[string]string{"k": "\xff"}}) {
		t.Error("invalid UTF-8 must take the marshal's path")
	}
}

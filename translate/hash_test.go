package translate

import (
	"testing"

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

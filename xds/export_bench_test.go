package xds

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/model"
)

// TestEDSPath checks that EDSPath reports changes as the shards decide them
// and hands out what proto.Marshal makes of the assignments the push builds.
func TestEDSPath(t *testing.T) {
	svc := grpcService("a.local", 80)
	endpoints := []*model.Endpoint{
		ep("10.0.0.2", 80, "r1/z1/"), ep("10.0.0.1", 80, "r1/z0/"), ep("10.0.0.3", 80, "r1/z0/"),
	}
	p := NewEDSPath(svc)
	check := func() {
		t.Helper()
		got, err := p.BuildEncode()
		if err != nil {
			t.Fatal(err)
		}
		want := buildLoadAssignments(svc, endpoints)
		if len(got) != len(want) {
			t.Fatalf("%d assignments, want %d", len(got), len(want))
		}
		for name, msg := range want {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[name], b) {
				t.Errorf("%s: encoding differs from proto.Marshal's", name)
			}
		}
	}
	if !p.Update("shard", endpoints) {
		t.Error("first endpoints: no change reported")
	}
	check()
	reversed := slices.Clone(endpoints)
	slices.Reverse(reversed)
	if p.Update("shard", reversed) {
		t.Error("the same endpoints in another order: change reported")
	}
	changed := *endpoints[1]
	changed.Weight = 2
	endpoints = []*model.Endpoint{endpoints[0], &changed, endpoints[2]}
	if !p.Update("shard", endpoints) {
		t.Error("a changed weight: no change reported")
	}
	check()
}

package xds

import (
	"testing"
	"unsafe"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/cache"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// TestEncodedLoadAssignmentIsServedAsEncoded: an assignment the endpoint
// shards' entries assemble reaches SotW and Delta responses as the very
// bytes gen assembled (rule 10), versioned by their hash, and handing the
// same content again changes nothing.
func TestEncodedLoadAssignmentIsServedAsEncoded(t *testing.T) {
	shards := newEndpointShards()
	shards.update("consul", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, "r1"), ep("10.0.0.2", 80, "r2")})
	svc := grpcService("a.local", 80)
	encoded, _ := gen.LoadAssignments(svc, shards.encoded("a.local", "mesh"))
	res := encoded[gen.ClusterName(80, "a.local")].(*gen.Encoded)

	set := newResourceSet(cache.NewResources(resourcev3.EndpointType))
	if _, err := set.apply(encoded, nil); err != nil {
		t.Fatal(err)
	}
	name := gen.ClusterName(80, "a.local")
	out := make(chan cachev3.Response, 1)
	req := &discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{name}}
	if _, err := set.cache.CreateWatch(req, stream.NewSotwSubscription(req.ResourceNames, false), out); err != nil {
		t.Fatal(err)
	}
	sotw, err := (<-out).GetDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	deltaOut := make(chan cachev3.DeltaResponse, 1)
	dreq := &discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{name}}
	if _, err := set.cache.CreateDeltaWatch(dreq, stream.NewDeltaSubscription(dreq.ResourceNamesSubscribe, nil, nil, false), deltaOut); err != nil {
		t.Fatal(err)
	}
	delta, err := (<-deltaOut).GetDeltaDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string][]byte{"SotW": sotw.GetResources()[0].GetValue(), "Delta": delta.GetResources()[0].GetResource().GetValue()} {
		if unsafe.SliceData(v) != unsafe.SliceData(res.Encoding()) {
			t.Errorf("%s response carries a marshalled copy, want the pre-encoded bytes", what)
		}
	}
	if got, want := delta.GetResources()[0].GetVersion(), cachev3.HashResource(res.Encoding()); got != want {
		t.Errorf("Delta version %q, want the hash of the encoding %q", got, want)
	}
	if got := cachev3.GetResourceName(res); got != name {
		t.Errorf("resource name %q, want %q", got, name)
	}

	// The same content again changes nothing: no new version, no wake-up.
	again, _ := gen.LoadAssignments(svc, shards.encoded("a.local", "mesh"))
	if n, err := set.apply(again, nil); err != nil || n != 0 {
		t.Errorf("re-applying equal content changed %d resources (err %v), want 0", n, err)
	}
}

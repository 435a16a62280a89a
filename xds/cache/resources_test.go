package cache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"unsafe"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// cacheStep is one step of a Resources rule test: an update, or a
// stream's request that opens a watch. want is the response the step
// causes ("" none): the names sent, "-" and the names removed, sorted; a
// Delta response is prefixed "delta".
type cacheStep struct {
	set       map[string]int // name → content
	remove    []string
	sotw      []string // a SotW request with these names; nil: none
	version   string   // the SotW request's version_info
	subscribe []string // a Delta request
	unsub     []string
	delta     bool
	// initial, on a stream's first Delta request, are the versions a
	// reconnecting client has: the Delta version of each name's content.
	initial map[string]int
	want    string
}

func TestResourceCacheRules(t *testing.T) {
	tests := []struct {
		name    string
		typeURL string
		steps   []cacheStep
	}{
		{"SotW first request is answered at once, even with nothing", resourcev3.EndpointType, []cacheStep{
			{sotw: []string{"a"}, want: "[]"},
		}},
		{"SotW EDS: only the changed subscribed resource is sent", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1, "b": 1}},
			{sotw: []string{"a", "b"}, want: "[a b]"},
			{sotw: []string{"a", "b"}, version: "1"},
			{set: map[string]int{"c": 1}},
			{set: map[string]int{"b": 2}, want: "[b]"},
		}},
		{"SotW EDS: a removal alone wakes no watch", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1, "b": 1}},
			{sotw: []string{"a", "b"}, want: "[a b]"},
			{sotw: []string{"a", "b"}, version: "1"},
			{remove: []string{"b"}},
			{set: map[string]int{"a": 2}, want: "[a]"},
		}},
		{"SotW CDS: a removal sends the full state", resourcev3.ClusterType, []cacheStep{
			{set: map[string]int{"a": 1, "b": 1}},
			{sotw: []string{}, want: "[a b]"},
			{sotw: []string{}, version: "1"},
			{remove: []string{"b"}, want: "[a]"},
			{sotw: []string{}, version: "2"},
			{set: map[string]int{"c": 1}, want: "[a c]"},
		}},
		{"SotW: an ACK of what is current waits", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1}},
			{sotw: []string{"a"}, want: "[a]"},
			{sotw: []string{"a"}, version: "1"},
			{set: map[string]int{"b": 1}},
			{sotw: []string{"a", "b"}, version: "2", want: "[b]"},
		}},
		{"Delta: subscribed resources are sent, then only changes and removals", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1, "b": 1}},
			{delta: true, subscribe: []string{"a"}, want: "delta [a]"},
			{delta: true},
			{set: map[string]int{"b": 2}},
			{set: map[string]int{"a": 2}, want: "delta [a]"},
			{delta: true},
			{remove: []string{"a"}, want: "delta [] - [a]"},
		}},
		{"Delta: an unsubscribed resource is forgotten, not removed", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1, "b": 1}},
			{delta: true, subscribe: []string{"a", "b"}, want: "delta [a b]"},
			{delta: true, unsub: []string{"b"}},
			{set: map[string]int{"b": 2}},
			{remove: []string{"b"}},
			{set: map[string]int{"a": 2}, want: "delta [a]"},
		}},
		{"Delta: a non-wildcard stream's first request for nothing that exists waits", resourcev3.EndpointType, []cacheStep{
			{delta: true, subscribe: []string{"a"}},
			{set: map[string]int{"a": 1}, want: "delta [a]"},
		}},
		{"Delta: a reconnecting client is sent only what differs from the versions it has", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1, "b": 1, "c": 1}},
			{delta: true, subscribe: []string{"a", "b", "c"}, initial: map[string]int{"a": 1, "b": 2}, want: "delta [b c]"},
		}},
		{"Delta: a reconnecting client that has everything waits", resourcev3.EndpointType, []cacheStep{
			{set: map[string]int{"a": 1}},
			{delta: true, subscribe: []string{"a"}, initial: map[string]int{"a": 1}},
			{set: map[string]int{"a": 2}, want: "delta [a]"},
		}},
		{"Delta: a wildcard stream's first request is answered at once", resourcev3.ClusterType, []cacheStep{
			{delta: true, want: "delta []"},
			{delta: true},
			{set: map[string]int{"a": 1}, want: "delta [a]"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newCacheHarness(tt.typeURL)
			for i, step := range tt.steps {
				if got := h.step(t, step); got != step.want {
					t.Fatalf("step %d: response %q, want %q", i, got, step.want)
				}
			}
		})
	}
}

// cacheHarness drives a Resources and, alongside, go-control-plane's
// LinearCache with the same steps and one stream's subscription per
// protocol, kept as go-control-plane's servers keep them.
type cacheHarness struct {
	typeURL string
	ours    *Resources
	linear  *cachev3.LinearCache
	// per cache: the stream's SotW and Delta subscriptions and open watches
	sotwSub, deltaSub   [2]*stream.Subscription
	sotwOut             [2]chan cachev3.Response
	deltaOut            [2]chan cachev3.DeltaResponse
	sotwCancel, dCancel [2]func()
	sotwReq             *discovery.DiscoveryRequest
	deltaReq            *discovery.DeltaDiscoveryRequest
	// sotwVersion is the version_info of the last SotW response, which the
	// stream's next request carries.
	sotwVersion string
}

func newCacheHarness(typeURL string) *cacheHarness {
	h := &cacheHarness{typeURL: typeURL, ours: NewResources(typeURL), linear: cachev3.NewLinearCache(typeURL)}
	for i := range 2 {
		h.sotwOut[i] = make(chan cachev3.Response, 4)
		h.deltaOut[i] = make(chan cachev3.DeltaResponse, 4)
	}
	return h
}

// legacyWildcard is go-control-plane's default: an empty first request is a
// wildcard for CDS and LDS only.
func (h *cacheHarness) legacyWildcard() bool { return h.typeURL == resourcev3.ClusterType }

func (h *cacheHarness) caches() [2]cachev3.Cache { return [2]cachev3.Cache{h.ours, h.linear} }

func (h *cacheHarness) resource(name string, content int) types.Resource {
	if h.typeURL == resourcev3.ClusterType {
		return gen.Encode(name, &cluster.Cluster{Name: name, AltStatName: fmt.Sprint(content)})
	}
	return gen.Encode(name, &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
		{LbEndpoints: []*endpoint.LbEndpoint{{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{Address: "10.0.0.1", PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(content)}}}}}}}}},
	}})
}

// step applies s to both caches and returns the response it caused on
// ours, after checking the LinearCache gave the same one.
func (h *cacheHarness) step(t *testing.T, s cacheStep) string {
	t.Helper()
	switch {
	case s.set != nil || s.remove != nil:
		set := make(map[string]types.Resource, len(s.set))
		for name, content := range s.set {
			set[name] = h.resource(name, content)
		}
		if err := h.ours.Update(set, s.remove); err != nil {
			t.Fatal(err)
		}
		if err := h.linear.UpdateResources(set, s.remove); err != nil {
			t.Fatal(err)
		}
	case s.sotw != nil:
		h.sotwReq = &discovery.DiscoveryRequest{TypeUrl: h.typeURL, ResourceNames: s.sotw, VersionInfo: s.version}
		for i, c := range h.caches() {
			if h.sotwSub[i] == nil {
				sub := stream.NewSotwSubscription(s.sotw, h.legacyWildcard())
				h.sotwSub[i] = &sub
			} else {
				if h.sotwCancel[i] != nil {
					h.sotwCancel[i]()
				}
				h.sotwSub[i].SetResourceSubscription(s.sotw)
			}
			cancel, err := c.CreateWatch(h.sotwReq, *h.sotwSub[i], h.sotwOut[i])
			if err != nil {
				t.Fatal(err)
			}
			h.sotwCancel[i] = cancel
		}
	case s.delta:
		h.deltaReq = &discovery.DeltaDiscoveryRequest{TypeUrl: h.typeURL, ResourceNamesSubscribe: s.subscribe, ResourceNamesUnsubscribe: s.unsub}
		if h.deltaSub[0] != nil {
			h.deltaReq.ResponseNonce = "1"
		}
		for i, c := range h.caches() {
			if h.deltaSub[i] == nil {
				var initial map[string]string
				if s.initial != nil {
					initial = make(map[string]string)
					for name, content := range s.initial {
						wire, err := encoding(h.resource(name, content))
						if err != nil {
							t.Fatal(err)
						}
						initial[name] = cachev3.HashResource(wire)
					}
				}
				sub := stream.NewDeltaSubscription(s.subscribe, s.unsub, initial, h.legacyWildcard())
				h.deltaSub[i] = &sub
			} else {
				if h.dCancel[i] != nil {
					h.dCancel[i]()
				}
				h.deltaSub[i].UpdateResourceSubscriptions(s.subscribe, s.unsub)
			}
			cancel, err := c.CreateDeltaWatch(h.deltaReq, *h.deltaSub[i], h.deltaOut[i])
			if err != nil {
				t.Fatal(err)
			}
			h.dCancel[i] = cancel
		}
	}
	got := [2]string{}
	for i := range 2 {
		got[i] = h.take(t, i)
	}
	if got[0] != got[1] {
		t.Fatalf("Resources answered %q, LinearCache %q", got[0], got[1])
	}
	var short []string
	for _, r := range strings.Split(got[0], "; ") {
		r, _, _ = strings.Cut(r, " v")
		short = append(short, r)
	}
	return strings.Join(short, "; ")
}

// take reads the responses cache i gave, if any, applies them to the
// subscriptions as go-control-plane's servers do, and describes them:
// "[names] - [removed] v<version> <returned versions>", SotW's then Delta's.
func (h *cacheHarness) take(t *testing.T, i int) string {
	t.Helper()
	var out []string
	select {
	case r := <-h.sotwOut[i]:
		resp, err := r.GetDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		h.sotwSub[i].SetReturnedResources(r.GetReturnedResources())
		h.sotwCancel[i] = nil
		if i == 0 {
			h.sotwVersion = resp.GetVersionInfo()
		}
		var names []string
		for _, a := range resp.GetResources() {
			names = append(names, nameOf(t, h.typeURL, a.GetValue()))
		}
		out = append(out, describe(names, nil, resp.GetVersionInfo(), r.GetReturnedResources()))
	default:
	}
	select {
	case r := <-h.deltaOut[i]:
		resp, err := r.GetDeltaDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		h.deltaSub[i].SetReturnedResources(r.GetNextVersionMap())
		h.dCancel[i] = nil
		var names []string
		for _, res := range resp.GetResources() {
			if got := nameOf(t, h.typeURL, res.GetResource().GetValue()); got != res.GetName() {
				t.Fatalf("Delta resource %q carries %q", res.GetName(), got)
			}
			names = append(names, res.GetName())
		}
		out = append(out, "delta "+describe(names, resp.GetRemovedResources(), resp.GetSystemVersionInfo(), r.GetNextVersionMap()))
	default:
	}
	return strings.Join(out, "; ")
}

func nameOf(t *testing.T, typeURL string, wire []byte) string {
	t.Helper()
	if typeURL == resourcev3.ClusterType {
		var c cluster.Cluster
		if err := proto.Unmarshal(wire, &c); err != nil {
			t.Fatal(err)
		}
		return c.GetName()
	}
	var cla endpoint.ClusterLoadAssignment
	if err := proto.Unmarshal(wire, &cla); err != nil {
		t.Fatal(err)
	}
	return cla.GetClusterName()
}

func describe(names, removed []string, version string, returned map[string]string) string {
	slices.Sort(names)
	slices.Sort(removed)
	out := fmt.Sprintf("%v", names)
	if len(removed) > 0 {
		out += fmt.Sprintf(" - %v", removed)
	}
	keys := slices.Sorted(maps.Keys(returned))
	var r []string
	for _, k := range keys {
		r = append(r, k+"="+returned[k])
	}
	return out + " v" + version + " " + strings.Join(r, ",")
}

// TestResourceCacheMatchesLinearCache runs random updates, removals and
// SotW and Delta requests against Resources and go-control-plane's
// LinearCache side by side: every step must cause the same response
// (resources, removals, version and the versions the stream then holds)
// from both, or none from both.
func TestResourceCacheMatchesLinearCache(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	subset := func(r *rand.Rand) []string {
		var out []string
		for _, n := range names {
			if r.IntN(2) == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	for _, typeURL := range []string{resourcev3.EndpointType, resourcev3.ClusterType} {
		for seed := range uint64(50) {
			t.Run(fmt.Sprintf("%s/seed%d", typeURL[strings.LastIndex(typeURL, ".")+1:], seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				h := newCacheHarness(typeURL)
				for range 60 {
					var s cacheStep
					switch r.IntN(5) {
					case 0, 1:
						s.set = map[string]int{}
						for _, n := range subset(r) {
							s.set[n] = r.IntN(3)
						}
						if r.IntN(3) == 0 {
							s.remove = subset(r)
						}
					case 2, 3:
						s.sotw = subset(r)
						if r.IntN(4) > 0 {
							s.version = h.sotwVersion
						}
					case 4:
						s.delta = true
						if r.IntN(2) == 0 {
							s.subscribe = subset(r)
						} else {
							s.unsub = subset(r)
						}
					}
					h.step(t, s)
				}
			})
		}
	}
}

// TestResourceCacheNeverBlocks: a response to a stream whose channel is full
// is delivered later, and given up when the watch is cancelled; neither the
// update nor CreateWatch waits for the stream (go-control-plane's stream
// loop creates watches and drains the channel from one goroutine).
func TestResourceCacheNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewResources(resourcev3.EndpointType)
		if err := c.Update(map[string]types.Resource{"a": gen.Encode("a", &endpoint.ClusterLoadAssignment{ClusterName: "a"})}, nil); err != nil {
			t.Fatal(err)
		}
		full := make(chan cachev3.Response) // no room: every send waits for a reader
		req := &discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"a"}}
		if _, err := c.CreateWatch(req, stream.NewSotwSubscription(req.ResourceNames, false), full); err != nil {
			t.Fatal(err)
		}
		if resp, err := (<-full).GetDiscoveryResponse(); err != nil || len(resp.GetResources()) != 1 {
			t.Fatalf("late response %v, %v; want the assignment", resp, err)
		}

		cancel, err := c.CreateWatch(req, stream.NewSotwSubscription(req.ResourceNames, false), full)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait() // the pending send gave up; a leaked sender fails the bubble
		cancel()        // a second cancel is a no-op
	})
}

// TestEachResourceVersionIsMarshalledOnce: every response carrying a
// resource version, SotW and Delta, shares one encoding (rule 3).
func TestEachResourceVersionIsMarshalledOnce(t *testing.T) {
	const clusterA = "outbound|80||a.local"
	c := NewResources(resourcev3.EndpointType)
	cla := &endpoint.ClusterLoadAssignment{ClusterName: clusterA, Endpoints: []*endpoint.LocalityLbEndpoints{{
		LbEndpoints: []*endpoint.LbEndpoint{{HealthStatus: core.HealthStatus_HEALTHY}},
	}}}
	if err := c.Update(map[string]types.Resource{clusterA: cla}, nil); err != nil {
		t.Fatal(err)
	}
	var values [][]byte
	for range 2 {
		out := make(chan cachev3.Response, 1)
		req := &discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{clusterA}}
		if _, err := c.CreateWatch(req, stream.NewSotwSubscription(req.ResourceNames, false), out); err != nil {
			t.Fatal(err)
		}
		resp, err := (<-out).GetDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, resp.GetResources()[0].GetValue())
	}
	out := make(chan cachev3.DeltaResponse, 1)
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{clusterA}}
	if _, err := c.CreateDeltaWatch(req, stream.NewDeltaSubscription(req.ResourceNamesSubscribe, nil, nil, false), out); err != nil {
		t.Fatal(err)
	}
	delta, err := (<-out).GetDeltaDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	values = append(values, delta.GetResources()[0].GetResource().GetValue())
	for i, v := range values[1:] {
		if unsafe.SliceData(v) != unsafe.SliceData(values[0]) {
			t.Errorf("response %d carries its own marshalled copy of the assignment, want the shared bytes", i+1)
		}
	}
}

// TestCachedEntrySize: a cache holds one entry per resource, served or
// not, so every byte of it is paid per Cluster, Listener, Route and
// ClusterLoadAssignment (P1 in docs/benchmarks.md).
func TestCachedEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(cachedEntry{}); got > 32 {
		t.Errorf("unsafe.Sizeof(cachedEntry{}) = %d, want at most 32", got)
	}
}

// TestVariedResourcesByProfile: a Varied resource (xds/gen) is served to
// each watch in its profile's form, under one SotW version; Delta
// versions hash the form sent; served hears of each substituted form sent
// to a profile that gets one; Differences sees a change of any form.
func TestVariedResourcesByProfile(t *testing.T) {
	svc := func(lb networking.LoadBalancerSettings_SimpleLB) *model.Service {
		return &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 80, Protocol: model.ProtocolGRPC}},
			Policy: &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
				LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: lb}}}}}
	}
	clusterOf := func(s *model.Service) types.Resource {
		clusters, _, _ := gen.Resources(s)
		return clusters[0]
	}
	leastRequest := clusterOf(svc(networking.LoadBalancerSettings_LEAST_REQUEST))
	varied, ok := leastRequest.(*gen.Varied)
	if !ok {
		t.Fatalf("a LEAST_REQUEST cluster is a %T, want *gen.Varied", leastRequest)
	}
	name := varied.GetName()
	lacking := int(gen.LeastRequest | gen.RandomLB)
	variantWire, _ := varied.Variant(lacking)

	c := NewResources(resourcev3.ClusterType)
	var served []string
	c.ServeProfiles(gen.NumProfiles, func(n *core.Node) int {
		if n.GetId() == "old" {
			return lacking
		}
		return 0
	}, func(n *core.Node, substituted []string) {
		served = append(served, n.GetId()+" "+strings.Join(substituted, ","))
	})
	if err := c.Update(map[string]types.Resource{name: leastRequest}, nil); err != nil {
		t.Fatal(err)
	}
	sotw := func(node string) *discovery.DiscoveryResponse {
		out := make(chan cachev3.Response, 1)
		sub := stream.NewSotwSubscription(nil, true)
		if _, err := c.CreateWatch(&cachev3.Request{TypeUrl: resourcev3.ClusterType, Node: &core.Node{Id: node}}, sub, out); err != nil {
			t.Fatal(err)
		}
		resp, err := (<-out).GetDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	delta := func(node string) *discovery.DeltaDiscoveryResponse {
		out := make(chan cachev3.DeltaResponse, 1)
		sub := stream.NewDeltaSubscription(nil, nil, nil, true)
		if _, err := c.CreateDeltaWatch(&cachev3.DeltaRequest{TypeUrl: resourcev3.ClusterType, Node: &core.Node{Id: node}}, sub, out); err != nil {
			t.Fatal(err)
		}
		resp, err := (<-out).GetDeltaDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	current, old := sotw("current"), sotw("old")
	if got := current.GetResources()[0].GetValue(); !slices.Equal(got, varied.Encoding()) {
		t.Errorf("profile 0 was sent another form than the resource's own")
	}
	if got := old.GetResources()[0].GetValue(); !slices.Equal(got, variantWire) {
		t.Errorf("the lacking profile was sent another form than its variant")
	}
	if current.GetVersionInfo() != old.GetVersionInfo() {
		t.Errorf("SotW versions differ by profile: %s and %s", current.GetVersionInfo(), old.GetVersionInfo())
	}
	dCurrent, dOld := delta("current"), delta("old")
	if got, want := dCurrent.GetResources()[0].GetVersion(), cachev3.HashResource(varied.Encoding()); got != want {
		t.Errorf("profile 0's Delta version = %s, want the hash of the own form %s", got, want)
	}
	if got, want := dOld.GetResources()[0].GetVersion(), cachev3.HashResource(variantWire); got != want {
		t.Errorf("the lacking profile's Delta version = %s, want the hash of its form %s", got, want)
	}
	if want := []string{"old loadBalancer.simple:LEAST_REQUEST", "old loadBalancer.simple:LEAST_REQUEST"}; !slices.Equal(served, want) {
		t.Errorf("served heard %q, want %q (one per response to the lacking profile)", served, want)
	}

	same := clusterOf(svc(networking.LoadBalancerSettings_LEAST_REQUEST))
	if update, _ := c.Differences(map[string]types.Resource{name: same}, nil); len(update) != 0 {
		t.Errorf("the same forms again count as a change")
	}
	plain, _, _ := gen.Resources(&model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 80, Protocol: model.ProtocolGRPC}}})
	if update, _ := c.Differences(map[string]types.Resource{name: plain[0]}, nil); len(update) != 1 {
		t.Errorf("a resource no longer varied does not count as a change")
	}
	if err := c.Update(map[string]types.Resource{name: plain[0]}, nil); err != nil {
		t.Fatal(err)
	}
	if len(c.variants) != 0 {
		t.Errorf("the variants of a resource no longer varied are kept")
	}
}

// TestLocalizedResourcesByPlace: a Localized resource (xds/gen) is served
// to each watch in the form of its node's place (ServeLocalized), built
// once per form and shared, under one SotW version; Delta versions hash
// the form sent; a node without locality or labels gets the own form;
// Differences sees a change of the forms that leaves the own form as it
// was.
func TestLocalizedResourcesByPlace(t *testing.T) {
	assignment := func(failover []*networking.LocalityLoadBalancerSetting_Failover) types.Resource {
		svc := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 80, Protocol: model.ProtocolGRPC}},
			Policy: &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
				OutlierDetection: &networking.OutlierDetection{},
				LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
					Failover: failover}}}}}
		var eps []*model.Endpoint
		for i, loc := range []string{"r1/z1", "r2/z1", "r3/z1"} {
			eps = append(eps, &model.Endpoint{Address: fmt.Sprintf("10.0.0.%d", i+1), ServicePortName: "grpc", EndpointPort: 80, Weight: 1, Locality: loc})
		}
		cla, _ := gen.LoadAssignments(svc, gen.EncodeEndpoints(eps, nil))
		return cla["outbound|80||a.local"]
	}
	res := assignment(nil)
	l, ok := res.(*gen.Localized)
	if !ok {
		t.Fatalf("an assignment with outlier detection is a %T, want *gen.Localized", res)
	}
	name := l.GetName()
	c := NewResources(resourcev3.EndpointType)
	c.ServeLocalized(func(n *core.Node) (string, map[string]string) { return n.GetLocality().GetRegion(), nil })
	if err := c.Update(map[string]types.Resource{name: res}, nil); err != nil {
		t.Fatal(err)
	}
	sub := func() stream.Subscription {
		return stream.NewSotwSubscription([]string{name}, false)
	}
	sotw := func(region string) *discovery.DiscoveryResponse {
		out := make(chan cachev3.Response, 1)
		req := &cachev3.Request{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{name}, Node: &core.Node{Locality: &core.Locality{Region: region}}}
		if _, err := c.CreateWatch(req, sub(), out); err != nil {
			t.Fatal(err)
		}
		resp, err := (<-out).GetDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	firstPriority := func(resp *discovery.DiscoveryResponse) string {
		cla := &endpoint.ClusterLoadAssignment{}
		if err := resp.GetResources()[0].UnmarshalTo(cla); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range cla.GetEndpoints() {
			if e.GetPriority() == 0 {
				out = append(out, e.GetLocality().GetRegion())
			}
		}
		return strings.Join(out, ",")
	}
	r1, r1Again, r2, none := sotw("r1"), sotw("r1"), sotw("r2"), sotw("")
	for _, tc := range []struct {
		resp *discovery.DiscoveryResponse
		want string
	}{{r1, "r1"}, {r1Again, "r1"}, {r2, "r2"}, {none, "r1,r2,r3"}} {
		if got := firstPriority(tc.resp); got != tc.want {
			t.Errorf("priority 0 is %s, want %s", got, tc.want)
		}
		if tc.resp.GetVersionInfo() != r1.GetVersionInfo() {
			t.Errorf("SotW versions differ by place")
		}
	}
	if !slices.Equal(none.GetResources()[0].GetValue(), l.Encoding()) {
		t.Errorf("a node without locality was sent another form than the own")
	}
	if r1.GetResources()[0] != r1Again.GetResources()[0] {
		t.Errorf("two nodes of one place were sent forms built twice")
	}
	if got := len(c.localized[name].forms); got != 2 {
		t.Errorf("%d forms built, want 2 (r1, r2; the own form is the resource's)", got)
	}
	out := make(chan cachev3.DeltaResponse, 1)
	dreq := &cachev3.DeltaRequest{TypeUrl: resourcev3.EndpointType, Node: &core.Node{Locality: &core.Locality{Region: "r2"}}}
	if _, err := c.CreateDeltaWatch(dreq, stream.NewDeltaSubscription([]string{name}, nil, nil, false), out); err != nil {
		t.Fatal(err)
	}
	d, err := (<-out).GetDeltaDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.GetResources()[0].GetVersion(), cachev3.HashResource(r2.GetResources()[0].GetValue()); got != want {
		t.Errorf("the Delta version = %s, want the hash of the place's form %s", got, want)
	}

	if update, _ := c.Differences(map[string]types.Resource{name: assignment(nil)}, nil); len(update) != 0 {
		t.Errorf("the same forms again count as a change")
	}
	failover := assignment([]*networking.LocalityLoadBalancerSetting_Failover{{From: "r1", To: "r3"}})
	if !slices.Equal(failover.(*gen.Localized).Encoding(), l.Encoding()) {
		t.Fatalf("the test wants a change that keeps the own form")
	}
	if update, _ := c.Differences(map[string]types.Resource{name: failover}, nil); len(update) != 1 {
		t.Errorf("a change of the forms only does not count as a change")
	}
	if err := c.Update(map[string]types.Resource{name: failover}, nil); err != nil {
		t.Fatal(err)
	}
	if got := len(c.localized[name].forms); got != 0 {
		t.Errorf("the forms of the version before are kept")
	}
}

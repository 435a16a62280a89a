package gen

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// BenchmarkEDSGeneration measures making one ClusterLoadAssignment's bytes
// from endpoints none of which was encoded yet (target P6,
// docs/benchmarks.md; ns/endpoint is the cost per endpoint): each
// endpoint's LbEndpoint is encoded (EncodeEndpoints), as for a new shard,
// the assignment assembled, as an EDS push does per changed service port,
// and marshalled as the go-control-plane cache does it
// (cachev3.MarshalResource). The endpoints come sorted, as the endpoint
// shards hold them. A push after a change re-encodes only the changed
// endpoints: BenchmarkEDSBuildEncode.
func BenchmarkEDSGeneration(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			svc := grpcService("a.local", 80)
			endpoints := benchEndpoints(n)
			benchGenerate(b, svc, endpoints)
		})
	}
}

// benchEndpoints are n endpoints on port 80 at 10.x.y.z, in 3 localities
// (r1/z0/, r1/z1/, r1/z2/ in turn).
func benchEndpoints(n int) []*model.Endpoint {
	endpoints := make([]*model.Endpoint, n)
	for i := range endpoints {
		endpoints[i] = ep(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), 80, fmt.Sprintf("r1/z%d/", i%3))
	}
	return endpoints
}

// benchGenerate runs BenchmarkEDSGeneration's loop over endpoints.
func benchGenerate(b *testing.B, svc *model.Service, endpoints []*model.Endpoint) {
	endpoints = SortEndpoints(endpoints)
	b.ReportAllocs()
	for b.Loop() {
		for _, cla := range encodeEveryPort(svc, EncodeEndpoints(endpoints, nil)) {
			if _, err := cachev3.MarshalResource(cla); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(endpoints)), "ns/endpoint")
}

// BenchmarkEDSBuildEncode measures what an EDS push does for one service of
// 1,000 endpoints in 3 localities after one endpoint changed: the endpoint
// shards' encoding of the new set (EncodeEndpoints: one endpoint's weight
// moves between 1 and 2, which changes its LbEndpoint and its locality's
// weight; the set is listed in an order it sorts), the service's
// ClusterLoadAssignment is built and encoded as the cache hands it to every
// stream (LoadAssignments, cachev3.MarshalResource). ns/endpoint is ns/op
// over 1,000. The shards' lock and map lookup around it are left out.
func BenchmarkEDSBuildEncode(b *testing.B) {
	const n = 1000
	svc := grpcService("a.local", 80)
	endpoints := benchEndpoints(n)
	shard := EncodeEndpoints(endpoints, nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		changed := *endpoints[i%n]
		changed.Weight = 3 - changed.Weight
		endpoints[i%n] = &changed
		i++
		shard = EncodeEndpoints(endpoints, shard)
		cla, _ := LoadAssignments(svc, slices.Clone(shard))
		for _, res := range cla {
			if _, err := cachev3.MarshalResource(res); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/endpoint")
}

// BenchmarkEDSUniqueLabels is BenchmarkEDSGeneration's 1,000 endpoints when
// each carries a label of its own (an instance ID in its registry
// metadata): every endpoint is a place of its own (endpointPlace), so each
// one misses the per-call place cache and is interned.
func BenchmarkEDSUniqueLabels(b *testing.B) {
	const n = 1000
	svc := grpcService("a.local", 80)
	endpoints := benchEndpoints(n)
	for i, e := range endpoints {
		e.Labels = map[string]string{"app": "a", "instance": strconv.Itoa(i)}
	}
	benchGenerate(b, svc, endpoints)
}

// BenchmarkEDSLocalizedForm: the service of BenchmarkEDSBuildEncode (1,000
// endpoints over its localities) with a DestinationRule failing over by a
// label and by locality (outlier detection, failoverPriority [tier],
// failover regions): per op, the Localized assignment is built
// (LoadAssignments) and the form of one client place is encoded (Form),
// what the EDS cache does for the first stream of each place after a
// change. ns/endpoint is ns/op over 1,000.
func BenchmarkEDSLocalizedForm(b *testing.B) {
	const n = 1000
	svc := grpcService("a.local", 80)
	svc.Policy = &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{
		OutlierDetection: &networking.OutlierDetection{},
		LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
			FailoverPriority: []string{"tier"},
			Failover:         []*networking.LocalityLoadBalancerSetting_Failover{{From: "r1", To: "r2"}}}}}}
	endpoints := benchEndpoints(n)
	for i, e := range endpoints {
		e.Labels = map[string]string{"app": "a", "tier": []string{"gold", "silver"}[i%2]}
	}
	shard := EncodeEndpoints(endpoints, nil)
	labels := map[string]string{"tier": "gold"}
	b.ReportAllocs()
	for b.Loop() {
		cla, _ := LoadAssignments(svc, slices.Clone(shard))
		l := cla["outbound|80||a.local"].(*Localized)
		if len(l.Form(l.FormKey(endpoints[0].Locality, labels))) == 0 {
			b.Fatal("no form")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/endpoint")
}

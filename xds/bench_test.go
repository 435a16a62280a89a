package xds

import (
	"fmt"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/model"
)

// BenchmarkEDSGeneration measures building and marshalling one
// ClusterLoadAssignment, the work an EDS push does per changed service port;
// ns/endpoint is the cost per endpoint (target P6, docs/benchmarks.md). The
// endpoints come sorted, as endpointShards hands them to the push; the marshal
// is proto.Marshal, as the go-control-plane cache does it.
func BenchmarkEDSGeneration(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			svc := grpcService("a.local", 80)
			endpoints := make([]*model.Endpoint, n)
			for i := range endpoints {
				endpoints[i] = ep(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), 80, fmt.Sprintf("r1/z%d/", i%3))
			}
			endpoints = sortEndpoints(endpoints)
			b.ReportAllocs()
			for b.Loop() {
				for _, cla := range buildLoadAssignments(svc, endpoints) {
					if _, err := proto.Marshal(cla); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/endpoint")
		})
	}
}

package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// BenchmarkKubeWrites measures the writer against the real kube-apiserver: 1,000
// services with one instance each written from a cold start, reported as
// writes/s, then a resync with nothing changed, reported as resync-writes
// (goal 0). Inline mode writes 1,000 ServiceEntries; WorkloadEntry mode
// 1,000 ServiceEntries and 1,000 WorkloadEntries. The harness's client limit
// (QPS 1000, burst 2000) keeps client-go's limiter out of the measurement.
// Run with
//
//	MESHBRIDGE_REQUIRE_SERVERS=1 go test -run '^$' -bench KubeWrites -benchtime 3x ./kube/
func BenchmarkKubeWrites(b *testing.B) {
	const services = 1000
	k := harness.SharedKube(b)
	for _, mode := range []translate.EndpointMode{translate.EndpointsInline, translate.EndpointsWorkloadEntry} {
		objects := services
		if mode == translate.EndpointsWorkloadEntry {
			objects = 2 * services
		}
		b.Run(string(mode), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				p := newPipeline(b, k, k.Namespace(b), pipelineOptions{endpoints: mode})
				for i := range services {
					name := fmt.Sprintf("svc-%04d", i)
					p.put(name, inst("n1/"+name, fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), 8080, nil))
				}
				b.StartTimer()
				start := time.Now()
				stop := p.start()
				p.settle()
				elapsed := time.Since(start)
				b.StopTimer()
				if got := p.requests.Count("PATCH"); got != objects {
					b.Fatalf("%d applies, want %d", got, objects)
				}
				b.ReportMetric(float64(objects)/elapsed.Seconds(), "writes/s")

				before := p.requests.Writes()
				if err := p.writer.resync(context.Background()); err != nil {
					b.Fatal(err)
				}
				p.settle()
				b.ReportMetric(float64(p.requests.Writes()-before), "resync-writes")
				stop()
				b.StartTimer()
			}
		})
	}
}

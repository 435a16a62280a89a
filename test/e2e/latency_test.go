package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// BenchmarkRegistrationToFirstCall measures, per iteration, the time from a
// Consul registration (registered passing) of a new service to the first
// successful call of a proxyless gRPC client already waiting for it
// (WaitForReady), through meshbridge, with the default 100ms debounce and
// with a 1ms one (what the pipeline costs besides the debounce's quiet
// period). It reports the median and the maximum over b.N runs:
//
//	go test ./test/e2e -run '^$' -bench RegistrationToFirstCall -benchtime 20x
func BenchmarkRegistrationToFirstCall(b *testing.B) {
	for _, after := range []string{"100ms", "1ms"} {
		b.Run("debounce="+after, func(b *testing.B) {
			benchmarkRegistrationToFirstCall(b, fmt.Sprintf("debounce: {after: %s}\n", after))
		})
	}
}

func benchmarkRegistrationToFirstCall(b *testing.B, extraConfig string) {
	consul := harness.StartConsul(b)
	port := startBackend(b, "backend")
	br := startBridge(b, consulRegistry(consul)+extraConfig)
	var samples []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		name := fmt.Sprintf("svc-%d", i)
		c := startClient(b, br.xdsAddr, fmt.Sprintf("xds:///%s.service.consul:%d", name, port), "-wait-for-ready", "-timeout", "60s")
		time.Sleep(300 * time.Millisecond) // let the client subscribe before the registration
		b.StartTimer()
		registered := time.Now()
		consul.RegisterInstance(b, name, name+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
		first := c.firstSuccess(b, 30*time.Second)
		b.StopTimer()
		samples = append(samples, first.Sub(registered))
		c.stop()
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "max-ms")
	b.Logf("registration → first call over %d runs: median %s, max %s", len(samples), samples[len(samples)/2], samples[len(samples)-1])
}

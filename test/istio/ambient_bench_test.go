package istio

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkAmbientRegistryChangeToWDS measures, per endpoint mode, the time
// from a registry change (an instance added to, then removed from, the
// file registry, alternately) to ztunnel's WDS view holding it: meshbridge's
// file watch, Syncer and Kubernetes writer, the apiserver, istiod's
// informers, ambient index and debounce, and the Delta push. It reports the
// median and the maximum over b.N changes (make bench-ambient: 20).
func BenchmarkAmbientRegistryChangeToWDS(b *testing.B) {
	a := startAmbient(b)
	z := a.startZtunnel(b)
	for _, mode := range endpointModes {
		b.Run(string(mode), func(b *testing.B) {
			s := a.scenario(b)
			host := s.host("bench")
			one := fileServices{host: svc(host, 8080, "tcp", instance("10.4.0.1", 8080, nil))}
			two := fileServices{host: svc(host, 8080, "tcp", instance("10.4.0.1", 8080, nil), instance("10.4.0.2", 8080, nil))}
			writeServices(b, s.path, one)
			s.startBridge(b, s.ns, s.path, bridgeOptions{endpoints: mode})
			se := s.allocated(b, host)[host]
			z.awaitService(b, s.ns, host, vips(se), 8080, plain("10.4.0.1:8080"))
			var took []time.Duration
			b.ResetTimer()
			for i := range b.N {
				reg, want := two, plain("10.4.0.1:8080", "10.4.0.2:8080")
				if i%2 == 1 {
					reg, want = one, plain("10.4.0.1:8080")
				}
				at := writeServices(b, s.path, reg)
				seen := z.awaitService(b, s.ns, host, vips(se), 8080, want)
				took = append(took, seen.Sub(at))
			}
			b.StopTimer()
			slices.Sort(took)
			median := took[len(took)/2]
			if len(took)%2 == 0 {
				median = (took[len(took)/2-1] + median) / 2
			}
			b.ReportMetric(float64(median)/1e6, "median-ms")
			b.ReportMetric(float64(took[len(took)-1])/1e6, "max-ms")
			b.Logf("%s: registry change → ztunnel's WDS view over %d changes: median %s, max %s", mode, len(took),
				median.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
		})
	}
}

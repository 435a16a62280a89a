package translate

import (
	"fmt"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
)

// benchService is a Consul-like service with n instances on two ports, with
// a few labels each, some needing sanitizing.
func benchService(n int) registries.Service {
	svc := registries.Service{Name: "bench"}
	for i := range n {
		svc.Instances = append(svc.Instances, registries.Instance{
			ID:       fmt.Sprintf("node-%03d/bench-%d", i, i),
			Address:  fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256+1),
			Port:     uint32(8080 + i%2),
			Protocol: "grpc",
			Labels:   map[string]string{"version": fmt.Sprintf("v%d", i%3), "zone": "zone-a", "build date": "2024-01-01 10:00"},
			Weight:   uint32(i%5 + 1),
			Locality: "dc1/zone-a",
		})
	}
	return svc
}

func BenchmarkTranslate(b *testing.B) {
	tr := mustNew(b, Options{})
	svc := benchService(100)
	prev := mustTranslate(b, tr, svc, Sticky{}).Sticky
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.Translate(svc, prev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTranslateReusing is BenchmarkTranslate for the Syncer's path: one
// instance of the 100 changed since the Result passed in.
func BenchmarkTranslateReusing(b *testing.B) {
	tr := mustNew(b, Options{})
	svc := benchService(100)
	last := mustTranslate(b, tr, svc, Sticky{})
	changed := benchService(100)
	changed.Instances[0].Address = "10.9.9.9"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.TranslateReusing(changed, last.Sticky, last); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTranslateInline is BenchmarkTranslate in inline mode, where every
// new ServiceEntry's JSON size is checked against MaxObjectBytes (rule 10),
// for a common service and one near the CRD's 4096 endpoints.
func BenchmarkTranslateInline(b *testing.B) {
	for _, n := range []int{100, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			tr := mustNew(b, Options{Endpoints: EndpointsInline})
			svc := benchService(n)
			prev := mustTranslate(b, tr, svc, Sticky{}).Sticky
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.Translate(svc, prev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

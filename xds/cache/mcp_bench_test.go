package cache

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// BenchmarkMCPChange is MCP's cost of one instance change at 1,000 services
// × 10 instances in WorkloadEntry mode: one WorkloadEntry of the store is
// updated (its address moves back and forth) and the WorkloadEntry set is
// rebuilt as a change notice has it rebuilt. ns/op is that rebuild's CPU;
// MCP-B/change the encoded DiscoveryResponse every istiod stream watching
// WorkloadEntries is then sent (MCP is SotW: the whole set).
func BenchmarkMCPChange(b *testing.B) {
	tr, err := translate.New(translate.Options{Registry: "dc1", Namespace: "mesh", HostTemplate: "{{.Service}}.service.consul"})
	if err != nil {
		b.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	service := func(i int, moved bool) registries.Service {
		svc := registries.Service{Name: fmt.Sprintf("svc-%05d", i)}
		for k := range 10 {
			a := i*10 + k
			address := fmt.Sprintf("10.%d.%d.%d", a>>16&255, a>>8&255, a&255)
			if moved && k == 0 {
				address = fmt.Sprintf("11.%d.%d.%d", a>>16&255, a>>8&255, a&255)
			}
			svc.Instances = append(svc.Instances, registries.Instance{
				ID: fmt.Sprintf("node-%d/svc-%05d-%d", a%50, i, k), Address: address, Port: 8080, Protocol: "grpc",
				Weight: 1, Locality: fmt.Sprintf("dc1/zone-%c", 'a'+k%3), Labels: map[string]string{"version": "v1", "env": "bench"},
			})
		}
		return svc
	}
	var moving [2]*model.WorkloadEntry // service 0's first WorkloadEntry, in place and moved
	for i := range 1000 {
		res, err := tr.Translate(service(i, false), translate.Sticky{})
		if err != nil {
			b.Fatal(err)
		}
		for _, we := range res.WorkloadEntries {
			if _, err := store.CreateObserved(we, nil); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := store.Create(res.ServiceEntry); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			moved, err := tr.Translate(service(0, true), res.Sticky)
			if err != nil {
				b.Fatal(err)
			}
			for j, we := range moved.WorkloadEntries {
				if we.Hash != res.WorkloadEntries[j].Hash {
					moving = [2]*model.WorkloadEntry{res.WorkloadEntries[j], we}
				}
			}
		}
	}
	c := NewMCP(store, translate.ValidateConfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.RebuildAll()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if _, err := store.UpdateObserved(moving[n%2], nil); err != nil {
			b.Fatal(err)
		}
		c.rebuild(model.KindWorkloadEntry)
	}
	set := c.sets[model.KindWorkloadEntry]
	resp := &discovery.DiscoveryResponse{VersionInfo: set.version, TypeUrl: "networking.istio.io/v1/WorkloadEntry", Resources: set.resources}
	b.ReportMetric(float64(proto.Size(resp)), "MCP-B/change")
}

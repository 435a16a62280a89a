package syncer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// nopUpdater is an XDSUpdater that does nothing, so the benchmarks measure
// the sync step and the controller alone.
type nopUpdater struct{}

func (nopUpdater) EDSUpdate(string, string, string, []*model.Endpoint, time.Time) {}
func (nopUpdater) EDSCacheUpdate(string, string, string, []*model.Endpoint)       {}
func (nopUpdater) SvcUpdate(string, string, string, model.Event)                  {}
func (nopUpdater) ConfigUpdate(*model.PushRequest)                                {}

// changed moves instance 0 by 100 on odd generations: a generation changes
// one instance of the service, as BenchmarkSyncInstanceChange says.
func changed(k, gen int) int {
	if k == 0 {
		return gen % 2 * 100
	}
	return 0
}

func benchService(i, instances, gen int) registries.Snapshot {
	svc := registries.Service{Name: fmt.Sprintf("svc-%05d", i)}
	for k := range instances {
		svc.Instances = append(svc.Instances, registries.Instance{
			ID:      fmt.Sprintf("node-%d/svc-%05d-%d", k, i, k),
			Address: fmt.Sprintf("10.%d.%d.%d", i/256%256, i%256, k+changed(k, gen)),
			Port:    8080, Protocol: "grpc", Weight: 1, Locality: "dc1/zone-a",
			Labels: map[string]string{"version": "v1", "zone": "zone-a"},
		})
	}
	return registries.Snapshot{Registry: "dc1", Service: svc}
}

func newBenchPipeline(b *testing.B) (*Syncer, *serviceentry.Store) {
	b.Helper()
	tr, err := translate.New(translate.Options{Registry: "dc1", HostTemplate: consul.HostTemplate, Namespace: "mesh"})
	if err != nil {
		b.Fatal(err)
	}
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	serviceentry.NewController(store, nopUpdater{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go store.Run(ctx)
	return New(store, Config{Registries: []Registry{{Name: "dc1", Translator: tr}}}), store
}

// BenchmarkSyncInstanceChange: one instance of one service (10 instances)
// changes its address, in a registry of 1,000 services: translation, store
// diff and write, and the controller's handlers, per change.
//
//	go test ./syncer -run '^$' -bench SyncInstanceChange -benchmem
func BenchmarkSyncInstanceChange(b *testing.B) {
	sy, store := newBenchPipeline(b)
	const services = 1000
	for i := range services {
		sy.Snapshot(benchService(i, 10, 0))
	}
	if err := store.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		sy.Snapshot(benchService(n%services, 10, n/services+1))
	}
	if err := store.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSyncColdStart: the first listing of 1,000 services of 10
// instances each, through to the controller; reported per instance.
func BenchmarkSyncColdStart(b *testing.B) {
	const services, instances = 1000, 10
	snaps := make([]registries.Snapshot, services)
	for i := range snaps {
		snaps[i] = benchService(i, instances, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sy, store := newBenchPipeline(b)
		b.StartTimer()
		for _, s := range snaps {
			sy.Snapshot(s)
		}
		if err := store.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*services*instances), "ns/instance")
}

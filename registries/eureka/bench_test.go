package eureka

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// benchRegistry fills a recorded server with apps applications × per
// instances, UP, on their own ports, with Spring's metadata shape.
func benchRegistry(b *testing.B, apps, per int) *eurekatest.Server {
	s := eurekatest.Start(b)
	for a := range apps {
		for i := range per {
			in := upInstance(fmt.Sprintf("APP-%05d", a), 20000+i)
			in.IPAddr = fmt.Sprintf("10.%d.%d.%d", a/65536, a/256%256, a%256)
			in.Metadata = map[string]string{"management.port": fmt.Sprint(20000 + i), "zone": "z1"}
			s.Put(in, false)
		}
	}
	return s
}

// newBenchWatcher is a watcher of s with a sink that counts snapshots.
func newBenchWatcher(b *testing.B, s *eurekatest.Server, snapshots *int) *watcher {
	reg, err := New(Config{Name: "bench", Servers: []string{s.URL()}, RequestTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return newBenchWatcherOf(b, reg, snapshots)
}

// newBenchWatcherOf is a watcher of reg with a sink that counts snapshots.
func newBenchWatcherOf(b *testing.B, reg *Registry, snapshots *int) *watcher {
	sess := registries.NewSession(reg.health, registries.ReporterConfig{Registry: reg.cfg.Name, Logger: slog.New(slog.DiscardHandler),
		Sink: registries.SinkFuncs{SnapshotFunc: func(registries.Snapshot) { *snapshots++ }}})
	reg.session = sess
	return &watcher{r: reg, s: sess, c: reg.client, apps: map[string]map[string]*instance{}, counts: map[string]int{},
		relist: relistStart, server: -1, failing: map[int]bool{}}
}

// BenchmarkColdSync10k: the first full read of 10,000 applications × 3
// instances from a recorded server over loopback HTTP: the request, the
// decode, and a snapshot per application.
func BenchmarkColdSync10k(b *testing.B) {
	s := benchRegistry(b, 10000, 3)
	b.ReportAllocs()
	for b.Loop() {
		var n int
		w := newBenchWatcher(b, s, &n)
		w.poll(context.Background())
		if n != 10000 {
			b.Fatalf("%d snapshots, want 10000", n)
		}
	}
}

// BenchmarkDeltaRound10k: one interval's work at 10,000 applications × 3
// instances with one instance changed: requests/op is what a registry
// costs Eureka per interval (1: GET apps/delta), whatever the number of
// applications.
func BenchmarkDeltaRound10k(b *testing.B) {
	s := benchRegistry(b, 10000, 3)
	var n int
	w := newBenchWatcher(b, s, &n)
	w.poll(context.Background())
	before := s.Requests("/eureka/apps/delta") + s.Requests("/eureka/apps/")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.Expire()
		in := upInstance("APP-00001", 20000)
		in.IPAddr = fmt.Sprintf("10.200.%d.%d", i/256%256, i%256)
		s.Put(in, true)
		w.poll(context.Background())
	}
	requests := s.Requests("/eureka/apps/delta") + s.Requests("/eureka/apps/") - before
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	if full := testFulls(s); full != 1 {
		b.Fatalf("%d full reads, want the first one only", full)
	}
}

func testFulls(s *eurekatest.Server) int { return s.Requests("/eureka/apps/") }

// BenchmarkRealColdSync1k: the first full read of 1,000 applications × 3
// instances from the real Eureka server (tools/eureka), registered over its
// REST API before the timer starts: the request, the server's answer, the
// decode and a snapshot per application.
func BenchmarkRealColdSync1k(b *testing.B) {
	e := harness.StartEureka(b, harness.EurekaOptions{})
	for a := range 1000 {
		for i := range 3 {
			e.Register(b, harness.EurekaInstance{App: fmt.Sprintf("app-%04d", a), IPAddr: fmt.Sprintf("10.1.%d.%d", a/250, a%250),
				Port: 20000 + i, Metadata: map[string]string{"version": "v1", "zone": "z1"}, DurationInSecs: 3600})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		reg, err := New(Config{Name: "bench-real", Servers: []string{e.URL()}, RequestTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		var n int
		w := newBenchWatcherOf(b, reg, &n)
		w.poll(context.Background())
		if n != 1000 {
			b.Fatalf("%d snapshots, want 1000", n)
		}
	}
}

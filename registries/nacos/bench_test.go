package nacos_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/nacos"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// Scale of BenchmarkColdSync.
const (
	benchServices  = 1000
	benchInstances = 5
	// registerWorkers bounds the setup's concurrent registrations and reads
	// over Polaris's HTTP API.
	registerWorkers = 64
	// subscribeWorkers is polaris-subscribe's concurrency.
	subscribeWorkers = 16
)

// BenchmarkColdSync measures the Nacos registry's cold sync on a real
// Nacos-protocol server: 1,000 services × 5 instances registered in Polaris
// over its Nacos HTTP API (persistent instances, weight 1, metadata protocol,
// version and env; 64 registrations at a time, Polaris's register batching
// on), all of them listed by Polaris before anything is timed. Run it once:
//
//	go test ./registries/nacos -run '^$' -bench ColdSync -benchtime 1x
//
// Sub-benchmarks:
//   - bridge: the pipeline of cmd/bridge (built as bench/bridge.go builds
//     it: registry → syncer.Syncer → Store → Controller →
//     xds.DiscoveryServer on 127.0.0.1:0, workloadentry endpoints,
//     debounce.after 100ms) fed by a nacos.Registry with the defaults.
//     hassynced-s is the time from the start to HasSynced (Syncer ready,
//     Store flushed: cmd/bridge's ready gate), serving-s to the first full
//     push done. B/instance is the live heap after GC (runtime/metrics
//     /gc/heap/live:bytes after two runtime.GC, as bench/ measures P1)
//     while serving with no client, minus that of the same pipeline whose
//     registry's allow-list matches no service (connection, listing and
//     SDK included), per instance. first-snapshot-s is when the registry's
//     first Snapshot reached the Syncer (connection and first listing
//     done), snapshots/s the rate of the rest.
//   - registry: the registry alone into a Sink that only counts, from Run to
//     Synced (synced-s): what the registry takes without the pipeline; and
//     its own live heap per instance (B/instance, measured as for bridge).
//   - polaris-subscribe: how fast Polaris answers the read the registry
//     sends per service (SubscribeServiceRequest over gRPC): a fresh
//     nacos-sdk-go naming client's GetService on every service, one at a
//     time (sequential-subscribes/s) and 16 at a time
//     (concurrent16-subscribes/s).
func BenchmarkColdSync(b *testing.B) {
	// Register batching on (Polaris's default; the harness turns it off for
	// SDK clients that register right after connecting): Polaris then writes
	// up to 128 concurrent registrations in one store transaction.
	p := harness.StartPolaris(b, harness.WithPolarisConfig(func(cfg map[string]any) {
		cfg["naming"].(map[string]any)["batch"].(map[string]any)["register"].(map[string]any)["open"] = true
	}))
	began := time.Now()
	registerAll(b, p.NacosAddress())
	b.Logf("registered %d services × %d instances over HTTP, %d at a time, in %s", benchServices, benchInstances,
		registerWorkers, time.Since(began).Round(time.Millisecond))
	harness.Eventually(b, 2*time.Minute, "Polaris lists every instance", func() error {
		return polarisComplete(b, p)
	})
	b.Logf("Polaris lists them all %s after the first registration", time.Since(began).Round(time.Millisecond))
	cfg := func(b *testing.B) nacos.Config {
		return nacos.Config{
			Name: "nacos-bench", Addresses: []string{p.NacosAddress()}, CacheDir: b.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
	}

	b.Run("bridge", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			empty := cfg(b)
			empty.Services = []string{"no-such-service"}
			eb := startBenchBridge(b, empty)
			eb.waitServing(b)
			emptyHeap := pipeline.LiveHeap()
			eb.stop()

			b.StartTimer()
			br := startBenchBridge(b, cfg(b))
			br.waitReady(b)
			b.StopTimer()
			br.waitServing(b)
			heap := pipeline.LiveHeap()
			st := br.reg.Status()
			br.stop()
			if st.Services != benchServices || st.Instances != benchServices*benchInstances {
				b.Fatalf("synced with %d services, %d instances; want %d, %d", st.Services, st.Instances,
					benchServices, benchServices*benchInstances)
			}
			synced, serving := br.Synced.Sub(br.Started), br.serving.Sub(br.Started)
			first, last, n := br.sink.times()
			perInstance := (float64(heap) - float64(emptyHeap)) / float64(benchServices*benchInstances)
			b.ReportMetric(synced.Seconds(), "hassynced-s")
			b.ReportMetric(serving.Seconds(), "serving-s")
			b.ReportMetric(perInstance, "B/instance")
			b.ReportMetric(first.Sub(br.Started).Seconds(), "first-snapshot-s")
			b.ReportMetric(float64(n-1)/last.Sub(first).Seconds(), "snapshots/s")
			b.Logf("HasSynced %s, serving %s; snapshots: first at %s, %d until %s; live heap %.1f MiB − empty %.1f MiB = %.0f B/instance",
				synced.Round(time.Millisecond), serving.Round(time.Millisecond), first.Sub(br.Started).Round(time.Millisecond),
				n, last.Sub(br.Started).Round(time.Millisecond), pipeline.MiB(heap), pipeline.MiB(emptyHeap), perInstance)
		}
	})

	b.Run("registry", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			empty := cfg(b)
			empty.Services = []string{"no-such-service"}
			stop, _ := pipeline.RunCounting(b, newRegistry(b, empty), 5*time.Minute)
			emptyHeap := pipeline.LiveHeap()
			stop()

			b.StartTimer()
			start := time.Now()
			stop, sink := pipeline.RunCounting(b, newRegistry(b, cfg(b)), 5*time.Minute)
			took := time.Since(start)
			b.StopTimer()
			heap := pipeline.LiveHeap()
			stop()
			if n := sink.N.Load(); n != benchServices {
				b.Fatalf("Synced after %d snapshots, want %d", n, benchServices)
			}
			perInstance := (float64(heap) - float64(emptyHeap)) / float64(benchServices*benchInstances)
			b.ReportMetric(took.Seconds(), "synced-s")
			b.ReportMetric(perInstance, "B/instance")
			b.Logf("registry alone: Synced after %s, %d snapshots; live heap %.1f MiB − empty %.1f MiB = %.0f B/instance",
				took.Round(time.Millisecond), sink.N.Load(), pipeline.MiB(heap), pipeline.MiB(emptyHeap), perInstance)
		}
	})

	b.Run("polaris-subscribe", func(b *testing.B) {
		for range b.N {
			seq := subscribeAll(b, p, 1)
			conc := subscribeAll(b, p, subscribeWorkers)
			b.ReportMetric(benchServices/seq.Seconds(), "sequential-subscribes/s")
			b.ReportMetric(benchServices/conc.Seconds(), "concurrent16-subscribes/s")
			b.Logf("Polaris answers %d subscribes in %s one at a time (%s each), in %s 16 at a time", benchServices,
				seq.Round(time.Millisecond), (seq / benchServices).Round(time.Microsecond), conc.Round(time.Millisecond))
		}
	})
}

// benchService is service i's name.
func benchService(i int) string { return fmt.Sprintf("svc-%04d", i) }

// benchInstanceIP is instance k of service i's address, distinct for every
// instance.
func benchInstanceIP(i, k int) string {
	a := i*benchInstances + k
	return fmt.Sprintf("10.%d.%d.%d", a>>16&255, a>>8&255, a&255)
}

// registerAll registers every instance over the Nacos HTTP API
// (POST /nacos/v1/ns/instance), benchWorkers at a time.
func registerAll(b *testing.B, addr string) {
	b.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: registerWorkers}}
	defer client.CloseIdleConnections()
	meta, _ := json.Marshal(map[string]string{"protocol": "grpc", "version": "v1", "env": "bench"})
	err := forEach(benchServices*benchInstances, func(j int) error {
		i, k := j/benchInstances, j%benchInstances
		form := url.Values{
			"serviceName": {"DEFAULT_GROUP@@" + benchService(i)}, "ip": {benchInstanceIP(i, k)}, "port": {"8080"},
			"weight": {"1"}, "metadata": {string(meta)}, "ephemeral": {"false"}, "healthy": {"true"}, "enabled": {"true"},
		}
		resp, err := client.PostForm("http://"+addr+"/nacos/v1/ns/instance", form)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("register %s %s: %s: %s", benchService(i), benchInstanceIP(i, k), resp.Status, body)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// polarisComplete reports, as an error, how far Polaris's Nacos view is from
// every service with all its instances.
func polarisComplete(b *testing.B, p *harness.Polaris) error {
	if n := len(p.ListServices(b, "", "")); n != benchServices {
		return fmt.Errorf("Polaris lists %d of %d services", n, benchServices)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: registerWorkers}}
	defer client.CloseIdleConnections()
	var short atomic.Int64
	err := forEach(benchServices, func(i int) error {
		q := url.Values{"serviceName": {"DEFAULT_GROUP@@" + benchService(i)}, "healthyOnly": {"false"}}
		resp, err := client.Get("http://" + p.NacosAddress() + "/nacos/v1/ns/instance/list?" + q.Encode())
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var svc struct {
			Hosts []json.RawMessage `json:"hosts"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&svc); err != nil {
			return fmt.Errorf("instances of %s: %s: %v", benchService(i), resp.Status, err)
		}
		if len(svc.Hosts) != benchInstances {
			short.Add(1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n := short.Load(); n > 0 {
		return fmt.Errorf("%d services lack instances", n)
	}
	return nil
}

// forEach calls fn(0) … fn(n-1), registerWorkers at a time, and returns the
// first error.
func forEach(n int, fn func(int) error) error {
	jobs := make(chan int)
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range registerWorkers {
		wg.Go(func() {
			for j := range jobs {
				if err := fn(j); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for j := range n {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	return first
}

// subscribeAll has a fresh nacos-sdk-go naming client read every service
// with GetService (one SubscribeServiceRequest each: nothing is cached),
// workers at a time, and returns how long that took.
func subscribeAll(b *testing.B, p *harness.Polaris, workers int) time.Duration {
	b.Helper()
	dir := b.TempDir()
	nc, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			TimeoutMs: 5000, NotLoadCacheAtStart: true, CacheDir: dir, LogDir: dir, LogLevel: "error",
		},
		ServerConfigs: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: uint64(p.Ports().NacosHTTP)}},
	})
	if err != nil {
		b.Fatalf("nacos naming client: %v", err)
	}
	defer nc.CloseClient()
	jobs := make(chan int)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				svc, err := nc.GetService(vo.GetServiceParam{ServiceName: benchService(i)})
				if err != nil || len(svc.Hosts) != benchInstances {
					failed.Add(1)
				}
			}
		})
	}
	for i := range benchServices {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d GetService calls failed or came back short", n, benchServices)
	}
	return took
}

// benchBridge is cmd/bridge's pipeline (bench/pipeline) on a
// nacos.Registry, its snapshots timed.
type benchBridge struct {
	*pipeline.Pipeline
	reg     *nacos.Registry
	sink    *timingSink
	serving time.Time
}

func startBenchBridge(b *testing.B, cfg nacos.Config) *benchBridge {
	b.Helper()
	reg, err := nacos.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	br := &benchBridge{reg: reg}
	br.Pipeline, err = pipeline.Start(reg, pipeline.Options{
		Registry: cfg.Name, Type: "nacos", HostTemplate: nacos.HostTemplate, Endpoints: translate.EndpointsWorkloadEntry,
		DebounceAfter: 100 * time.Millisecond, EDSDebounce: true,
		Sink: func(s registries.Sink) registries.Sink { br.sink = &timingSink{Sink: s}; return br.sink },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(br.Stop)
	return br
}

// waitReady waits until HasSynced.
func (br *benchBridge) waitReady(b *testing.B) {
	b.Helper()
	if err := br.WaitReady(5 * time.Minute); err != nil {
		b.Fatal(err)
	}
}

// waitServing waits until the first full push is done and the server
// listens, and notes when it first saw that.
func (br *benchBridge) waitServing(b *testing.B) {
	b.Helper()
	if err := br.WaitServing(2 * time.Minute); err != nil {
		b.Fatal(err)
	}
	if br.serving.IsZero() {
		br.serving = time.Now()
	}
}

func (br *benchBridge) stop() { br.Stop() }

// timingSink passes snapshots on and notes when the first and the last
// arrived.
type timingSink struct {
	registries.Sink
	mu          sync.Mutex
	first, last time.Time
	n           int
}

func (s *timingSink) Snapshot(snap registries.Snapshot) {
	now := time.Now()
	s.mu.Lock()
	if s.n == 0 {
		s.first = now
	}
	s.last = now
	s.n++
	s.mu.Unlock()
	s.Sink.Snapshot(snap)
}

func (s *timingSink) times() (first, last time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, s.last, s.n
}

// newRegistry is nacos.New(cfg), failing b on an error.
func newRegistry(b *testing.B, cfg nacos.Config) *nacos.Registry {
	b.Helper()
	reg, err := nacos.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

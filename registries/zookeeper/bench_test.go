package zookeeper_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/zookeeper"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// Scale of BenchmarkColdSync.
const (
	benchInterfaces = 1000
	benchProviders  = 5
	// createBatch is how many nodes the setup creates per multi request.
	createBatch = 200
)

// BenchmarkColdSync measures the zookeeper registry's cold sync on a real
// ZooKeeper: 1,000 interfaces × 5 providers (dubbo-go-like tri provider URLs
// with eleven parameters, ephemeral nodes of one session), all created
// before anything is timed. Run it once:
//
//	go test ./registries/zookeeper -run '^$' -bench ColdSync -benchtime 1x
//
// Sub-benchmarks:
//   - bridge: cmd/bridge's pipeline (bench/pipeline: registry → Syncer →
//     Store → Controller → xDS server, workloadentry endpoints) fed by the
//     registry with its defaults. hassynced-s is the time from the start to
//     HasSynced, serving-s to the first full push done. B/instance is the
//     live heap after GC while serving with no client, minus that of the
//     same pipeline whose registry reads an empty root (connection
//     included), per provider.
//   - registry: the registry alone into a Sink that only counts, from Run to
//     Synced (synced-s), and its own live heap per provider.
func BenchmarkColdSync(b *testing.B) {
	z := harness.StartZooKeeper(b)
	conn := z.Client(b)
	began := time.Now()
	createAll(b, conn)
	b.Logf("created %d interfaces × %d providers in %s", benchInterfaces, benchProviders, time.Since(began).Round(time.Millisecond))
	block := func(root string) *zookeeper.Block {
		var d strict.Duration
		if err := json.Unmarshal([]byte(`"4s"`), &d); err != nil {
			b.Fatal(err)
		}
		bl := &zookeeper.Block{Servers: z.Servers(), Root: root, SessionTimeout: d}
		bl.Default()
		return bl
	}

	b.Run("bridge", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			empty := startBridge(b, block("empty"))
			if err := empty.WaitServing(time.Minute); err != nil {
				b.Fatal(err)
			}
			emptyHeap := pipeline.LiveHeap()
			empty.Stop()

			b.StartTimer()
			p := startBridge(b, block("dubbo"))
			if err := p.WaitReady(5 * time.Minute); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			synced := p.Synced.Sub(p.Started)
			if err := p.WaitServing(2 * time.Minute); err != nil {
				b.Fatal(err)
			}
			serving := time.Since(p.Started)
			heap := pipeline.LiveHeap()
			n := len(p.Store.List(model.KindServiceEntry, "")) + len(p.Store.List(model.KindWorkloadEntry, ""))
			p.Stop()
			if want := benchInterfaces * (1 + benchProviders); n != want {
				b.Fatalf("store holds %d objects, want %d", n, want)
			}
			perInstance := (float64(heap) - float64(emptyHeap)) / float64(benchInterfaces*benchProviders)
			b.ReportMetric(synced.Seconds(), "hassynced-s")
			b.ReportMetric(serving.Seconds(), "serving-s")
			b.ReportMetric(perInstance, "B/instance")
			b.Logf("HasSynced %s, serving %s; live heap %.1f MiB − empty %.1f MiB = %.0f B/instance",
				synced.Round(time.Millisecond), serving.Round(time.Millisecond), pipeline.MiB(heap), pipeline.MiB(emptyHeap), perInstance)
		}
	})

	b.Run("registry", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			stop, _ := pipeline.RunCounting(b, newRegistry(b, block("empty")), 5*time.Minute)
			emptyHeap := pipeline.LiveHeap()
			stop()

			b.StartTimer()
			start := time.Now()
			stop, sink := pipeline.RunCounting(b, newRegistry(b, block("dubbo")), 5*time.Minute)
			took := time.Since(start)
			b.StopTimer()
			heap := pipeline.LiveHeap()
			stop()
			if n := sink.N.Load(); n != benchInterfaces {
				b.Fatalf("Synced after %d snapshots, want %d", n, benchInterfaces)
			}
			perInstance := (float64(heap) - float64(emptyHeap)) / float64(benchInterfaces*benchProviders)
			b.ReportMetric(took.Seconds(), "synced-s")
			b.ReportMetric(perInstance, "B/instance")
			b.Logf("registry alone: Synced after %s; live heap %.1f MiB − empty %.1f MiB = %.0f B/instance",
				took.Round(time.Millisecond), pipeline.MiB(heap), pipeline.MiB(emptyHeap), perInstance)
		}
	})
}

// benchInterface is interface i's name.
func benchInterface(i int) string { return fmt.Sprintf("com.bench.Service%04d", i) }

// createAll creates every interface's providers node and its providers'
// ephemeral nodes, createBatch per multi request.
func createAll(b *testing.B, conn *zk.Conn) {
	b.Helper()
	acl := zk.WorldACL(zk.PermAll)
	var ops []any
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := conn.Multi(ops...); err != nil {
			b.Fatalf("create: %v", err)
		}
		ops = ops[:0]
	}
	add := func(path string, flags int32) {
		ops = append(ops, &zk.CreateRequest{Path: path, Acl: acl, Flags: flags})
		if len(ops) == createBatch {
			flush()
		}
	}
	add("/dubbo", zk.FlagPersistent)
	for i := range benchInterfaces {
		iface := benchInterface(i)
		add("/dubbo/"+iface, zk.FlagPersistent)
		add("/dubbo/"+iface+"/providers", zk.FlagPersistent)
		for k := range benchProviders {
			a := i*benchProviders + k
			addr := fmt.Sprintf("10.%d.%d.%d:50051", a>>16&255, a>>8&255, a&255)
			q := url.Values{
				"anyhost": {"true"}, "application": {"bench-app-" + strconv.Itoa(i%50)}, "interface": {iface},
				"methods": {"Get,List,Put"}, "pid": {strconv.Itoa(1000 + a)}, "side": {"provider"},
				"timestamp": {"1700000000000"}, "release": {"3.3.2"}, "dubbo": {"2.0.2"}, "weight": {"0"},
				"register-mode": {"interface"},
			}
			raw, _ := url.QueryUnescape("tri://" + addr + "/" + iface + "?" + q.Encode())
			add("/dubbo/"+iface+"/providers/"+url.QueryEscape(raw), zk.FlagEphemeral)
		}
	}
	flush()
}

func startBridge(b *testing.B, bl *zookeeper.Block) *pipeline.Pipeline {
	b.Helper()
	p, err := pipeline.Start(newRegistry(b, bl), pipeline.Options{
		Registry: "zk-bench", Type: "zookeeper", Endpoints: translate.EndpointsWorkloadEntry,
		DebounceAfter: 100 * time.Millisecond, EDSDebounce: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	return p
}

// newRegistry builds the registry of bl, failing b on an error.
func newRegistry(b *testing.B, bl *zookeeper.Block) registries.Registry {
	b.Helper()
	reg, err := bl.New("zk-bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

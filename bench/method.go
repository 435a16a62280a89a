package main

// methodText is the method section of docs/benchmarks.md.
const methodText = `## Method

The bridge runs in the suite's process (` + "`go run ./bench`" + `): the pipeline of cmd/bridge/run.go built the same way
(registry → syncer.Syncer → Store → Controller → xds.DiscoveryServer on 127.0.0.1:0, ready gate = Syncer
ready + Store flushed; cmd/bridge's defaults: plaintext, MCP off, debounce.max 10 s), fed by an in-process
generator behind registries.Registry (services svc-00000…, 10 instances each on distinct IPs, port 8080,
protocol grpc, 2 labels, 3 zones; Consul host template). Clients are
real grpc-go ADS streams (test/harness/ads: go-control-plane protos, every response ACKed); 100 streams share a
ClientConn (P2: 100, then 1, ` + "`-p2-per-conn`" + `), each with its own node ID. P1 and P3 run their clients (SotW) in the suite's process; P2 runs its
clients in a separate process (the same executable with ` + "`-role p2-clients`" + `, started as a child and stopped by
closing its stdin, killed by PID if it lingers), alternately SotW and Delta streams, which reports per stream
its first and last receive time (time.Now in its receive loop; both processes read the machine's clock) on
its stdout.

- **P1 cold sync.** Time from the bridge's start to HasSynced (Syncer ready, Store flushed), and to one client
  (CDS by wildcard, then EDS for every cluster it got, like Envoy) holding every ClusterLoadAssignment. Memory:
  runtime/metrics ` + "`/gc/heap/live:bytes`" + ` after two runtime.GC calls, read once the first full push is done and
  before any client connects (so no client state and no per-stream response is counted), minus the same figure
  for a serving bridge with no services, divided by services × instances. The generator's listing is built
  before the start and released once delivered; what the bridge keeps of it is counted.
- **P2 churn fan-out.** 1,000 and 10,000 streams (` + "`-watchers`" + `) watch the ClusterLoadAssignment of service 0,
  100 more one other service's each; half of them SotW, half Delta, in the client process. Per round instance 0
  of service 0 moves to another address (the generator, in the bridge's process, stamps the event time as it
  calls Sink.Snapshot); event→receive is per watching stream (first response after the event), over every
  stream and round; event→last receive is the latest of them per round. Before the rounds the cold sync's
  garbage is collected once and 2 warm-up rounds run uncounted. After each round a 300 ms quiet period catches
  duplicate or stray sends. With 1,000 or more streams per round, p99 is decided by the slowest rounds. Bytes
  are the encoded DiscoveryResponse / DeltaDiscoveryResponse sizes summed over the streams that received one
  (wire framing excluded). "Streams woken" counts streams with at least one response in the round; "other CLAs
  sent" counts resources other than the stream's own. CPU per change is getrusage user+system time of each
  process from the change until the end of the quiet period, averaged over the rounds (rounds with a GC cycle
  included); the bridge's process's is net of its idle rate (measured for 1 s with every stream open, before
  the rounds) times the window: both processes share the machine's cores, so the two together bound how fast
  a round can end. The bridge's allocations are runtime/metrics ` + "`/gc/heap/allocs:objects`" + ` and ` + "`:bytes`" + ` over the
  same window, per watching stream: unlike time, they do not move with the machine's load. Every figure is
  taken with 100 streams per client connection and with 1 (each stream on a connection of its own, as
  proxyless gRPC clients are; 10,100 connections at 10,000 watchers, for which both processes raise
  RLIMIT_NOFILE to its hard limit).
- **P2 floor.** After the bridge's two runs at a watcher count and streams per connection, the same client
  process and the same measurements run against a bare grpc-go ADS server in the suite's process (SotW and
  Delta, default server options, no bridge running): a pass-through codec (grpc.ForceServerCodecV2) sends
  pre-encoded bytes as non-pooled mem.SliceBuffers and leaves everything else to the proto codec. Per round it
  encodes the changed ClusterLoadAssignment once (the bridge's, taken from it after its run, the first endpoint
  moved between two addresses of one length) and once the head of a DiscoveryResponse and of a
  DeltaDiscoveryResponse holding it (the bridge's responses without their nonce, so the same size); each
  watching stream is sent that head followed by its own nonce (field 5, 8 bytes), by a pool of GOMAXPROCS
  goroutines, and its handler goroutine reads the ACK (nonce and error_detail read from the raw bytes). That is
  the least a grpc-go server spends per stream-send: sending from each stream's handler instead, or
  unmarshalling the ACKs, costs more (` + "`-floor-senders 0`, `-floor-decode`" + `). The ratio row is the bridge's
  CPU per watching stream and change over the floor's, both net of idle (target ≤ 1.5).
- **P3 incremental vs full.** Process CPU time (getrusage user+system) from the change until the push is done
  (DiscoveryServer.Sequence) and the watching stream received its ClusterLoadAssignment, minus the idle CPU
  rate measured for 1 s beforehand times the round's wall time. The full round makes the same change and adds
  ConfigUpdate{Full, ConfigsUpdated: that service}, what a changed ServiceEntry causes; the two merge in one
  debounced full push. Rounds alternate after a warm-up; before each round, outside the measured window, a
  debug.FreeOSMemory and a 50 ms pause keep one round's garbage collection, sweeping and scavenging from being
  charged to the next (this leaves most of the full push's GC cost out, which makes the ratio conservative).
  Medians are reported.
- **Scale point (SCALE).** P1 at 100,000 services × 10 instances (` + "`-scale-services`" + `), both endpoint modes, with
  the live heap itself as well (target ≤ 1.5 GiB), then P3 at that size with 10 streams and 10 rounds (each
  stream holds every cluster, the clients' cost rather than the bridge's). Go's default GC settings (GOGC=100,
  no GOMEMLIMIT): garbage collection is most of the cold sync's CPU at this size.
- **P6 EDS build + encode.** ` + "`go test ./xds -bench 'EDSBuildEncode|EDSGeneration' -benchmem`" + `: one service of
  1,000 endpoints in 3 localities after one endpoint changed: the endpoint shards take the new set (encoding the
  changed LbEndpoint), the ClusterLoadAssignment is assembled from the pre-encoded LbEndpoints and marshalled as
  the cache hands it to every stream (the bytes are proto.Marshal's, xds TestEncodedLoadAssignmentMatchesMarshal).
  From scratch (BenchmarkEDSGeneration/1000) every endpoint is encoded first. Side by side with istiod:
  ` + "`cd test/istio && go test -run '^$' -bench IstiodEDS -benchmem`" + ` (BenchmarkIstiodEDSBuildEncode) feeds the same
  1,000 endpoints to istiod's own EDS path from the pinned istio.io/istio (EndpointIndex.UpdateServiceEndpoints,
  then the EdsGenerator for one cluster of a proxyless gRPC client: BuildClusterLoadAssignment and proto.Marshal,
  xDS cache off as the change invalidates it) and to meshbridge's, changing the same endpoint on both in each
  iteration and timing each side, so both see the same machine load; the ratio is of those two times. istiod's
  LbEndpoints carry its workload metadata (filter_metadata istio.workload), meshbridge's none: the benchmark
  reports each side's encoded bytes per endpoint too.
`

// Bench runs meshbridge's benchmark suite (scenarios P1–P3, SCALE and P6 below; each
// target is in the unit column of docs/benchmarks.md) and prints one markdown
// table row per figure: scenario, parameters, figure, unit. `make bench` runs
// it after the `go test -bench` micro benchmarks and regenerates
// docs/benchmarks.md:
//
//	go run ./bench -micro micro.txt -out docs/benchmarks.md
//
// Method: every scenario builds cmd/bridge's pipeline in this process (an
// in-process generator registry → syncer.Syncer → Store → Controller →
// xds.DiscoveryServer on 127.0.0.1:0, ready once the Syncer is ready and the
// Store flushed) and talks to it over real grpc-go ADS streams
// (test/harness/ads, go-control-plane protos) that ACK every response. P1
// and P3 open their streams in this process; P2 opens its streams in a
// client process of its own: this executable run as
//
//	bench -role p2-clients -target ADDR -watch CLA -watchers N -other-names CLA,… -p2-per-conn K
//
// which the suite starts, drives over its stdin and stdout (p2clients.go)
// and stops.
//
//  1. P1 cold sync: 10,000 services × 10 instances; time until HasSynced and
//     until one client holds every ClusterLoadAssignment; live heap
//     (runtime/metrics /gc/heap/live:bytes after GC) before any client
//     connects, minus an empty bridge's, per instance; workloadentry and
//     inline endpoint modes.
//  2. P2 churn fan-out: one instance of one service changes per round; 1,000,
//     then 10,000 streams (-watchers) watch its ClusterLoadAssignment, 100
//     watch others, half SotW and half Delta (-p2-mode), in the client
//     process, 100 streams per gRPC connection, then 1 (-p2-per-conn, in
//     each row's parameters: proxyless clients each hold a connection of
//     their own; at 1, 10,000 watchers take 10,100 connections, so both
//     processes raise RLIMIT_NOFILE to its hard limit, or fail saying how
//     many descriptors they need); event-to-receive latency, bytes per
//     change, streams woken, CPU per change (getrusage, minus the idle rate
//     measured for 1 s before the rounds) of the bridge and of the clients,
//     the bridge's allocations per watching stream; EDS debounce on
//     (debounce.after=100ms) and off. Then the floor (floor.go), with the
//     same client process and measurements: a bare grpc-go ADS server (SotW
//     and Delta, with the bridge's flow-control windows,
//     xds.TransportOptions) in this process, whose pass-through codec
//     (grpc.ForceServerCodecV2) sends pre-encoded bytes as non-pooled
//     mem.SliceBuffers. Per round it encodes the changed
//     ClusterLoadAssignment once, and once the head of a DiscoveryResponse
//     and of a DeltaDiscoveryResponse holding it (the bridge's own
//     responses, taken after its run, so the same size); every watching
//     stream is sent that head and its nonce (field 5, the only per-stream
//     part), by a pool of GOMAXPROCS goroutines (-floor-senders; sending
//     from each stream's handler costs more), and each stream's handler
//     reads its ACKs, checking the nonce and error_detail in the raw bytes
//     (-floor-decode unmarshals them). The floor's rows follow the bridge's
//     at the same watchers and streams per connection, with the ratio
//     bridge / floor of CPU per watching stream and change (target ≤ 1.5):
//     absolute figures move 2× between machines, the ratio much less. The
//     bridge's runs and the floor's are consecutive, under the same load.
//  3. P3 incremental vs full: process CPU time (getrusage) per single-instance
//     change pushed incrementally vs the same change forced to a full push,
//     100 streams connected, rounds interleaved in one run.
//  4. Scale point (SCALE): P1 at 100,000 services × 10 instances
//     (-scale-services) in both endpoint modes, with the live heap, and P3
//     at that size with 10 streams.
//  5. P6 EDS build + encode: read from BenchmarkEDSBuildEncode's and
//     BenchmarkEDSGeneration's output (-micro), and from test/istio's
//     BenchmarkIstiodEDSBuildEncode (istiod's endpoint builder and
//     meshbridge's timed in the same run; their ratio).
//
// Figures are measurements, never assertions: nothing here runs under
// `go test`, which keeps CI fast. The machine's core count and load are
// written with the results.
package main

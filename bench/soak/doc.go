// Soak runs cmd/bridge's pipeline under a steady stream of registry changes
// for a long time and reports, once a minute, whether it keeps up and stays
// flat: `make soak`, or
//
//	go run ./bench/soak [-duration 10m] [-warmup 1m] [-streams 200] [-rate 100]
//
// Method: the pipeline of package bench/pipeline (generator registry →
// syncer.Syncer → Store → Controller → xds.DiscoveryServer on
// 127.0.0.1:0; endpoints=workloadentry, debounce.after 100ms with EDS
// debounced, debounce.max 10s) with 1,000 services × 10 instances. 200 ADS
// streams, alternately SotW and Delta (go-control-plane protos, many per
// gRPC connection, each its own Envoy-style node), ask CDS by wildcard and
// then EDS for exactly the clusters they hold, follow every push (clusters
// added and removed, ClusterLoadAssignments replaced) and ACK it. The load
// changes one random service at a time, 100 times a second: an instance
// added, removed or reweighted, and with probability -service-share a
// service added or removed (the count hovering around 1,000).
//
// Every -interval a markdown table line gives the elapsed time, the changes
// the registry's sink took, pushes into the caches by type and responses
// sent on the streams by type URL (the xds package's metrics), goroutines
// (runtime.NumGoroutine), the live heap after a forced GC
// (pipeline.LiveHeap), the process's RSS (VmRSS), how many streams hold the
// controller's current state right now and the most clusters any stream
// differs in. Streams and pipeline share the process, so goroutines, heap
// and RSS include the clients.
//
// At the end the changes stop; the soak waits (bounded by -converge) until
// the controller holds the registry's final state, then until every stream
// holds the controller's, and writes the summary: converged streams, and
// goroutines and RSS at the end of the warm-up against the end of the load
// (flat: at most -tolerance more, 10%). It exits non-zero unless every
// stream converged and the goroutines stayed flat. RSS is reported, not
// judged: it follows the garbage of the pushes in flight when it is read.
//
// Convergence is the assertion; times are measurements. go test
// ./bench/soak/ runs a 5-second soak of 20 streams and checks that every
// stream converges.
package main

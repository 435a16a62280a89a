// Package istiod is `make bench-istiod`: the same generated mesh served to
// the same proxyless gRPC-style xDS clients (SotW ADS, node metadata
// GENERATOR=grpc, so that istiod answers with its grpc generator) two ways,
// measured in one run and written as one table to docs/benchmarks-istiod.md:
//
//   - meshbridge: meshbridge's xDS server, directly;
//   - istiod: istiod (pilot-discovery) fed from meshbridge over MCP-over-xDS
//     (meshConfig configSources: [{address: xds://127.0.0.1:PORT}]).
//
// Each translation mode (endpoints: inline at 10,000 services × 10
// instances, endpoints: workloadentry at 1,000 × 10 by default) gets a row
// per system: cold sync until one client holds every ClusterLoadAssignment
// with all its endpoints, resident memory, CPU per single-instance change,
// event → the last of N clients received it, and bytes per change. The
// per-change figures are measured once per quiet period of -istiod.debounce
// (default 100ms, both systems' default, then 10ms), both sides set to it:
// meshbridge's debounce.after (its xDS push, and on the istiod path its MCP
// push), set live on the running process as a reload would, and istiod's
// PILOT_DEBOUNCE_AFTER, read at its start, so each further quiet period gets
// a fresh istiod; the report gives istiod ÷ meshbridge of event → last per
// quiet period and mode against the target (≥ 3×). Cold sync and memory are
// measured at the first quiet period only.
//
// Processes: meshbridge runs as a process of its own, this test binary
// re-executed in bridge mode (the scale suite's generator registry and
// cmd/bridge's pipeline, package bench/pipeline), so that its resident memory
// and CPU time are read from /proc/PID exactly as istiod's are and exclude
// the clients, which run in the benchmark's process. istiod keeps its own
// bookkeeping in a real kube-apiserver and etcd (test/harness StartKube).
//
// This is a module of its own, so that istio.io/istio (pinned to the version
// test/istio uses; tools/build.sh istiod builds pilot-discovery from
// test/istio, which names it as a tool) stays out of the product's go.mod; it is not in test/istio because it is a benchmark, not a
// test, and `make test` runs test/istio's tests with -race.
//
// The benchmark runs only when asked to (go test -bench Istiod) and needs
// $MESHBRIDGE_ISTIOD (the pilot-discovery binary) and the kube assets
// (MESHBRIDGE_KUBE_ASSETS); make bench-istiod sets both.
package istiod

// Package harness starts real servers for meshbridge's integration and e2e
// tests: a Consul agent in dev mode (StartConsul) or a single persistent
// server that can be restarted (StartConsulServer), each on free 127.0.0.1
// ports, with its log in the test's temp dir and stopped by the test's
// cleanup; and a Kubernetes control plane, etcd and kube-apiserver through
// controller-runtime's envtest (StartKube, or SharedKube once per test binary
// with KubeMain), with the Istio CRDs installed and a fresh namespace per test;
// and istiod (StartIstiod, or SharedIstiod once per test binary) reading that
// control plane, built from the istio.io/istio test/istio pins
// (tools/build.sh istiod). RequestCounter counts a Kubernetes client's
// requests.
// Consul can serve HTTPS (WithConsulTLS, certificates from NewCA: a CA made
// per test, server certificates with IP/DNS SANs, client certificates with
// URI SANs) and enforce ACLs (WithConsulACL). StartNacos runs the Nacos
// server users run (3.1.0 from Maven Central, tools/build.sh nacos), auth
// off or on (WithNacosAuth); nacos.go lists what tests see of it. Its JRaft
// port binds every interface, so it runs only in the test binary's own
// network namespace: a package whose tests run it calls ReexecInNetNS first
// in its TestMain (netns.go), and every test of that package then runs in
// a namespace with its own loopback and a veth address (NetNSAddress).
// StartPolaris runs Polaris, a Nacos-protocol server, for what the real
// server cannot show (a push it loses: Polaris pushes DEFAULT_GROUP only;
// its group aliases); polaris.go lists where it differs from Nacos.
// StartEureka and StartEurekaPeers run the real Eureka server (Spring
// Cloud Netflix 4.3.0, tools/build.sh eureka), one peer or several that
// replicate, with Register, SetStatus and the other REST calls a client
// makes; eureka.go lists what the server answers. StartSpringApp runs a
// Spring Cloud application registering through Nacos, Consul, Eureka or
// Spring Cloud Zookeeper (spring.go).
// StartZooKeeper runs Debian's ZooKeeper 3.8 standalone (tools/build.sh
// zookeeper installs it), with Client and CreatePath for tests that write
// Dubbo's nodes; StartDubboProvider runs a real dubbo-go v3.3.2 provider
// (test/dubbo, its own module, built by tools/build.sh dubbo) registered in
// ZooKeeper or Nacos; dubbo.go lists what dubbo-go does that tests must
// expect. The proxyless gRPC clients of
// other languages come from make deps (NodeXDSClient, PythonGRPC); HelmBin
// finds the helm the chart tests run (tools/build.sh helm). Tests wait with
// Eventually and read component logs through LockedBuffer.
//
// The ADS client of every test, benchmark and soak is package
// test/harness/ads: SotW and Delta streams that subscribe like Envoy or
// proxyless gRPC, ACK every response unless told to NACK it (or answer
// nothing, for server tests that write each request), record per type what
// they received and accepted, and wait for a condition on what they hold.
// It is a package of its own so that the bench programs link it without the
// servers' dependencies here (Kubernetes, ZooKeeper and their init-time
// flags), and it imports nothing of meshbridge, so package xds's own tests
// use it as well.
//
// Rules:
//  1. Servers listen on 127.0.0.1 only and on ports picked free at start; no
//     test uses a fixed port (go-control-plane's TTL test on :9999 is what we
//     avoid). A server that binds another address runs only in the test
//     binary's own network namespace (RequireNetNS).
//  2. A process is stopped by its PID: SIGTERM, then SIGKILL after a timeout;
//     never by name.
//  3. A missing server binary or client runtime skips the test, or fails it
//     when MESHBRIDGE_REQUIRE_SERVERS=1 (set by make test): a CI run must not
//     pass by skipping. Binaries come from tools/build.sh, client runtimes
//     from make deps.
//  4. A server is returned only once it answers like a ready one (Consul: a
//     leader, and its own node healthy in the catalog), so tests need no
//     sleeps.
//
// Concurrency: helpers take the calling test's testing.TB and may be used from
// parallel tests on distinct servers. Not here: test assertions and
// meshbridge code; the harness only runs servers and scenario helpers.
package harness

package istio

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pilot/pkg/features"
	pilotmodel "istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/serviceregistry/memory"
	"istio.io/istio/pilot/pkg/serviceregistry/provider"
	labelutil "istio.io/istio/pilot/pkg/serviceregistry/util/label"
	istioxds "istio.io/istio/pilot/pkg/xds"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/constants"
	"istio.io/istio/pkg/config/host"
	"istio.io/istio/pkg/config/labels"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/config/protocol"
	"istio.io/istio/pkg/config/schema/kind"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/krt"
	istiolog "istio.io/istio/pkg/log"
	"istio.io/istio/pkg/test"
	"istio.io/istio/pkg/util/sets"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// The service both sides serve in BenchmarkIstiodEDSBuildEncode: the shape
// of xds's BenchmarkEDSBuildEncode (1,000 endpoints 10.0.x.y:80 in 3
// localities r1/z0..z2, weight 1, port grpc-80), with the labels and names
// meshbridge gives a service's WorkloadEntries.
const (
	edsBenchHost      = "a.local"
	edsBenchNamespace = "mesh"
	edsBenchPort      = 80
	edsBenchPortName  = "grpc-80"
	edsBenchEndpoints = 1000
	edsBenchCluster   = "outbound|80||a.local"
)

// edsBenchEndpoint is one endpoint of the benchmark's service.
type edsBenchEndpoint struct {
	address, locality, workload string
	labels                      map[string]string
	weight                      uint32
}

func edsBenchInput() []edsBenchEndpoint {
	out := make([]edsBenchEndpoint, edsBenchEndpoints)
	for i := range out {
		out[i] = edsBenchEndpoint{
			address:  fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			locality: fmt.Sprintf("r1/z%d", i%3),
			workload: fmt.Sprintf("a.local-%010x", i),
			labels: map[string]string{
				"app.kubernetes.io/managed-by": "meshbridge",
				"meshbridge.io/registry":       "bench",
				"meshbridge.io/service":        edsBenchHost,
			},
			weight: 1,
		}
	}
	return out
}

// istiodEDS is istiod's EDS path for one ServiceEntry service, set up as
// istiod's DiscoveryServer has it (pilot/pkg/bootstrap/discovery.go): an
// EndpointIndex, a PushContext initialized from the environment (default
// mesh config, so locality load balancing is on), the EdsGenerator that
// serves both "grpc/" and sidecar EDS requests, and a proxyless gRPC client
// (node metadata GENERATOR=grpc) in locality r1/z0 watching the service's
// cluster.
type istiodEDS struct {
	index     *pilotmodel.EndpointIndex
	shard     pilotmodel.ShardKey
	gen       *istioxds.EdsGenerator
	proxy     *pilotmodel.Proxy
	push      *pilotmodel.PushContext
	watched   *pilotmodel.WatchedResource
	endpoints []*pilotmodel.IstioEndpoint
}

func newIstiodEDS(tb testing.TB, input []edsBenchEndpoint) *istiodEDS {
	// The xDS cache off: the endpoint change invalidates the service's
	// entry, so the push after it builds the assignment anyway.
	test.SetForTest(tb, &features.EnableXDSCaching, false)
	for _, s := range istiolog.Scopes() {
		s.SetOutputLevel(istiolog.NoneLevel)
	}
	const clusterID cluster.ID = "Kubernetes"
	svc := &pilotmodel.Service{
		Hostname:       host.Name(edsBenchHost),
		DefaultAddress: constants.UnspecifiedIP,
		Ports:          pilotmodel.PortList{{Name: edsBenchPortName, Port: edsBenchPort, Protocol: protocol.GRPC}},
		Resolution:     pilotmodel.ClientSideLB,
		Attributes: pilotmodel.ServiceAttributes{
			ServiceRegistry: provider.External,
			Name:            edsBenchHost,
			Namespace:       edsBenchNamespace,
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "meshbridge"},
		},
		CreationTime: time.Now(),
	}
	e := &istiodEDS{
		index: pilotmodel.NewEndpointIndex(pilotmodel.DisabledCache{}),
		// The ServiceEntry controller's shard (model.ShardKeyFromRegistry).
		shard: pilotmodel.ShardKey{Cluster: clusterID, Provider: provider.External},
	}
	// IstioEndpoints as the ServiceEntry controller makes them from
	// WorkloadEntries selected by the ServiceEntry's workloadSelector
	// (serviceentry/conversion.go: convertWorkloadEntryToWorkloadInstance,
	// then convertWorkloadInstanceToServiceInstance for the port).
	for _, in := range input {
		e.endpoints = append(e.endpoints, &pilotmodel.IstioEndpoint{
			Addresses:            []string{in.address},
			ServicePortName:      edsBenchPortName,
			LegacyClusterPortKey: edsBenchPort,
			EndpointPort:         edsBenchPort,
			Locality:             pilotmodel.Locality{Label: in.locality, ClusterID: clusterID},
			LbWeight:             in.weight,
			Namespace:            edsBenchNamespace,
			WorkloadName:         in.workload,
			Labels:               labelutil.AugmentLabels(labels.Instance(in.labels), clusterID, in.locality, "", ""),
			TLSMode:              pilotmodel.DisabledTLSModeLabel,
		})
	}
	e.index.UpdateServiceEndpoints(e.shard, edsBenchHost, edsBenchNamespace, e.endpoints, true)

	env := pilotmodel.NewEnvironment()
	store := pilotmodel.NewFakeStore()
	env.ConfigStore = store
	env.Watcher = meshwatcher.NewTestWatcher(mesh.DefaultMeshConfig())
	env.NetworksWatcher = meshwatcher.NewFixedNetworksWatcher(nil)
	env.ServiceDiscovery = memory.NewServiceDiscovery(svc)
	env.EndpointIndex = e.index
	if err := env.InitNetworksManager(pilotmodel.NewEndpointIndexUpdater(e.index)); err != nil {
		tb.Fatal(err)
	}
	env.VirtualServiceController = pilotmodel.NewVirtualServiceController(store,
		pilotmodel.VSControllerOptions{KrtDebugger: krt.GlobalDebugHandler}, env.Watcher)
	stop := test.NewStop(tb)
	go store.Run(stop)
	go env.VirtualServiceController.Run(stop)
	kube.WaitForCacheSync("bench", stop, store.HasSynced, env.VirtualServiceController.HasSynced)
	env.Init()
	e.push = pilotmodel.NewPushContext()
	e.push.InitContext(env, nil, nil)
	env.SetPushContext(e.push)

	e.proxy = &pilotmodel.Proxy{
		Type:            pilotmodel.SidecarProxy,
		IPAddresses:     []string{"10.255.0.1"},
		ID:              "client." + edsBenchNamespace,
		DNSDomain:       edsBenchNamespace + ".svc.cluster.local",
		ConfigNamespace: edsBenchNamespace,
		Locality:        &core.Locality{Region: "r1", Zone: "z0"},
		Metadata: &pilotmodel.NodeMetadata{
			Generator: "grpc",
			Namespace: edsBenchNamespace,
			ClusterID: clusterID,
		},
	}
	e.proxy.SetSidecarScope(e.push)
	e.gen = &istioxds.EdsGenerator{Cache: pilotmodel.DisabledCache{}, EndpointIndex: e.index}
	e.watched = &pilotmodel.WatchedResource{TypeUrl: v3.EndpointType, ResourceNames: sets.New(edsBenchCluster)}
	return e
}

// change moves endpoint i's weight between 1 and 2 and hands the new set to
// the EndpointIndex, as DiscoveryServer.EDSUpdate does (its ConfigUpdate
// then queues the push that build runs).
func (e *istiodEDS) change(i int) {
	changed := e.endpoints[i].ShallowCopy()
	changed.LbWeight = 3 - changed.LbWeight
	next := make([]*pilotmodel.IstioEndpoint, len(e.endpoints))
	copy(next, e.endpoints)
	next[i] = changed
	e.endpoints = next
	e.index.UpdateServiceEndpoints(e.shard, edsBenchHost, edsBenchNamespace, next, true)
}

// build runs the EDS push of that change for the client: the request
// EDSUpdate queues (an incremental push of the service's Endpoints), the
// EdsGenerator's NewCDSEndpointBuilder + BuildClusterLoadAssignment and the
// assignment's proto.Marshal into the Any it sends. It returns the encoded
// assignment.
func (e *istiodEDS) build(tb testing.TB) []byte {
	req := &pilotmodel.PushRequest{
		Push:           e.push,
		ConfigsUpdated: sets.New(pilotmodel.ConfigKey{Kind: kind.Endpoints, Name: edsBenchHost, Namespace: edsBenchNamespace}),
		Reason:         pilotmodel.NewReasonStats(pilotmodel.EndpointUpdate),
	}
	res, _, err := e.gen.Generate(e.proxy, e.watched, req)
	if err != nil || len(res) != 1 || res[0].GetResource() == nil {
		tb.Fatalf("istiod EDS: %d resources, error %v", len(res), err)
	}
	return res[0].GetResource().GetValue()
}

// meshbridgeEDS is meshbridge's EDS path for the same service (xds/gen:
// the endpoint shard's encoding, the assignment assembled from pre-encoded
// LbEndpoints, marshalled as the cache hands it out).
type meshbridgeEDS struct {
	svc       *model.Service
	endpoints []*model.Endpoint
	shard     []*gen.Endpoint
}

func newMeshbridgeEDS(input []edsBenchEndpoint) *meshbridgeEDS {
	svc := &model.Service{
		Hostname:   edsBenchHost,
		Namespace:  edsBenchNamespace,
		Resolution: model.ResolutionStatic,
		Ports:      []model.Port{{Name: edsBenchPortName, Number: edsBenchPort, Protocol: model.ProtocolGRPC}},
	}
	m := &meshbridgeEDS{svc: svc}
	for _, in := range input {
		m.endpoints = append(m.endpoints, &model.Endpoint{
			Address:         in.address,
			ServicePortName: edsBenchPortName,
			EndpointPort:    edsBenchPort,
			Labels:          in.labels,
			Weight:          in.weight,
			Locality:        in.locality,
			WorkloadName:    in.workload,
		})
	}
	m.shard = gen.EncodeEndpoints(m.endpoints, nil)
	return m
}

// change is istiodEDS.change for meshbridge: what DiscoveryServer.EDSUpdate
// does to the service's shard (gen.EncodeEndpoints re-encodes the changed
// endpoint only).
func (m *meshbridgeEDS) change(i int) {
	changed := *m.endpoints[i]
	changed.Weight = 3 - changed.Weight
	next := make([]*model.Endpoint, len(m.endpoints))
	copy(next, m.endpoints)
	next[i] = &changed
	m.endpoints = next
	m.shard = gen.EncodeEndpoints(next, m.shard)
}

// build is what an EDS push does for the service: its assignments from the
// shard's endpoints (gen.LoadAssignments), each encoded as the cache hands
// it to every stream (cachev3.MarshalResource).
func (m *meshbridgeEDS) build(tb testing.TB) []byte {
	cla, _ := gen.LoadAssignments(m.svc, slices.Clone(m.shard))
	res, ok := cla[edsBenchCluster]
	if len(cla) != 1 || !ok {
		tb.Fatalf("meshbridge EDS: %d assignments, none named %s", len(cla), edsBenchCluster)
	}
	b, err := cachev3.MarshalResource(res)
	if err != nil {
		tb.Fatalf("meshbridge EDS: %v", err)
	}
	return b
}

// BenchmarkIstiodEDSBuildEncode measures target P6's ratio
// (docs/benchmarks.md): EDS build + encode per endpoint of meshbridge
// against istiod's own endpoint builder (the pinned istio.io/istio), one
// service of 1,000 endpoints in 3 localities after one endpoint changed
// (its weight moves between 1 and 2). Each iteration changes the same
// endpoint on both sides and runs istiod's path, then meshbridge's, timing
// each: the two share the machine's load over the run, which on shared
// machines varies more than the ratio.
//
// istiod's path is the one a ServiceEntry endpoint change takes to a
// proxyless gRPC client (istiodEDS): EndpointIndex.UpdateServiceEndpoints
// (what DiscoveryServer.EDSUpdate runs before queueing the push), then
// EdsGenerator.Generate for the client's one cluster with the incremental
// push request EDSUpdate queues: NewCDSEndpointBuilder,
// BuildClusterLoadAssignment (locality load balancing from the default mesh
// config) and proto.Marshal into the Any of the response. A sidecar runs the
// same generator and builder. istiod's xDS cache is disabled (DisabledCache):
// the change clears the service's entry, so the first client of the push
// builds it either way. The debounce, the push queue and the stream send are
// left out on both sides.
//
// meshbridge's path is xds/gen's (the steps of its BenchmarkEDSBuildEncode):
// the shard's re-encoding (gen.EncodeEndpoints), the assignment assembled
// from the pre-encoded LbEndpoints (gen.LoadAssignments) and
// cachev3.MarshalResource.
//
// Metrics: istiod-ns/endpoint and meshbridge-ns/endpoint (each side's time
// over 1,000), meshbridge/istiod (their ratio; target ≤ 1/3), and the encoded
// ClusterLoadAssignment's bytes per endpoint of each (istiod's endpoints
// carry the istio workload metadata, meshbridge's none). Garbage collection
// that either side's allocations cause is charged to whichever side runs
// when it happens; istiod allocates more, so this favours istiod. ns/op, B/op
// and allocs/op are both sides together.
func BenchmarkIstiodEDSBuildEncode(b *testing.B) {
	input := edsBenchInput()
	istiod := newIstiodEDS(b, input)
	meshbridge := newMeshbridgeEDS(input)
	istiodBytes := istiod.build(b)
	meshbridgeBytes := meshbridge.build(b)
	b.ReportAllocs()
	var istiodTime, meshbridgeTime time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		istiod.change(i % edsBenchEndpoints)
		istiod.build(b)
		t1 := time.Now()
		meshbridge.change(i % edsBenchEndpoints)
		meshbridge.build(b)
		meshbridgeTime += time.Since(t1)
		istiodTime += t1.Sub(t0)
		i++
	}
	perEndpoint := func(d time.Duration) float64 {
		return float64(d.Nanoseconds()) / float64(i*edsBenchEndpoints)
	}
	b.ReportMetric(perEndpoint(istiodTime), "istiod-ns/endpoint")
	b.ReportMetric(perEndpoint(meshbridgeTime), "meshbridge-ns/endpoint")
	b.ReportMetric(float64(meshbridgeTime)/float64(istiodTime), "meshbridge/istiod")
	b.ReportMetric(float64(len(istiodBytes))/edsBenchEndpoints, "istiod-B/endpoint-encoded")
	b.ReportMetric(float64(len(meshbridgeBytes))/edsBenchEndpoints, "meshbridge-B/endpoint-encoded")
}

// TestIstiodEDSBuildEncodeSameEndpoints checks that the benchmark's two
// sides serve the same assignment: the same endpoints (address, port,
// weight) in the same localities with the same locality weights, before and
// after a change.
func TestIstiodEDSBuildEncodeSameEndpoints(t *testing.T) {
	input := edsBenchInput()
	istiod := newIstiodEDS(t, input)
	meshbridge := newMeshbridgeEDS(input)
	var before string
	for _, changed := range []int{-1, 7} {
		if changed >= 0 {
			istiod.change(changed)
			meshbridge.change(changed)
		}
		got := map[string]string{}
		for side, b := range map[string][]byte{"istiod": istiod.build(t), "meshbridge": meshbridge.build(t)} {
			var cla endpoint.ClusterLoadAssignment
			if err := proto.Unmarshal(b, &cla); err != nil {
				t.Fatalf("%s: %v", side, err)
			}
			if cla.GetClusterName() != edsBenchCluster {
				t.Errorf("%s: cluster %q, want %q", side, cla.GetClusterName(), edsBenchCluster)
			}
			got[side] = summarizeCLA(&cla)
			if n := countLbEndpoints(&cla); n != edsBenchEndpoints {
				t.Errorf("%s: %d endpoints, want %d", side, n, edsBenchEndpoints)
			}
		}
		if got["istiod"] != got["meshbridge"] {
			t.Errorf("after changing endpoint %d the assignments differ:\nistiod:     %.300s\nmeshbridge: %.300s", changed, got["istiod"], got["meshbridge"])
		}
		if got["istiod"] == before {
			t.Errorf("changing endpoint %d changed no assignment", changed)
		}
		before = got["istiod"]
	}
}

// summarizeCLA lists cla's localities in order with their weights and
// priorities, each with its endpoints' addresses, ports and weights (sorted:
// the order within a locality is each side's own).
func summarizeCLA(cla *endpoint.ClusterLoadAssignment) string {
	var s strings.Builder
	for _, loc := range cla.GetEndpoints() {
		fmt.Fprintf(&s, "[%s/%s/%s w%d p%d:", loc.GetLocality().GetRegion(), loc.GetLocality().GetZone(), loc.GetLocality().GetSubZone(),
			loc.GetLoadBalancingWeight().GetValue(), loc.GetPriority())
		var eps []string
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			eps = append(eps, fmt.Sprintf(" %s:%d w%d", sa.GetAddress(), sa.GetPortValue(), lb.GetLoadBalancingWeight().GetValue()))
		}
		slices.Sort(eps)
		s.WriteString(strings.Join(eps, ""))
		s.WriteString("]")
	}
	return s.String()
}

func countLbEndpoints(cla *endpoint.ClusterLoadAssignment) int {
	n := 0
	for _, loc := range cla.GetEndpoints() {
		n += len(loc.GetLbEndpoints())
	}
	return n
}

package istio

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
	"istio.io/istio/pilot/pkg/config/memory"
	pilotmodel "istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/pipeline/pipelinetest"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// MCP-over-xDS (README "MCP for istiod") tested with the MCP client istiod
// runs for an xds:// configSource (pilot/pkg/bootstrap/configcontroller.go):
// adsc with ConfigInitialRequests, node metadata GENERATOR=api, and a memory
// config controller as its store.

const (
	registryName = "static"
	wait         = 20 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// pipeline is meshbridge in-process (pipeline/pipelinetest: Syncer →
// Store → Controller → DiscoveryServer, MCP fed from the Store) with one
// file-type registry.
type pipeline struct {
	h     *pipelinetest.Harness
	store *serviceentry.Store
	xds   *xds.DiscoveryServer
}

// startPipeline starts meshbridge with svcs as its one (file-type)
// registry's first listing and returns once it serves.
func startPipeline(t *testing.T, svcs ...registries.Service) *pipeline {
	t.Helper()
	return startPipelineMode(t, translate.EndpointsWorkloadEntry, svcs...)
}

// startPipelineMode is startPipeline with output.endpoints mode.
func startPipelineMode(t *testing.T, mode translate.EndpointMode, svcs ...registries.Service) *pipeline {
	t.Helper()
	h := pipelinetest.Start(t, pipelinetest.Options{
		Registries: []pipelinetest.RegistryConfig{{Name: registryName, Type: "file", HostTemplate: translate.DefaultHostTemplate}},
		Namespace:  "meshbridge",
		Endpoints:  mode,
		Debounce:   5 * time.Millisecond,
	})
	h.Do(registryName, pipelinetest.ListCalls(svcs, false)...)
	h.WaitReady()
	<-h.Pipeline.XDS.Serving()
	return &pipeline{h: h, store: h.Pipeline.Store, xds: h.Pipeline.XDS}
}

// update sends a new listing of one service through the Syncer.
func (p *pipeline) update(s registries.Service) {
	p.h.Do(registryName, pipelinetest.Call{Op: pipelinetest.OpSnapshot, Service: s})
}

func (p *pipeline) remove(name string) {
	p.h.Do(registryName, pipelinetest.Call{Op: pipelinetest.OpRemove, Service: registries.Service{Name: name}})
}

// service is a file-registry service with n instances on 10.<i>.x.y:8080.
func service(i, n int) registries.Service {
	s := registries.Service{
		Name:  fmt.Sprintf("svc-%d", i),
		Host:  fmt.Sprintf("svc-%d.static.local", i),
		Ports: []registries.Port{{Number: 8080, Protocol: "grpc"}},
	}
	for j := range n {
		s.Instances = append(s.Instances, registries.Instance{
			ID:      fmt.Sprintf("svc-%d-%d", i, j),
			Address: fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256),
			Port:    uint32(8080 + j),
			Weight:  1,
		})
	}
	return s
}

// istiod is an MCP client as istiod runs it, with its config store.
type istiod struct {
	client *adsc.ADSC
	store  pilotmodel.ConfigStoreController

	mu    sync.Mutex
	bytes map[string][]int // response sizes by type URL, in order
}

func (i *istiod) HandleResponse(_ *adsc.ADSC, resp *discovery.DiscoveryResponse) {
	i.mu.Lock()
	i.bytes[resp.GetTypeUrl()] = append(i.bytes[resp.GetTypeUrl()], proto.Size(resp))
	i.mu.Unlock()
}

func (i *istiod) responses(typeURL string) []int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]int(nil), i.bytes[typeURL]...)
}

func startIstiod(t *testing.T, addr string) *istiod {
	t.Helper()
	i := &istiod{store: memory.NewController(memory.Make(collections.Pilot)), bytes: map[string][]int{}}
	client, err := adsc.New(addr, &adsc.ADSConfig{
		InitialDiscoveryRequests: adsc.ConfigInitialRequests(),
		ResponseHandler:          i,
		Config: adsc.Config{
			Namespace: "istio-system",
			Workload:  "istiod-0",
			Meta:      pilotmodel.NodeMetadata{Generator: "api"}.ToStruct(),
			GrpcOpts:  []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	client.Store = i.store
	i.client = client
	if err := client.Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	eventually(t, "adsc synced", client.HasSynced)
	return i
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	harness.EventuallyTrue(t, wait, what, cond)
}

// versions returns name → version of kind as istiod's store holds it.
func (i *istiod) versions(kind config.GroupVersionKind) map[string]string {
	out := map[string]string{}
	for _, c := range i.store.List(kind, "") {
		out[c.Namespace+"/"+c.Name] = c.ResourceVersion
	}
	return out
}

// storeVersions returns name → content hash of kind in meshbridge's store.
func (p *pipeline) storeVersions(kind model.Kind) map[string]string {
	out := map[string]string{}
	for _, c := range p.store.List(kind, "") {
		out[c.Namespace+"/"+c.Name] = c.ContentHash()
	}
	return out
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// converged waits until istiod holds exactly meshbridge's objects and
// versions of both kinds.
func converged(t *testing.T, p *pipeline, i *istiod) {
	t.Helper()
	eventually(t, "istiod holds meshbridge's ServiceEntries and WorkloadEntries", func() bool {
		return equal(p.storeVersions(model.KindServiceEntry), i.versions(gvk.ServiceEntry)) &&
			equal(p.storeVersions(model.KindWorkloadEntry), i.versions(gvk.WorkloadEntry))
	})
}

func TestIstiodAdscSyncsEveryRequestedType(t *testing.T) {
	p := startPipeline(t, service(1, 2), service(2, 1))
	i := startIstiod(t, p.xds.Addr().String())

	for _, req := range adsc.ConfigInitialRequests() {
		if len(i.responses(req.TypeUrl)) == 0 {
			t.Errorf("no response for requested type %s", req.TypeUrl)
		}
	}
	converged(t, p, i)
	if n := len(i.versions(gvk.ServiceEntry)); n != 2 {
		t.Fatalf("istiod holds %d ServiceEntries, want 2", n)
	}
	if n := len(i.versions(gvk.WorkloadEntry)); n != 3 {
		t.Fatalf("istiod holds %d WorkloadEntries, want 3", n)
	}
	var se *config.Config
	for _, c := range i.store.List(gvk.ServiceEntry, "") {
		if c.Spec.(*networking.ServiceEntry).GetHosts()[0] == "svc-1.static.local" {
			se = &c
		}
	}
	if se == nil {
		t.Fatalf("no ServiceEntry for host svc-1.static.local in %v", i.versions(gvk.ServiceEntry))
	}
	if se.Labels[model.LabelManagedBy] != model.ManagedByValue {
		t.Errorf("labels %v lack %s", se.Labels, model.LabelManagedBy)
	}
}

func TestIstiodAdscInstanceChangeUpdatesOnlyAffectedEntries(t *testing.T) {
	p := startPipeline(t, service(1, 2), service(2, 1))
	i := startIstiod(t, p.xds.Addr().String())
	converged(t, p, i)
	beforeSE, beforeWE := i.versions(gvk.ServiceEntry), i.versions(gvk.WorkloadEntry)

	changed := service(1, 2)
	changed.Instances[0].Weight = 7
	p.update(changed)
	eventually(t, "a WorkloadEntry version changed", func() bool {
		return !equal(beforeWE, i.versions(gvk.WorkloadEntry))
	})
	converged(t, p, i)
	afterSE, afterWE := i.versions(gvk.ServiceEntry), i.versions(gvk.WorkloadEntry)
	if !equal(beforeSE, afterSE) {
		t.Errorf("ServiceEntry versions changed: %v → %v", beforeSE, afterSE)
	}
	var bumped []string
	for name, v := range afterWE {
		if beforeWE[name] != v {
			bumped = append(bumped, name)
		}
	}
	if len(bumped) != 1 || len(afterWE) != len(beforeWE) {
		t.Fatalf("bumped %v of %v → %v, want exactly one", bumped, beforeWE, afterWE)
	}
	name, ns := splitName(bumped[0])
	we := i.store.Get(gvk.WorkloadEntry, name, ns)
	if w := we.Spec.(*networking.WorkloadEntry).GetWeight(); w != 7 {
		t.Errorf("istiod's %s has weight %d, want 7", bumped[0], w)
	}

	p.remove("svc-2")
	eventually(t, "svc-2's entries deleted", func() bool {
		return len(i.versions(gvk.ServiceEntry)) == 1 && len(i.versions(gvk.WorkloadEntry)) == 2
	})
	converged(t, p, i)
}

func splitName(nsName string) (name, namespace string) {
	for k := range len(nsName) {
		if nsName[k] == '/' {
			return nsName[k+1:], nsName[:k]
		}
	}
	return nsName, ""
}

func TestIstiodAdscNeverSeesInvalidObjects(t *testing.T) {
	p := startPipeline(t, service(1, 1))
	i := startIstiod(t, p.xds.Addr().String())
	converged(t, p, i)

	// Objects that bypass translate: one invalid (no hosts), one valid
	// marker written after it.
	invalid := &model.Config{
		Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "meshbridge", Name: "invalid",
			Hash: model.SumHash([]byte("h-invalid"))},
		Spec: &networking.ServiceEntry{Ports: []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}},
	}
	marker := &model.Config{
		Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "meshbridge", Name: "marker",
			Hash: model.SumHash([]byte("h-marker"))},
		Spec: &networking.ServiceEntry{
			Hosts:      []string{"marker.static.local"},
			Ports:      []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
			Resolution: networking.ServiceEntry_DNS,
		},
	}
	for _, c := range []*model.Config{invalid, marker} {
		if _, err := p.store.Create(c); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "marker arrives", func() bool { return i.store.Get(gvk.ServiceEntry, "marker", "meshbridge") != nil })
	if i.store.Get(gvk.ServiceEntry, "invalid", "meshbridge") != nil {
		t.Fatal("istiod received the invalid ServiceEntry")
	}
}

// TestIstiodAdscBytesPerInstanceChange measures (and logs) the bytes sent to
// istiod for one instance change with 1,000 ServiceEntries (and their 1,000
// WorkloadEntries) present, and checks that no ServiceEntry is re-sent.
func TestIstiodAdscBytesPerInstanceChange(t *testing.T) {
	const n = 1000
	svcs := make([]registries.Service, n)
	for k := range svcs {
		svcs[k] = service(k, 1)
	}
	p := startPipeline(t, svcs...)
	i := startIstiod(t, p.xds.Addr().String())
	converged(t, p, i)
	seType, weType := gvk.ServiceEntry.String(), gvk.WorkloadEntry.String()
	seBefore, weBefore := len(i.responses(seType)), len(i.responses(weType))

	changed := service(500, 1)
	changed.Instances[0].Weight = 9
	p.update(changed)
	eventually(t, "the change arrives", func() bool { return len(i.responses(weType)) > weBefore })
	converged(t, p, i)

	seSizes, weSizes := i.responses(seType)[seBefore:], i.responses(weType)[weBefore:]
	if len(seSizes) != 0 {
		t.Errorf("ServiceEntries were re-sent %d times (%v bytes) for an instance change", len(seSizes), seSizes)
	}
	total := 0
	for _, b := range weSizes {
		total += b
	}
	t.Logf("MCP bytes per single-instance change with %d ServiceEntries: %d bytes in %d response(s) "+
		"(%s, complete set of %d WorkloadEntries); %s: %d responses",
		n, total, len(weSizes), weType, n, seType, len(seSizes))
}

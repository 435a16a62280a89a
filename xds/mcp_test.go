package xds

import (
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"
	mcp "istio.io/api/mcp/v1alpha1"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds/cache"
)

// MCP-over-xDS for istiod (rule 15; README "MCP for istiod"), with raw SotW
// ADS clients that ask as istiod's adsc does.

const (
	seV1       = "networking.istio.io/v1/ServiceEntry"
	seV1alpha3 = "networking.istio.io/v1alpha3/ServiceEntry"
	weV1       = "networking.istio.io/v1/WorkloadEntry"
)

// fakeConfigs is a ConfigSource whose objects the test sets.
type fakeConfigs struct {
	mu   sync.Mutex
	objs map[model.ConfigKey]*model.Config
}

func (f *fakeConfigs) Objects(kind model.Kind, _ string) []model.Object {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []model.Object
	for k, c := range f.objs {
		if k.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeConfigs) put(cfgs ...*model.Config) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cfgs {
		f.objs[c.Key()] = c
	}
}

func (f *fakeConfigs) remove(key model.ConfigKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objs, key)
}

// testHashes maps the hex of each testHash back to the name it was made
// from, so that tests read served versions by those names.
var testHashes sync.Map

// testHash is the content hash a test object named hash carries.
func testHash(hash string) model.Hash {
	h := model.SumHash([]byte(hash))
	testHashes.Store(h.String(), hash)
	return h
}

func serviceEntry(name, hash string) *model.Config {
	return &model.Config{
		Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "mesh", Name: name,
			Labels: map[string]string{model.LabelManagedBy: model.ManagedByValue},
			Hash:   testHash(hash)},
		Spec: &networking.ServiceEntry{
			Hosts:            []string{name + ".mesh"},
			Ports:            []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
			Resolution:       networking.ServiceEntry_STATIC,
			WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"app": name}},
		},
	}
}

func workloadEntry(name, addr, hash string) *model.Config {
	return &model.Config{
		Meta: model.Meta{Kind: model.KindWorkloadEntry, Namespace: "mesh", Name: name,
			Hash: testHash(hash)},
		Spec: &networking.WorkloadEntry{Address: addr, Labels: map[string]string{"app": "a"}},
	}
}

// mcpOptions serves src over MCP validated as the pipeline validates it
// (translate's istiod rules).
func mcpOptions(src cache.ConfigSource) *MCPOptions {
	return &MCPOptions{Source: src, Validate: translate.ValidateConfig}
}

// startMCPServer serves src over ADS with MCP on a free port.
func startMCPServer(t *testing.T, src cache.ConfigSource) *testServer {
	t.Helper()
	ts := runServer(t, sourceOf(), Options{
		Address:       "127.0.0.1:0",
		DebounceAfter: time.Millisecond,
		MCP:           mcpOptions(src),
	})
	close(ts.ready)
	<-ts.Serving()
	return ts
}

type noServices struct{}

func (noServices) Services() []*model.Service { return nil }

func sourceOf() ServiceSource { return noServices{} }

// decodeMCP returns the response's objects by metadata name, with their
// versions, checking each resource's and body's type.
func decodeMCP(t *testing.T, resp *discovery.DiscoveryResponse) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range resp.GetResources() {
		if a.GetTypeUrl() != "type.googleapis.com/istio.mcp.v1alpha1.Resource" {
			t.Fatalf("resource type %q, want istio.mcp.v1alpha1.Resource", a.GetTypeUrl())
		}
		var r mcp.Resource
		if err := a.UnmarshalTo(&r); err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetBody().UnmarshalNew(); err != nil {
			t.Fatalf("body of %s: %v", r.GetMetadata().GetName(), err)
		}
		version := r.GetMetadata().GetVersion()
		if name, ok := testHashes.Load(version); ok {
			version = name.(string)
		}
		out[r.GetMetadata().GetName()] = version
	}
	return out
}

// askLikeIstiod sends a first request as adsc does: Node, no version, a
// made-up non-empty nonce.
func askLikeIstiod(c *sotwClient, typeURL string, first bool) {
	req := &discovery.DiscoveryRequest{TypeUrl: typeURL, ResponseNonce: time.Now().String()}
	if first {
		req.Node = apiNode()
	}
	c.send(req)
}

func TestMCPAnswersEveryRequestedType(t *testing.T) {
	src := &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}}
	src.put(serviceEntry("a", "h-a"), serviceEntry("b", "h-b"), workloadEntry("w1", "10.0.0.1", "h-w1"))
	ts := startMCPServer(t, src)
	c := openSotW(t, rawClient(t, ts.Addr().String()))

	want := map[string]map[string]string{
		seV1:       {"mesh/a": "h-a", "mesh/b": "h-b"},
		seV1alpha3: {"mesh/a": "h-a", "mesh/b": "h-b"},
		weV1:       {"mesh/w1": "h-w1"},
		"networking.istio.io/v1alpha3/WorkloadEntry": {"mesh/w1": "h-w1"},
		"security.istio.io/v1/AuthorizationPolicy":   {},
		"core/v1alpha1/MeshConfig":                   {},
		"example.com/v9/Unknown":                     {},
	}
	first := true
	for typeURL := range want {
		askLikeIstiod(c, typeURL, first)
		first = false
	}
	got := map[string]map[string]string{}
	for range want {
		resp := c.next(t)
		got[resp.GetTypeUrl()] = decodeMCP(t, resp)
		c.ack(resp)
	}
	assertEqual(t, want, got)
}

func TestMCPChangeBumpsOnlyAffectedVersionsAndRemovalDeletes(t *testing.T) {
	src := &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}}
	src.put(serviceEntry("a", "h-a"), serviceEntry("b", "h-b"), workloadEntry("w1", "10.0.0.1", "h-w1"))
	ts := startMCPServer(t, src)
	c := openSotW(t, rawClient(t, ts.Addr().String()))
	askLikeIstiod(c, seV1, true)
	askLikeIstiod(c, weV1, false)
	for range 2 {
		c.ack(c.next(t))
	}

	// An instance change: one WorkloadEntry's address and hash change.
	src.put(workloadEntry("w1", "10.0.0.2", "h-w1b"), workloadEntry("w2", "10.0.0.3", "h-w2"))
	ts.MCPConfigChanged(model.KindWorkloadEntry)
	resp := c.next(t)
	if resp.GetTypeUrl() != weV1 {
		t.Fatalf("push of %s, want only %s", resp.GetTypeUrl(), weV1)
	}
	assertEqual(t, map[string]string{"mesh/w1": "h-w1b", "mesh/w2": "h-w2"}, decodeMCP(t, resp))
	c.ack(resp)

	src.remove(model.ConfigKey{Kind: model.KindServiceEntry, Namespace: "mesh", Name: "b"})
	ts.MCPConfigChanged(model.KindServiceEntry)
	resp = c.next(t)
	assertEqual(t, seV1, resp.GetTypeUrl())
	assertEqual(t, map[string]string{"mesh/a": "h-a"}, decodeMCP(t, resp))
	c.ack(resp)

	// A notification without a change pushes nothing; the next real change
	// is the next response.
	ts.MCPConfigChanged(model.KindServiceEntry)
	src.put(serviceEntry("c", "h-c"))
	ts.MCPConfigChanged(model.KindServiceEntry)
	resp = c.next(t)
	assertEqual(t, map[string]string{"mesh/a": "h-a", "mesh/c": "h-c"}, decodeMCP(t, resp))
}

func TestMCPInvalidObjectsNeverReachTheWire(t *testing.T) {
	src := &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}}
	bad := serviceEntry("bad", "h-bad")
	bad.Spec.(*networking.ServiceEntry).Hosts = nil
	badWE := workloadEntry("badwe", "", "h-badwe")
	src.put(serviceEntry("a", "h-a"), bad, badWE)
	ts := startMCPServer(t, src)
	c := openSotW(t, rawClient(t, ts.Addr().String()))
	askLikeIstiod(c, seV1, true)
	askLikeIstiod(c, weV1, false)
	got := map[string]map[string]string{}
	for range 2 {
		resp := c.next(t)
		got[resp.GetTypeUrl()] = decodeMCP(t, resp)
	}
	assertEqual(t, map[string]map[string]string{seV1: {"mesh/a": "h-a"}, weV1: {}}, got)
}

// TestMCPRequiresValidate: MCP without its validation is refused when the
// server is built, not served unvalidated.
func TestMCPRequiresValidate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewDiscoveryServer served MCP without MCPOptions.Validate")
		}
	}()
	NewDiscoveryServer(sourceOf(), Options{MCP: &MCPOptions{Source: &fakeConfigs{}}})
}

func TestMCPNewStreamWithMatchingVersionIsAnswered(t *testing.T) {
	src := &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}}
	src.put(serviceEntry("a", "h-a"))
	ts := startMCPServer(t, src)
	conn := rawClient(t, ts.Addr().String())
	c := openSotW(t, conn)
	askLikeIstiod(c, seV1, true)
	resp := c.next(t)

	// A reconnecting client that names the current version and a stale
	// nonce still gets the set: a new subscription is not an ACK.
	c2 := openSotW(t, conn)
	c2.send(&discovery.DiscoveryRequest{TypeUrl: seV1, Node: apiNode(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: "7"})
	assertEqual(t, map[string]string{"mesh/a": "h-a"}, decodeMCP(t, c2.next(t)))
}

func TestClassifyMCPTypes(t *testing.T) {
	for typeURL, want := range map[string]string{
		seV1:                       mcpCacheKey,
		"core/v1alpha1/MeshConfig": mcpCacheKey,
		"type.googleapis.com/envoy.config.cluster.v3.Cluster":   "type.googleapis.com/envoy.config.cluster.v3.Cluster",
		"type.googleapis.com/envoy.config.listener.v3.Listener": "grpc type.googleapis.com/envoy.config.listener.v3.Listener",
	} {
		if got := keyFor(typeURL, GeneratorGRPC); got != want {
			t.Errorf("keyFor(%q) = %q, want %q", typeURL, got, want)
		}
	}
}

// apiNode is a Node as istiod sends it to a config source.
func apiNode() *core.Node {
	md, _ := structpb.NewStruct(map[string]any{"GENERATOR": "api", "ISTIO_VERSION": "1.29.0"})
	return &core.Node{Id: "sidecar~10.0.0.9~istiod-1.istio-system~istio-system.svc.cluster.local", Metadata: md}
}

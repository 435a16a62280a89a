package xds

import (
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// adsStream is a SotW stream used one request, one response at a time.
type adsStream struct{ *sotwClient }

func openADS(t *testing.T, ts *testServer) *adsStream {
	t.Helper()
	return &adsStream{openSotW(t, rawClient(t, ts.Addr().String()))}
}

// ask sends a request and returns the next response.
func (a *adsStream) ask(req *discovery.DiscoveryRequest) *discovery.DiscoveryResponse {
	a.t.Helper()
	a.send(req)
	return a.next(a.t)
}

func resourceNames(t *testing.T, resp *discovery.DiscoveryResponse) []string {
	t.Helper()
	var names []string
	for _, r := range resp.GetResources() {
		m, err := r.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, cachev3.GetResourceName(m))
	}
	slices.Sort(names)
	return names
}

func TestADSByGenerator(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	ts := startReadyServer(t, src)
	tests := map[string]struct {
		node      *core.Node
		typeURL   string
		resources []string
		want      []string
	}{
		"envoy gets clusters by wildcard": {
			node: envoyNode(), typeURL: resourcev3.ClusterType,
			want: []string{"outbound|80||a.local"},
		},
		"envoy gets an empty listener answer, as it accepts api_listener only from bootstrap": {
			node: envoyNode(), typeURL: resourcev3.ListenerType,
		},
		"envoy gets the assignment it names": {
			node: envoyNode(), typeURL: resourcev3.EndpointType, resources: []string{"outbound|80||a.local"},
			want: []string{"outbound|80||a.local"},
		},
		"grpc gets the listener it names": {
			node: grpcNode(), typeURL: resourcev3.ListenerType, resources: []string{"a.local:80"},
			want: []string{"a.local:80"},
		},
		"grpc gets the route it names": {
			node: grpcNode(), typeURL: resourcev3.RouteType, resources: []string{"a.local:80"},
			want: []string{"a.local:80"},
		},
		"grpc gets the cluster it names": {
			node: grpcNode(), typeURL: resourcev3.ClusterType, resources: []string{"outbound|80||a.local"},
			want: []string{"outbound|80||a.local"},
		},
		"grpc gets an empty answer for an unknown listener, meaning it does not exist": {
			node: grpcNode(), typeURL: resourcev3.ListenerType, resources: []string{"b.local:80"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := openADS(t, ts).ask(&discovery.DiscoveryRequest{Node: tc.node, TypeUrl: tc.typeURL, ResourceNames: tc.resources})
			assertEqual(t, tc.want, resourceNames(t, resp))
		})
	}
}

func TestIncrementalPushSendsOnlyChangedAssignments(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	ads := openADS(t, ts)
	clusters := []string{gen.ClusterName(80, "a.local"), gen.ClusterName(80, "b.local")}
	resp := ads.ask(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: clusters})
	if len(resp.GetResources()) != 2 {
		t.Fatalf("initial EDS response has %d assignments, want 2", len(resp.GetResources()))
	}

	// First endpoints of a.local are a full push (new service key) that
	// regenerates only a.local's assignment; the ACK then waits for it.
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, "")}, time.Time{})
	resp = ads.ask(&discovery.DiscoveryRequest{
		TypeUrl: resourcev3.EndpointType, ResourceNames: clusters,
		VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
	})
	assertEqual(t, []string{gen.ClusterName(80, "a.local")}, resourceNames(t, resp))

	// A second endpoint is an EDS push.
	ts.EDSUpdate("test", "a.local", "mesh", []*model.Endpoint{ep("10.0.0.1", 80, ""), ep("10.0.0.2", 80, "")}, time.Time{})
	resp = ads.ask(&discovery.DiscoveryRequest{
		TypeUrl: resourcev3.EndpointType, ResourceNames: clusters,
		VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
	})
	assertEqual(t, []string{gen.ClusterName(80, "a.local")}, resourceNames(t, resp))
}

func TestCallbacksCountClientsAndNACKs(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	ts := startReadyServer(t, src)
	clientsBefore := testutil.ToFloat64(xdsClients.WithLabelValues("grpc"))
	nacksBefore := testutil.ToFloat64(nacksTotal.WithLabelValues(resourcev3.ClusterType))

	ads := openADS(t, ts)
	clusters := []string{gen.ClusterName(80, "a.local")}
	resp := ads.ask(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.ClusterType, ResourceNames: clusters})
	if got := testutil.ToFloat64(xdsClients.WithLabelValues("grpc")) - clientsBefore; got != 1 {
		t.Errorf("grpc clients rose by %v, want 1", got)
	}
	ads.send(&discovery.DiscoveryRequest{
		TypeUrl: resourcev3.ClusterType, ResourceNames: clusters, ResponseNonce: resp.GetNonce(),
		ErrorDetail: &status.Status{Code: 3, Message: "cluster rejected by test"},
	})
	// Requests on a stream are handled in order: once the LDS answer is
	// here, the NACK before it was counted.
	ads.ask(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"a.local:80"}})
	if got := testutil.ToFloat64(nacksTotal.WithLabelValues(resourcev3.ClusterType)) - nacksBefore; got != 1 {
		t.Errorf("CDS NACKs rose by %v, want 1", got)
	}
}

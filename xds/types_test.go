package xds

import (
	"strings"
	"testing"
	"testing/synctest"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshbridge/meshbridge/model"
)

// What a listener does with a type URL it does not serve (types.go).

// secretType is a proto type meshbridge does not serve (SDS).
const secretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

func TestKeyForClassifiesEveryTypeURL(t *testing.T) {
	for typeURL, want := range map[string]string{
		resourcev3.ClusterType:  resourcev3.ClusterType,
		resourcev3.EndpointType: resourcev3.EndpointType,
		resourcev3.RouteType:    "envoy " + resourcev3.RouteType,
		secretType:              unknownTypeKey,
		"type.googleapis.com/envoy.service.runtime.v3.Runtime": unknownTypeKey,
		seV1:                       mcpCacheKey,
		seV1alpha3:                 mcpCacheKey,
		"core/v1alpha1/MeshConfig": mcpCacheKey,
		"gateway.networking.k8s.io/v1beta1/HTTPRoute": mcpCacheKey,
		"apps/v1/Deployment":                          mcpCacheKey,
		"example.com/v9/Unknown":                      mcpCacheKey,
		"":                                            invalidTypeKey,
		"type.googleapis.com/":                        invalidTypeKey,
		"Secret":                                      invalidTypeKey,
		"envoy.config.cluster.v3.Cluster":             invalidTypeKey,
		"Networking.istio.io/v1/ServiceEntry":         invalidTypeKey,
		"networking.istio.io/1/ServiceEntry":          invalidTypeKey,
		"networking.istio.io/v1/serviceEntry":         invalidTypeKey,
		"networking.istio.io/v1/ServiceEntry/extra":   invalidTypeKey,
		strings.Repeat("a", 400) + ".io/v1/Kind":      invalidTypeKey,
	} {
		if got := keyFor(typeURL, GeneratorEnvoy); got != want {
			t.Errorf("keyFor(%q) = %q, want %q", typeURL, got, want)
		}
	}
}

// TestUnknownProtoTypeGetsAnEmptyResponse: a proto type meshbridge does not
// serve is answered with an empty response, as istiod answers it, once per
// subscribed name; the stream keeps serving the other types.
func TestUnknownProtoTypeGetsAnEmptyResponse(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())

	for name, names := range map[string][]string{"by name": {"default"}, "by wildcard": nil} {
		t.Run("SotW "+name, func(t *testing.T) {
			c := openSotW(t, conn)
			c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: secretType, ResourceNames: names})
			resp := c.next(t)
			if resp.GetTypeUrl() != secretType || len(resp.GetResources()) != 0 {
				t.Fatalf("got %s with %d resources, want an empty %s response", resp.GetTypeUrl(), len(resp.GetResources()), secretType)
			}
			// The ACK is not answered: the next response is the barrier's.
			c.ack(resp, names...)
			c.barrier()
			if names == nil {
				return
			}
			// A new name is.
			c.send(&discovery.DiscoveryRequest{
				TypeUrl: secretType, ResourceNames: append(names, "ROOTCA"),
				VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
			})
			if resp := c.next(t); resp.GetTypeUrl() != secretType || len(resp.GetResources()) != 0 {
				t.Fatalf("got %s with %d resources, want an empty %s response", resp.GetTypeUrl(), len(resp.GetResources()), secretType)
			}
		})
	}
	t.Run("Delta", func(t *testing.T) {
		c := openDelta(t, conn)
		c.send(&discovery.DeltaDiscoveryRequest{
			Node: envoyNode(), TypeUrl: secretType, ResourceNamesSubscribe: []string{"default", "stale"},
			InitialResourceVersions: map[string]string{"stale": "1"},
		})
		resp := c.next(t)
		if resp.GetTypeUrl() != secretType || len(resp.GetResources()) != 0 {
			t.Fatalf("got %s with %d resources, want an empty %s response", resp.GetTypeUrl(), len(resp.GetResources()), secretType)
		}
		// What the client said it holds does not exist.
		assertEqual(t, []string{"stale"}, resp.GetRemovedResources())
		c.ack(resp)
		c.barrier()
	})
}

// TestTypesNotServedEndTheStream: an Istio config type where MCP is not
// served ends the stream with FailedPrecondition naming the configuration
// key to set, a type URL that names no type with InvalidArgument naming it.
func TestTypesNotServedEndTheStream(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	plain := startReadyServer(t, src)
	withMCP := startMCPServer(t, &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}})
	tests := map[string]struct {
		server   *testServer
		typeURL  string
		delta    bool
		code     codes.Code
		mentions string
	}{
		"an Istio config type without MCP": {
			server: plain, typeURL: seV1, code: codes.FailedPrecondition, mentions: "mcp.enabled",
		},
		"an Istio config type without MCP, over Delta": {
			server: plain, typeURL: seV1, delta: true, code: codes.FailedPrecondition, mentions: "mcp.enabled",
		},
		"istiod's MeshConfig type without MCP": {
			server: plain, typeURL: "core/v1alpha1/MeshConfig", code: codes.FailedPrecondition, mentions: "mcp.enabled",
		},
		"a type URL naming no type": {
			server: plain, typeURL: "Secret", code: codes.InvalidArgument, mentions: `"Secret"`,
		},
		"a type URL naming no type, over Delta": {
			server: plain, typeURL: "envoy.config.cluster.v3.Cluster", delta: true, code: codes.InvalidArgument,
			mentions: `"envoy.config.cluster.v3.Cluster"`,
		},
		"a type URL naming no type, with MCP": {
			server: withMCP, typeURL: "not a type", code: codes.InvalidArgument, mentions: `"not a type"`,
		},
		"an Istio config type over Delta, with MCP": {
			server: withMCP, typeURL: seV1, delta: true, code: codes.Unimplemented, mentions: "SotW",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			conn := rawClient(t, tc.server.Addr().String())
			var err error
			if tc.delta {
				c := openDelta(t, conn)
				c.send(&discovery.DeltaDiscoveryRequest{Node: envoyNode(), TypeUrl: tc.typeURL})
				err = c.end(t)
			} else {
				c := openSotW(t, conn)
				c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: tc.typeURL})
				err = c.end(t)
			}
			assertStatus(t, err, tc.code, tc.mentions)
		})
	}
}

// assertStatus fails the test unless err is a gRPC status with code whose
// message contains mentions.
func assertStatus(t *testing.T, err error, code codes.Code, mentions string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || !strings.Contains(st.Message(), mentions) {
		t.Fatalf("stream ended with %v, want %v mentioning %s", err, code, mentions)
	}
}

// TestHandOverNeverBlocks: with the response channel full, handOver returns
// at once; the response arrives once the channel drains, or is given up when
// the watch is cancelled, leaving no goroutine behind (synctest fails a test
// that does).
func TestHandOverNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := make(chan int, 1)
		out <- 1
		handOver(out, 2)
		got := []int{<-out}
		synctest.Wait()
		got = append(got, <-out)

		handOver(out, 3)
		cancel := handOver(out, 4)
		cancel()
		synctest.Wait()
		got = append(got, <-out)
		select {
		case v := <-out:
			got = append(got, v)
		default:
		}
		assertEqual(t, []int{1, 2, 3}, got)
	})
}

package xds

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/xds/ads"
	"github.com/meshbridge/meshbridge/xds/cache"
)

// Type URLs. Every request's type URL is one of:
//
//   - a type meshbridge serves over xDS (servedXDSTypes);
//   - another proto type ("type.googleapis.com/..."): answered with an empty
//     response, SotW and Delta, as istiod answers a type it has no generator
//     for (pilot/pkg/xds/ads.go findGenerator falls back to the "api"
//     generator, which finds no config of the type); the stream stays
//     usable for the other types;
//   - an Istio config type (isMCPType), which istiod's MCP client asks for:
//     served from the MCP cache on the listener that serves MCP; anywhere
//     else the stream ends with FailedPrecondition naming the configuration
//     key that decides where MCP is served, since an empty list would let
//     istiod report ready with none of meshbridge's config;
//   - anything else: the stream ends with InvalidArgument naming the type.
//
// The keys below are the MuxCache keys (caches.go) of the cases that are not
// a served type.
const (
	unknownTypeKey = "unknown type"
	invalidTypeKey = "invalid type"
	// refusedTypeKey classifies, on the separate MCP listener, every type
	// that is not an Istio config type: the xDS listener serves those.
	refusedTypeKey = "refused type"
)

// servedXDSTypes are the proto types meshbridge generates.
var servedXDSTypes = map[string]bool{
	resourcev3.ClusterType:  true,
	resourcev3.EndpointType: true,
	resourcev3.ListenerType: true,
	resourcev3.RouteType:    true,
}

// typeURLPrefix starts the type URL of every proto type, xDS's included.
const typeURLPrefix = "type.googleapis.com/"

// gvkPattern matches istiod's config.GroupVersionKind.String():
// "<group>/<version>/<Kind>", the group "core" for Kubernetes' core group,
// e.g. "networking.istio.io/v1/ServiceEntry", "core/v1alpha1/MeshConfig".
// The group is a DNS-1123 subdomain, the version a Kubernetes API version
// (v1, v1alpha3, v2beta1), the kind an upper camel case identifier.
var gvkPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*` +
	`/v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?/[A-Z][A-Za-z0-9]*$`)

// maxGVKLength bounds a GVK string: a DNS-1123 subdomain (253), a version
// and a kind (63 each, Kubernetes' limit for a name segment), two slashes.
const maxGVKLength = 253 + 63 + 63 + 2

// isMCPType reports whether typeURL is an Istio config type as istiod's MCP
// client asks for one (pkg/adsc ConfigInitialRequests: a GVK string), never
// a proto type as Envoy and gRPC ask for.
func isMCPType(typeURL string) bool {
	return len(typeURL) <= maxGVKLength && gvkPattern.MatchString(typeURL)
}

// isProtoType reports whether typeURL names a proto type.
func isProtoType(typeURL string) bool {
	return len(typeURL) > len(typeURLPrefix) && strings.HasPrefix(typeURL, typeURLPrefix)
}

// typeLabel is the type_url label value of typeURL: the type URL itself for
// the types meshbridge produces, "other" for the rest, which a client may
// name freely and must not grow the metrics without bound.
func typeLabel(typeURL string) string {
	if _, mcp := cache.MCPKind(typeURL); mcp || servedXDSTypes[typeURL] {
		return typeURL
	}
	return otherTypeLabel
}

const otherTypeLabel = "other"

// refusal is a cache that ends every stream asking it with one gRPC status,
// and logs the refusal at warn: the client or meshbridge is misconfigured.
// The client reconnects at its own backoff, which bounds the log.
type refusal struct {
	code codes.Code
	// format has one verb, %q, for the type URL.
	format string
	log    *slog.Logger
}

var _ cachev3.Cache = refusal{}

// invalidType refuses a type URL that names neither a proto type nor an
// Istio config type.
func invalidType(log *slog.Logger) refusal {
	return refusal{
		code: codes.InvalidArgument,
		format: "type URL %q names neither a proto type (" + typeURLPrefix + "...) nor an Istio config type " +
			"(<group>/<version>/<Kind>)",
		log: log,
	}
}

// mcpDisabled refuses Istio config types when MCP is not served.
func mcpDisabled(log *slog.Logger) refusal {
	return refusal{
		code: codes.FailedPrecondition,
		format: "Istio config type %q is served over MCP, which is not enabled on this meshbridge " +
			"(configuration key mcp.enabled)",
		log: log,
	}
}

// mcpElsewhere refuses Istio config types on the xDS listener when MCP has
// a listener of its own.
func mcpElsewhere(log *slog.Logger) refusal {
	return refusal{
		code: codes.FailedPrecondition,
		format: "Istio config type %q is served over MCP on meshbridge's MCP port (configuration key " +
			"mcp.address), not on its xDS port",
		log: log,
	}
}

// xdsElsewhere refuses proto types on the separate MCP listener.
func xdsElsewhere(log *slog.Logger) refusal {
	return refusal{
		code: codes.FailedPrecondition,
		format: "type %q is served on meshbridge's xDS port (configuration key xds.address); its MCP port " +
			"(mcp.address) serves Istio config types only",
		log: log,
	}
}

func (r refusal) refuse(typeURL, node string) error {
	err := status.Errorf(r.code, r.format, typeURL)
	r.log.Warn("Refused xDS request", "node", node, "code", r.code.String(), "err", status.Convert(err).Message())
	return err
}

// CreateWatch implements cachev3.ConfigWatcher.
func (r refusal) CreateWatch(req *cachev3.Request, _ cachev3.Subscription, _ chan cachev3.Response) (func(), error) {
	return nil, r.refuse(req.GetTypeUrl(), req.GetNode().GetId())
}

// CreateDeltaWatch implements cachev3.ConfigWatcher.
func (r refusal) CreateDeltaWatch(req *cachev3.DeltaRequest, _ cachev3.Subscription, _ chan cachev3.DeltaResponse) (func(), error) {
	return nil, r.refuse(req.GetTypeUrl(), req.GetNode().GetId())
}

// Fetch implements cachev3.ConfigFetcher; only ADS is served.
func (r refusal) Fetch(_ context.Context, req *cachev3.Request) (cachev3.Response, error) {
	return nil, status.Errorf(r.code, r.format, req.GetTypeUrl())
}

// emptyVersion is the version of every empty response.
const emptyVersion = "empty"

// wildcardMark is the name under which an empty response to a wildcard
// subscription is recorded; a resource name is never empty.
const wildcardMark = ""

// emptyCache answers a proto type meshbridge does not produce with an empty
// response, SotW and Delta: once for each name (or the wildcard) a stream
// subscribes to. What a stream was answered for is recorded in its
// subscription (the returned resources: each subscribed name, and
// wildcardMark for a wildcard, at emptyVersion), which go-control-plane keeps
// per stream and type and leaves to the cache to read. An ACK keeps the
// subscription and so is not answered; a new stream, or a new name, is.
type emptyCache struct{}

var _ cachev3.Cache = emptyCache{}

// answered reports whether sub was answered for everything it subscribes
// to. A subscription to nothing (grpc-go unsubscribing) needs no answer.
func (emptyCache) answered(sub cachev3.Subscription) bool {
	returned := sub.ReturnedResources()
	if sub.IsWildcard() && returned[wildcardMark] != emptyVersion {
		return false
	}
	for name := range sub.SubscribedResources() {
		if returned[name] != emptyVersion {
			return false
		}
	}
	return true
}

// marks records an answer to everything sub subscribes to.
func (emptyCache) marks(sub cachev3.Subscription) map[string]string {
	out := make(map[string]string, len(sub.SubscribedResources())+1)
	if sub.IsWildcard() {
		out[wildcardMark] = emptyVersion
	}
	for name := range sub.SubscribedResources() {
		out[name] = emptyVersion
	}
	return out
}

// CreateWatch implements cachev3.ConfigWatcher.
func (e emptyCache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, out chan cachev3.Response) (func(), error) {
	if e.answered(sub) {
		return func() {}, nil
	}
	return handOver(out, cachev3.Response(&cachev3.PassthroughResponse{
		Request:           req,
		DiscoveryResponse: &discovery.DiscoveryResponse{VersionInfo: emptyVersion, TypeUrl: req.GetTypeUrl()},
		ReturnedResources: e.marks(sub),
	})), nil
}

// CreateDeltaWatch implements cachev3.ConfigWatcher. Names the client says
// it holds (initial_resource_versions) are removed: none exists.
func (e emptyCache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, out chan cachev3.DeltaResponse) (func(), error) {
	if e.answered(sub) {
		return func() {}, nil
	}
	var removed []string
	for name, version := range sub.ReturnedResources() {
		if name != wildcardMark && version != emptyVersion {
			removed = append(removed, name)
		}
	}
	return handOver(out, cachev3.DeltaResponse(&cachev3.DeltaPassthroughResponse{
		DeltaRequest: req,
		DeltaDiscoveryResponse: &discovery.DeltaDiscoveryResponse{
			SystemVersionInfo: emptyVersion, TypeUrl: req.GetTypeUrl(), RemovedResources: removed,
		},
		NextVersionMap: e.marks(sub),
	})), nil
}

// Fetch implements cachev3.ConfigFetcher; only ADS is served.
func (emptyCache) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("only ADS is served")
}

// handOver puts resp on out without blocking and returns the watch's cancel
// function. go-control-plane's ADS loops call CreateWatch and drain out from
// the same goroutine, and out has one slot per Envoy type (10) while a
// client may ask for more types at once (istiod asks for 17); when out is
// full, a goroutine delivers, or gives up when the watch is cancelled.
func handOver[T any](out chan T, resp T) (cancel func()) {
	select {
	case out <- resp:
		return func() {}
	default:
	}
	done := make(chan struct{})
	go func() {
		select {
		case out <- resp:
		case <-done:
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// emptySource is emptyCache's rules as an ads.Source: a proto type
// meshbridge does not produce is answered with an empty response once for
// each name (or the wildcard) a stream subscribes to; nothing changes it,
// so it wakes nobody.
type emptySource struct{}

var _ ads.Source = emptySource{}

// Watch implements ads.Source.
func (emptySource) Watch(*ads.Watch) {}

// Unwatch implements ads.Source.
func (emptySource) Unwatch(*ads.Watch) {}

// Respond implements ads.Source.
func (emptySource) Respond(w *ads.Watch, _ bool) (*wire.Response, string) {
	var e emptyCache
	if e.answered(&w.Sub) {
		return nil, ""
	}
	if !w.Delta {
		w.Sub.SetReturnedResources(e.marks(&w.Sub))
		return wire.SotWResponse(emptyVersion, w.TypeURL, nil), emptyVersion
	}
	var removed []string
	for name, version := range w.Sub.ReturnedResources() {
		if name != wildcardMark && version != emptyVersion {
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	w.Sub.SetReturnedResources(e.marks(&w.Sub))
	return wire.DeltaResponse(emptyVersion, w.TypeURL, nil, removed), emptyVersion
}

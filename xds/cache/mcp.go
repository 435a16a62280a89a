package cache

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcp "istio.io/api/mcp/v1alpha1"

	"github.com/meshbridge/meshbridge/model"
)

// ConfigSource lists the objects MCP serves; serviceentry.Store implements
// it. The returned objects are read-only and immutable: a changed object
// is a new one (the store's rule), so MCP keeps what it built of each
// object by its identity.
type ConfigSource interface {
	Objects(kind model.Kind, namespace string) []model.Object
}

// MCPKind returns the kind of an MCP type URL meshbridge produces (a GVK
// string, as istiod's adsc sends it), and false for any other type URL.
// istiod before 1.22 asks for v1alpha3, current istiod for v1; both get the
// same objects.
func MCPKind(typeURL string) (model.Kind, bool) {
	kind, ok := mcpKinds[typeURL]
	return kind, ok
}

// MCPTypeURLs returns the MCP type URLs meshbridge produces (MCPKind),
// sorted.
func MCPTypeURLs() []string { return slices.Sorted(maps.Keys(mcpKinds)) }

var mcpKinds = map[string]model.Kind{
	"networking.istio.io/v1/ServiceEntry":        model.KindServiceEntry,
	"networking.istio.io/v1alpha3/ServiceEntry":  model.KindServiceEntry,
	"networking.istio.io/v1/WorkloadEntry":       model.KindWorkloadEntry,
	"networking.istio.io/v1alpha3/WorkloadEntry": model.KindWorkloadEntry,
}

// mcpResourceType is the type of every resources[i] of an MCP response.
const mcpResourceType = "type.googleapis.com/istio.mcp.v1alpha1.Resource"

// mcpSentKey is the key under which an MCP response records, in the
// stream's subscription (ReturnedResources, which go-control-plane keeps per
// stream and type and leaves to the cache to interpret), the version it
// sent. Resource names are "<namespace>/<name>", never empty.
const mcpSentKey = ""

// mcpEntry is one object as served: its name ("<namespace>/<name>"), its
// version and its marshalled mcp.Resource, nil when the object failed
// validation; listed is the rebuild that last listed the object.
type mcpEntry struct {
	name, version string
	resource      *anypb.Any
	listed        uint64
}

// mcpSet is the complete set of one kind: what every response for one of
// its type URLs carries. Resources are shared by every response: read-only.
type mcpSet struct {
	version   string
	resources []*anypb.Any
}

// mcpWatch is an open SotW watch of an MCP type.
type mcpWatch struct {
	req  *cachev3.Request
	out  chan cachev3.Response
	done chan struct{} // closed by cancel
}

// MCP is a go-control-plane cache.Cache for MCP types. LinearCache
// cannot serve them: it wraps every resource in an Any of the requested type
// URL, a GVK string istiod cannot unmarshal, and the snapshot cache refuses
// unknown type URLs. Each object's mcp.Resource is marshalled once per
// version (content hash) and the set of a kind is shared by all streams; only
// the DiscoveryResponse envelope is per response.
type MCP struct {
	src      ConfigSource
	validate func(*model.Config) error
	log      *slog.Logger

	changed chan struct{} // capacity 1: some kind is dirty

	mu       sync.Mutex
	dirty    map[model.Kind]bool
	entries  map[model.Kind]map[model.Object]*mcpEntry // by the object itself
	rebuilds uint64
	sets     map[model.Kind]*mcpSet
	watches  map[*mcpWatch]struct{}
}

var _ cachev3.Cache = (*MCP)(nil)

// NewMCP returns the MCP cache of src's objects; it holds nothing until
// RebuildAll. validate decides which objects are served (rule 5): one it
// fails is left off the wire. It is required, and NewMCP panics when it is
// nil: a cache that silently served unvalidated objects would hand istiod
// what it drops. This package imports no validation of its own; the
// pipeline gives translate.ValidateConfig (through xds.MCPOptions).
func NewMCP(src ConfigSource, validate func(*model.Config) error, logger *slog.Logger) *MCP {
	if validate == nil {
		panic("cache.NewMCP: validate is nil; give the validation objects must pass to be served (translate.ValidateConfig)")
	}
	return &MCP{
		src:      src,
		validate: validate,
		log:      logger,
		changed:  make(chan struct{}, 1),
		dirty:    make(map[model.Kind]bool),
		entries:  make(map[model.Kind]map[model.Object]*mcpEntry),
		sets:     make(map[model.Kind]*mcpSet),
		watches:  make(map[*mcpWatch]struct{}),
	}
}

// emptyMCPSet answers types meshbridge does not produce: istiod syncs only
// after one response for every type it asked for (alibaba/nacos#5301).
var emptyMCPSet = &mcpSet{version: setVersion(nil)}

// set returns the current set of typeURL's kind. Call with mu held.
func (c *MCP) set(typeURL string) *mcpSet {
	if s := c.sets[mcpKinds[typeURL]]; s != nil {
		return s
	}
	return emptyMCPSet
}

// CreateWatch implements cachev3.ConfigWatcher. It answers at once when the
// stream was not yet sent the type's current set, else when the set changes.
// What a stream was sent is read from its subscription, not from the
// request: istiod's first request per type carries a made-up nonce and no
// version, and a NACK carries the previous version; neither is an ACK.
func (c *MCP) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, out chan cachev3.Response) (func(), error) {
	w := &mcpWatch{req: req, out: out, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	set := c.set(req.GetTypeUrl())
	if sent, ok := sub.ReturnedResources()[mcpSentKey]; !ok || sent != set.version {
		c.respond(w, set)
		return sync.OnceFunc(func() { close(w.done) }), nil
	}
	c.watches[w] = struct{}{}
	return sync.OnceFunc(func() {
		c.mu.Lock()
		delete(c.watches, w)
		c.mu.Unlock()
		close(w.done)
	}), nil
}

// respond hands w the set. It never blocks: go-control-plane's ADS loop
// calls CreateWatch and drains out from the same goroutine, and out has a
// slot per Envoy type (10) while istiod asks for 17 types at once; when out
// is full, a goroutine delivers, or gives up when the watch is cancelled.
func (c *MCP) respond(w *mcpWatch, set *mcpSet) {
	typeURL := w.req.GetTypeUrl()
	resp := &cachev3.PassthroughResponse{
		Request: w.req,
		DiscoveryResponse: &discovery.DiscoveryResponse{
			VersionInfo: set.version,
			TypeUrl:     typeURL, // exactly as asked: istiod matches the GVK string
			Resources:   set.resources,
		},
		ReturnedResources: map[string]string{mcpSentKey: set.version},
	}
	mcpPushesTotal.WithLabelValues(mcpTypeLabel(typeURL)).Inc()
	select {
	case w.out <- resp:
	default:
		go func() {
			select {
			case w.out <- resp:
			case <-w.done:
			}
		}()
	}
}

// CreateDeltaWatch implements cachev3.ConfigWatcher. istiod's MCP client
// uses SotW only; a Delta request for an MCP type ends the stream with
// Unimplemented.
func (c *MCP) CreateDeltaWatch(req *cachev3.DeltaRequest, _ cachev3.Subscription, _ chan cachev3.DeltaResponse) (func(), error) {
	return nil, status.Errorf(codes.Unimplemented, "Istio config type %q is served over SotW ADS only", req.GetTypeUrl())
}

// Fetch implements cachev3.ConfigFetcher; MCP is served over ADS only.
func (c *MCP) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("MCP is served over ADS only")
}

// Changed marks kind for the next rebuild (Run). It never blocks.
func (c *MCP) Changed(kind model.Kind) {
	c.mu.Lock()
	c.dirty[kind] = true
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Run rebuilds the kinds Changed marked after a quiet period, or the
// debounce's max after the first change of a burst, until ctx is done;
// debounce returns the live quiet period and max, read at each burst.
// States: idle (waiting for a change), quiet (a change came; each further
// change restarts the quiet period unless max passed), rebuild.
func (c *MCP) Run(ctx context.Context, debounce func() (after, max time.Duration)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		}
		after, maxDelay := debounce()
		first := time.Now()
		timer := time.NewTimer(after)
	quiet:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-c.changed:
				if time.Since(first) < maxDelay {
					timer.Reset(after)
				}
			case <-timer.C:
				break quiet
			}
		}
		c.mu.Lock()
		kinds := c.dirty
		c.dirty = make(map[model.Kind]bool)
		c.mu.Unlock()
		for kind := range kinds {
			c.rebuild(kind)
		}
	}
}

// RebuildAll builds both kinds; the xDS server calls it once the registry
// is synced, before it serves.
func (c *MCP) RebuildAll() {
	c.rebuild(model.KindServiceEntry)
	c.rebuild(model.KindWorkloadEntry)
}

// rebuild lists kind from the source, reuses what it built of every object
// it built before (objects are immutable: a change is a new object), and,
// when the set changed, answers the watches of the kind's type URLs. An
// unchanged object costs a map lookup: nothing is materialised or
// allocated for it.
func (c *MCP) rebuild(kind model.Kind) {
	objs := c.src.Objects(kind, "")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rebuilds++
	entries := c.entries[kind]
	if entries == nil {
		entries = make(map[model.Object]*mcpEntry, len(objs))
		c.entries[kind] = entries
	}
	old := c.sets[kind]
	resources := make([]*anypb.Any, 0, len(objs))
	versions := make([]string, 0, 2*len(objs))
	for _, obj := range objs {
		e := entries[obj]
		if e == nil {
			e = c.build(obj.AsConfig())
			entries[obj] = e
		}
		e.listed = c.rebuilds
		if e.resource == nil {
			continue
		}
		resources = append(resources, e.resource)
		versions = append(versions, e.name, e.version)
	}
	maps.DeleteFunc(entries, func(_ model.Object, e *mcpEntry) bool { return e.listed != c.rebuilds })
	set := &mcpSet{version: setVersion(versions), resources: resources}
	if old != nil && old.version == set.version {
		return
	}
	c.sets[kind] = set
	for w := range c.watches {
		if mcpKinds[w.req.GetTypeUrl()] == kind {
			delete(c.watches, w)
			c.respond(w, set)
		}
	}
	c.log.Debug("Pushed MCP", "kind", kind, "count", len(resources), "version", set.version)
}

// build validates cfg and marshals its mcp.Resource. An object that fails
// the validation (NewMCP's validate: istiod's) is logged and left off the
// wire (istiod would drop it with a log line only); the entry remembers
// that for as long as the object is listed.
func (c *MCP) build(cfg *model.Config) *mcpEntry {
	name := cfg.Namespace + "/" + cfg.Name
	if err := c.validate(cfg); err != nil {
		c.log.Warn("Skipped invalid object for MCP", "kind", cfg.Kind, "namespace", cfg.Namespace, "name", cfg.Name, "err", err)
		return &mcpEntry{name: name}
	}
	res, err := mcpResource(cfg, name)
	if err != nil {
		c.log.Warn("Skipped object for MCP", "kind", cfg.Kind, "namespace", cfg.Namespace, "name", cfg.Name, "err", err)
		return &mcpEntry{name: name}
	}
	return res
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// mcpResource marshals cfg as istiod's adsc reads it (pkg/adsc mcpToPilot):
// metadata.name "<namespace>/<name>", metadata.version the content hash
// (istiod updates an entry only when it changed), labels, annotations, and
// body an Any of the spec. networking.istio.io/v1 types are Go aliases of
// v1alpha3 in istio.io/api, so the body is
// type.googleapis.com/istio.networking.v1alpha3.ServiceEntry for both type
// URLs: the only name istiod's proto registry resolves.
func mcpResource(cfg *model.Config, name string) (*mcpEntry, error) {
	body, err := marshalAny(cfg.Spec)
	if err != nil {
		return nil, err
	}
	version := cfg.ContentHash()
	if version == "" {
		// Not from translate: version by content so istiod still skips
		// unchanged entries.
		version = hashHex(body.GetValue())
	}
	res, err := marshalAny(&mcp.Resource{
		Metadata: &mcp.Metadata{
			Name:        name,
			Version:     version,
			Labels:      cfg.Labels,
			Annotations: cfg.OutputAnnotations(),
		},
		Body: body,
	})
	if err != nil {
		return nil, err
	}
	return &mcpEntry{name: name, version: version, resource: res}, nil
}

func marshalAny(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, deterministic); err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	return a, nil
}

// setVersion is the version of a set: a hash of its names and versions, so
// a rebuild that changes nothing pushes nothing.
func setVersion(namesAndVersions []string) string {
	h := fnv.New64a()
	for _, s := range namesAndVersions {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashHex(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// mcpTypeLabel is the type_url label of an MCP response: the type URL for
// the types meshbridge produces, "other" for the empty answers to any other
// Istio config type (istiod asks for every type it knows; the label stays
// bounded).
func mcpTypeLabel(typeURL string) string {
	if _, ok := mcpKinds[typeURL]; ok {
		return typeURL
	}
	return "other"
}

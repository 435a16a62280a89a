package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Resources is the go-control-plane cache.Cache of one xDS type whose
// resources are versioned one by one. It answers watches by the rules of
// go-control-plane's LinearCache (pkg/cache/v3/linear.go, v0.14) and holds
// less per resource: the encoding handed to it (an xds/gen.Encoded's, not
// copied), the version that set it, and, once a response carried it, the
// Any and the Delta Resource every later response shares. A push to n
// streams builds n response envelopes and marshals no resource again.
//
// Versions:
//   - A response's version_info (SotW) and system_version_info (Delta) is
//     the cache's version, the number of updates so far; package xds
//     reads it as a number.
//   - SotW records, per resource a stream was sent, the cache version that
//     set the resource (as LinearCache does).
//   - Delta's resource version is a content hash of the encoding,
//     go-control-plane's cachev3.HashResource (SHA-256, hex) as LinearCache
//     uses, so a client reconnecting with initial_resource_versions, to
//     this process or to another, is sent exactly the resources whose
//     content differs.
//
// When a watch answers (each watch answers once, then the stream opens
// another with its next request):
//   - SotW: a request with an empty version_info is answered at once, even
//     with no resource. Otherwise a subscribed resource new to the stream or
//     changed answers; CDS and LDS responses carry every subscribed
//     resource (the full state, cachev3.ResourceRequiresFullStateInSotw),
//     EDS and RDS responses the changed ones, and a removal wakes only the
//     full-state types.
//   - Delta: a subscribed resource new to the stream or changed answers, and
//     so does a removal of one the stream has, or its unsubscription; the
//     first request of a wildcard stream is answered at once.
//   - A wildcard watch is woken by every update; another by the names it
//     subscribes to.
//
// Safe for concurrent use.
type Resources struct {
	typeURL   string
	fullState bool // SotW responses carry every subscribed resource

	mu        sync.Mutex
	version   uint64
	versionS  string // version, formatted
	resources map[string]*cachedEntry
	watches   map[string]map[*cacheWatch]struct{} // by subscribed name
	wildcard  map[*cacheWatch]struct{}
}

// cachedEntry is one resource version in a Resources, 32 bytes: a cache
// holds one per resource whether or not a stream asks for it. wire is the
// encoding handed over (an encoded resource's, shared), held as a string
// because it is never written; forms is built on the first response that
// carries the version, under the cache's lock, and read-only after.
type cachedEntry struct {
	wire string
	// version is the cache version that set it, SotW's resource version;
	// one string serves every resource of an update.
	version *string
	forms   *entryForms
}

// entryForms are a resource version's forms in responses, shared by every
// response that carries it.
type entryForms struct {
	anyRes *anypb.Any
	// deltaRes's Version is Delta's resource version (deltaResource).
	deltaRes *discovery.Resource
}

// bytesOf returns e's encoding as the bytes it was handed over as.
func (e *cachedEntry) bytesOf() []byte { return unsafe.Slice(unsafe.StringData(e.wire), len(e.wire)) }

// cacheWatch is an open watch: SotW (req, out) or Delta (dreq, dout).
type cacheWatch struct {
	sub  cachev3.Subscription
	req  *cachev3.Request
	out  chan cachev3.Response
	dreq *cachev3.DeltaRequest
	dout chan cachev3.DeltaResponse

	woken     uint64        // the update that last collected it (notify)
	tracked   bool          // in watches or wildcard, under the cache's lock
	cancelled bool          // set by cancel, under the cache's lock
	done      chan struct{} // made when a send could not complete at once; closed by cancel
}

var _ cachev3.Cache = (*Resources)(nil)

// NewResources returns an empty cache of typeURL's resources.
func NewResources(typeURL string) *Resources {
	return &Resources{
		typeURL:   typeURL,
		fullState: cachev3.ResourceRequiresFullStateInSotw(typeURL),
		versionS:  "0",
		resources: make(map[string]*cachedEntry),
		watches:   make(map[string]map[*cacheWatch]struct{}),
		wildcard:  make(map[*cacheWatch]struct{}),
	}
}

// Update sets the resources of set, removes the names of remove, raises the
// cache's version by one and answers the watches that the change wakes. A
// resource that cannot be marshalled is left out (the others are applied)
// and reported in the error; an encoded one always can.
func (c *Resources) Update(set map[string]types.Resource, remove []string) error {
	var errs []error
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	c.versionS = strconv.FormatUint(c.version, 10)
	version := new(string)
	*version = c.versionS
	var woken []*cacheWatch
	wake := func(name string) {
		for w := range c.watches[name] {
			if w.woken != c.version {
				w.woken = c.version
				woken = append(woken, w)
			}
		}
	}
	for name, res := range set {
		wire, err := encoding(res)
		if err != nil {
			errs = append(errs, fmt.Errorf("resource %q: %w", name, err))
			continue
		}
		c.resources[name] = &cachedEntry{wire: unsafe.String(unsafe.SliceData(wire), len(wire)), version: version}
		wake(name)
	}
	for _, name := range remove {
		delete(c.resources, name)
		wake(name)
		if len(c.watches[name]) == 0 {
			delete(c.watches, name)
		}
	}
	for w := range c.wildcard {
		woken = append(woken, w)
	}
	for _, w := range woken {
		if c.answer(w, false) {
			c.untrack(w)
		}
	}
	return errors.Join(errs...)
}

// Differences returns the resources of want whose encoding differs from
// the cache's, or that it lacks, and the names of remove that it holds and
// want does not. Equal encodings are equal messages: the encodings are
// deterministic (encoded, encoding). A resource a push kept shares its
// encoding, which bytes.Equal compares without a scan (the runtime's
// memequal returns at once for one pointer). A resource that cannot be
// marshalled counts as changed, so that Update reports its error.
func (c *Resources) Differences(want map[string]types.Resource, remove []string) (map[string]types.Resource, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	update := make(map[string]types.Resource)
	for name, res := range want {
		if e, ok := c.resources[name]; ok {
			if wire, err := encoding(res); err == nil && bytes.Equal(e.bytesOf(), wire) {
				continue
			}
		}
		update[name] = res
	}
	var del []string
	for _, name := range remove {
		if _, ok := c.resources[name]; ok {
			if _, kept := want[name]; !kept {
				del = append(del, name)
			}
		}
	}
	return update, del
}

// Has reports whether the cache holds name.
func (c *Resources) Has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.resources[name]
	return ok
}

// Absent returns the names the cache holds that want lacks.
func (c *Resources) Absent(want map[string]types.Resource) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.resources {
		if _, ok := want[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// Names returns the names the cache holds.
func (c *Resources) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.resources))
}

// encoded is a resource held as its deterministic encoding (xds/gen's
// Encoded): the cache keeps its bytes, shared, instead of marshalling it.
type encoded interface {
	Encoding() []byte
}

// encoding returns res's deterministic encoding: an encoded resource's own
// bytes, shared, or a new marshal.
func encoding(res types.Resource) ([]byte, error) {
	if e, ok := res.(encoded); ok {
		return e.Encoding(), nil
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(res)
}

// CreateWatch implements cachev3.ConfigWatcher for SotW.
func (c *Resources) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, out chan cachev3.Response) (func(), error) {
	if req.GetTypeUrl() != c.typeURL {
		return nil, fmt.Errorf("request type %s does not match cache type %s", req.GetTypeUrl(), c.typeURL)
	}
	return c.watch(&cacheWatch{sub: sub, req: req, out: out}, req.GetVersionInfo() == ""), nil
}

// CreateDeltaWatch implements cachev3.ConfigWatcher for Delta.
func (c *Resources) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, out chan cachev3.DeltaResponse) (func(), error) {
	if req.GetTypeUrl() != c.typeURL {
		return nil, fmt.Errorf("request type %s does not match cache type %s", req.GetTypeUrl(), c.typeURL)
	}
	return c.watch(&cacheWatch{sub: sub, dreq: req, dout: out}, sub.IsWildcard() && req.GetResponseNonce() == ""), nil
}

// watch answers w at once when it has something to send (or evenIfEmpty),
// else tracks it until an update wakes it. It returns w's cancel.
func (c *Resources) watch(w *cacheWatch, evenIfEmpty bool) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.answer(w, evenIfEmpty) {
		w.tracked = true
		if w.sub.IsWildcard() {
			c.wildcard[w] = struct{}{}
		} else {
			for name := range w.sub.SubscribedResources() {
				ws := c.watches[name]
				if ws == nil {
					ws = make(map[*cacheWatch]struct{})
					c.watches[name] = ws
				}
				ws[w] = struct{}{}
			}
		}
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if w.cancelled {
			return
		}
		w.cancelled = true
		c.untrack(w)
		if w.done != nil {
			close(w.done)
		}
	}
}

// untrack removes w from the watches. A name's set of watches is kept
// when it empties while the name is a resource: a push wakes every watch
// of a name and the streams watch it again as they answer, so dropping
// the set would rebuild it, growing it watch by watch, on every push. Call
// with mu held.
func (c *Resources) untrack(w *cacheWatch) {
	if !w.tracked {
		return
	}
	w.tracked = false
	if w.sub.IsWildcard() {
		delete(c.wildcard, w)
		return
	}
	for name := range w.sub.SubscribedResources() {
		if ws := c.watches[name]; ws != nil {
			delete(ws, w)
			if _, exists := c.resources[name]; len(ws) == 0 && !exists {
				delete(c.watches, name)
			}
		}
	}
}

// answer sends w its response when there is one to send (see the type's
// rules) and reports whether it did. Call with mu held.
func (c *Resources) answer(w *cacheWatch, evenIfEmpty bool) bool {
	delta := w.dreq != nil
	changed, removed := c.changes(w.sub, delta)
	if len(changed)+len(removed) == 0 && !evenIfEmpty {
		return false
	}
	send := changed
	if !delta {
		switch {
		case !c.fullState:
			if len(changed) == 0 && !evenIfEmpty {
				return false
			}
		case w.sub.IsWildcard():
			send = make([]string, 0, len(c.resources))
			for name := range c.resources {
				send = append(send, name)
			}
		default:
			send = send[:0:0]
			for name := range w.sub.SubscribedResources() {
				if _, ok := c.resources[name]; ok {
					send = append(send, name)
				}
			}
		}
	}
	next := maps.Clone(w.sub.ReturnedResources())
	if next == nil {
		next = make(map[string]string, len(send))
	}
	for _, name := range removed {
		delete(next, name)
	}
	if delta {
		resources := make([]*discovery.Resource, len(send))
		for i, name := range send {
			r := c.deltaResource(name, c.resources[name])
			resources[i] = r
			next[name] = r.Version
		}
		deliver[cachev3.DeltaResponse](w, w.dout, &cachev3.DeltaPassthroughResponse{
			DeltaRequest:   w.dreq,
			NextVersionMap: next,
			DeltaDiscoveryResponse: &discovery.DeltaDiscoveryResponse{
				SystemVersionInfo: c.versionS,
				TypeUrl:           c.typeURL,
				Resources:         resources,
				RemovedResources:  removed,
			},
		})
		return true
	}
	resources := make([]*anypb.Any, len(send))
	for i, name := range send {
		e := c.resources[name]
		resources[i] = c.anyOf(e)
		next[name] = *e.version
	}
	deliver[cachev3.Response](w, w.out, &cachev3.PassthroughResponse{
		Request: w.req,
		DiscoveryResponse: &discovery.DiscoveryResponse{
			VersionInfo: c.versionS,
			TypeUrl:     c.typeURL,
			Resources:   resources,
		},
		ReturnedResources: next,
	})
	return true
}

// changes returns the names sub should be sent (new to the stream, or of
// another version than it was sent) and the names it has that are gone
// (removed from the cache, or no longer subscribed), as LinearCache's
// computeResourceChange. Call with mu held.
func (c *Resources) changes(sub cachev3.Subscription, delta bool) (changed, removed []string) {
	known := sub.ReturnedResources()
	version := func(name string, e *cachedEntry) string {
		if delta {
			return c.deltaResource(name, e).Version
		}
		return *e.version
	}
	if sub.IsWildcard() {
		for name, e := range c.resources {
			if v, ok := known[name]; !ok || v != version(name, e) {
				changed = append(changed, name)
			}
		}
		for name := range known {
			if _, ok := c.resources[name]; !ok {
				removed = append(removed, name)
			}
		}
		return changed, removed
	}
	subscribed := sub.SubscribedResources()
	for name := range subscribed {
		e, exists := c.resources[name]
		v, ok := known[name]
		switch {
		case !exists:
			if ok {
				removed = append(removed, name)
			}
		case !ok || v != version(name, e):
			changed = append(changed, name)
		}
	}
	for name := range known {
		if _, ok := subscribed[name]; !ok {
			removed = append(removed, name)
		}
	}
	return changed, removed
}

// anyOf returns e's Any, shared by every response. Call with mu held.
func (c *Resources) anyOf(e *cachedEntry) *anypb.Any {
	if e.forms == nil {
		e.forms = &entryForms{}
	}
	if e.forms.anyRes == nil {
		e.forms.anyRes = &anypb.Any{TypeUrl: c.typeURL, Value: e.bytesOf()}
	}
	return e.forms.anyRes
}

// deltaResource returns e's Delta Resource, shared by every response; its
// Version is the resource's Delta version, go-control-plane's
// cachev3.HashResource of the encoding. Call with mu held.
func (c *Resources) deltaResource(name string, e *cachedEntry) *discovery.Resource {
	if e.forms == nil || e.forms.deltaRes == nil {
		res := &discovery.Resource{Name: name, Version: cachev3.HashResource(e.bytesOf()), Resource: c.anyOf(e)}
		e.forms.deltaRes = res
	}
	return e.forms.deltaRes
}

// deliver hands resp to w's stream on out (w.out or w.dout) without
// blocking: go-control-plane's stream loop both creates watches (under this
// cache's lock) and drains the channel, so a full channel is handed to a
// goroutine, which gives up when the watch is cancelled. Call with the
// cache's lock held.
func deliver[R any](w *cacheWatch, out chan R, resp R) {
	select {
	case out <- resp:
	default:
		done := w.doneChan()
		go func() {
			select {
			case out <- resp:
			case <-done:
			}
		}()
	}
}

// doneChan returns the channel w's cancel closes. Call with the cache's
// lock held.
func (w *cacheWatch) doneChan() chan struct{} {
	if w.done == nil {
		w.done = make(chan struct{})
		if w.cancelled {
			close(w.done)
		}
	}
	return w.done
}

// Fetch implements cachev3.ConfigFetcher: resources are served over
// streams only, as by LinearCache.
func (c *Resources) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("fetch is not implemented: xDS is served over ADS streams")
}

// NumWatches returns how many open watches an update of name wakes.
func (c *Resources) NumWatches(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watches[name]) + len(c.wildcard)
}

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

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/xds/ads"
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
// Profiles: a resource may be served in another form to some clients (a
// Varied resource, xds/gen's Varied; ServeProfiles). A watch's profile is
// its stream's node's, and it is served each resource's form for that
// profile, under the same versions: a SotW version is the update that set
// the resource, whatever its form; a Delta version is the hash of the form
// sent, so a client reconnecting with initial_resource_versions compares
// with what it was sent.
//
// Localities: a resource may be served in a form that depends on where
// the client runs (a Localized resource, xds/gen's Localized;
// ServeLocalized): a watch is served the form of its node's locality and
// labels, built on the first response that carries it and shared by every
// stream of the same form until the resource changes, under the same
// versions as profiles' forms.
//
// Safe for concurrent use.
type Resources struct {
	typeURL   string
	fullState bool // SotW responses carry every subscribed resource
	profiles  int  // ServeProfiles' n; 0 or 1: no profile but 0
	// profileOf and served are ServeProfiles'; nil: every watch is
	// profile 0.
	profileOf func(*core.Node) int
	served    func(node *core.Node, substituted []string)
	// placeOf is ServeLocalized's; nil: every watch is served the own
	// form of a Localized resource.
	placeOf func(*core.Node) (locality string, labels map[string]string)

	mu        sync.Mutex
	version   uint64
	versionS  string // version, formatted
	resources map[string]*cachedEntry
	// variants are the other forms of the Varied resources, by name and
	// profile-1 (nil where the profile is served the own form); only
	// Varied resources are in it, so a cachedEntry stays 32 bytes.
	variants map[string][]*variantEntry
	// localized are the Localized resources, by name, with the forms
	// built so far.
	localized map[string]*localizedEntry
	watches   map[string]map[*cacheWatch]struct{} // by subscribed name
	wildcard  map[*cacheWatch]struct{}

	// The ADS server's standing watches (source.go): by subscribed name,
	// and the wildcard ones.
	adsWatches  map[string]map[*ads.Watch]struct{}
	adsWildcard map[*ads.Watch]struct{}
	// bodies are the response bodies encoded since the last Update, by
	// their memo key (source.go); sorted the names held, sorted, once
	// asked since the last Update; scratch and keyBuf Respond's buffers.
	bodies  map[string]*wire.Response
	sorted  []string
	scratch []*cachedEntry
	keyBuf  []byte
	changed []string
	removed []string
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

// variantEntry is one profile's form of a Varied resource.
type variantEntry struct {
	cachedEntry
	substituted []string
}

// localizedEntry is a Localized resource version and the forms built of
// it, by FormKey; own is the key of the resource's own encoding.
type localizedEntry struct {
	res   Localized
	own   string
	forms map[string]*cachedEntry
}

// Localized is a resource whose form depends on where the client runs
// (xds/gen's Localized): FormKey names the form of a client at locality
// ("region/zone/subzone") with labels, equal keys for equal forms; Form
// builds the encoding of a key's form; SameForms reports whether another
// resource sends every client the same.
type Localized interface {
	FormKey(locality string, labels map[string]string) string
	Form(key string) []byte
	SameForms(o any) bool
}

// Varied is a resource served in another form to some profiles (xds/gen's
// Varied): Variant(p) is profile p's encoding and what it substitutes, nil
// where p is served the resource's own encoding.
type Varied interface {
	Variant(p int) (wire []byte, substituted []string)
}

// bytesOf returns e's encoding as the bytes it was handed over as.
func (e *cachedEntry) bytesOf() []byte { return unsafe.Slice(unsafe.StringData(e.wire), len(e.wire)) }

// view is what decides which form of a resource a stream is served: its
// node's profile (ServeProfiles) and place (ServeLocalized).
type view struct {
	profile int // ServeProfiles' profile of the stream's node
	// locality and labels are ServeLocalized's place of the stream's node.
	locality string
	labels   map[string]string
}

// viewOf returns node's view. Call with mu held.
func (c *Resources) viewOf(node *core.Node) view {
	var v view
	if c.profileOf != nil {
		if p := c.profileOf(node); p > 0 && p < c.profiles {
			v.profile = p
		}
	}
	if c.placeOf != nil {
		v.locality, v.labels = c.placeOf(node)
	}
	return v
}

// cacheWatch is an open go-control-plane watch: SotW (req, out) or Delta
// (dreq, dout).
type cacheWatch struct {
	view
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
		variants:  make(map[string][]*variantEntry),
		localized: make(map[string]*localizedEntry),
		watches:   make(map[string]map[*cacheWatch]struct{}),
		wildcard:  make(map[*cacheWatch]struct{}),

		adsWatches:  make(map[string]map[*ads.Watch]struct{}),
		adsWildcard: make(map[*ads.Watch]struct{}),
		bodies:      make(map[string]*wire.Response),
	}
}

// ServeProfiles makes the cache serve each watch the form of its profile:
// profileOf(node) of the stream's node, in [0, n); a Varied resource's
// Variant(p) for p in [1, n) is that profile's form. served, when not nil,
// is told of every response that carried substituted forms: the node and
// what each form substituted (one entry per resource and substitution).
// Called under the cache's lock, it must not call the cache. Call before
// the cache is used.
func (c *Resources) ServeProfiles(n int, profileOf func(*core.Node) int, served func(node *core.Node, substituted []string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.profiles = n
	c.profileOf = profileOf
	c.served = served
}

// ServeLocalized makes the cache serve each watch the form of a Localized
// resource for its place: placeOf(node) of the stream's node, its
// locality ("region/zone/subzone") and labels, read-only. Call before the
// cache is used.
func (c *Resources) ServeLocalized(placeOf func(*core.Node) (locality string, labels map[string]string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.placeOf = placeOf
}

// Update sets the resources of set, removes the names of remove, raises the
// cache's version by one and answers the watches that the change wakes. A
// resource that cannot be marshalled is left out (the others are applied)
// and reported in the error; an encoded one always can.
func (c *Resources) Update(set map[string]types.Resource, remove []string) error {
	var errs []error
	c.mu.Lock()
	c.version++
	c.versionS = strconv.FormatUint(c.version, 10)
	clear(c.bodies)
	c.sorted = nil
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
	changed := make([]string, 0, len(set)+len(remove))
	for name, res := range set {
		wire, err := encoding(res)
		if err != nil {
			errs = append(errs, fmt.Errorf("resource %q: %w", name, err))
			continue
		}
		c.resources[name] = &cachedEntry{wire: unsafe.String(unsafe.SliceData(wire), len(wire)), version: version}
		c.setVariants(name, res, version)
		if l, ok := res.(Localized); ok {
			c.localized[name] = &localizedEntry{res: l, own: l.FormKey("", nil)}
		} else {
			delete(c.localized, name)
		}
		wake(name)
		changed = append(changed, name)
	}
	for _, name := range remove {
		delete(c.resources, name)
		delete(c.variants, name)
		delete(c.localized, name)
		wake(name)
		if len(c.watches[name]) == 0 {
			delete(c.watches, name)
		}
		changed = append(changed, name)
	}
	for w := range c.wildcard {
		woken = append(woken, w)
	}
	for _, w := range woken {
		if c.answer(w, false) {
			c.untrack(w)
		}
	}
	adsWoken := c.adsWoken(changed)
	c.mu.Unlock()
	ads.Wake(adsWoken)
	return errors.Join(errs...)
}

// setVariants records the forms res has for the profiles served (none
// when it is not Varied). Call with mu held.
func (c *Resources) setVariants(name string, res types.Resource, version *string) {
	v, ok := res.(Varied)
	if !ok || c.profiles < 2 {
		delete(c.variants, name)
		return
	}
	forms := make([]*variantEntry, c.profiles-1)
	has := false
	for p := 1; p < c.profiles; p++ {
		if wire, substituted := v.Variant(p); wire != nil {
			forms[p-1] = &variantEntry{cachedEntry: cachedEntry{wire: unsafe.String(unsafe.SliceData(wire), len(wire)),
				version: version}, substituted: substituted}
			has = true
		}
	}
	if !has {
		delete(c.variants, name)
		return
	}
	c.variants[name] = forms
}

// sameVariants reports whether res has the forms the cache holds for
// name. Call with mu held.
func (c *Resources) sameVariants(name string, res types.Resource) bool {
	held := c.variants[name]
	v, ok := res.(Varied)
	if !ok || c.profiles < 2 {
		return held == nil
	}
	for p := 1; p < c.profiles; p++ {
		wire, substituted := v.Variant(p)
		var e *variantEntry
		if held != nil {
			e = held[p-1]
		}
		switch {
		case e == nil && wire == nil:
		case e == nil || wire == nil || !bytes.Equal(e.bytesOf(), wire) || !slices.Equal(e.substituted, substituted):
			return false
		}
	}
	return true
}

// sameLocalized reports whether res sends every client what the cache
// holds of name does. Call with mu held.
func (c *Resources) sameLocalized(name string, res types.Resource) bool {
	held := c.localized[name]
	l, ok := res.(Localized)
	if !ok || held == nil {
		return !ok && held == nil
	}
	return held.res.SameForms(l)
}

// entryFor returns the form of name (held as e) that w is served: its
// profile's (ServeProfiles), or its place's (ServeLocalized), built on
// first use. Call with mu held.
func (c *Resources) entryFor(name string, e *cachedEntry, w *view) *cachedEntry {
	if w.profile != 0 {
		if forms := c.variants[name]; forms != nil && forms[w.profile-1] != nil {
			return &forms[w.profile-1].cachedEntry
		}
	}
	l := c.localized[name]
	if l == nil {
		return e
	}
	key := l.res.FormKey(w.locality, w.labels)
	if key == l.own {
		return e
	}
	form, ok := l.forms[key]
	if !ok {
		wire := l.res.Form(key)
		form = &cachedEntry{wire: unsafe.String(unsafe.SliceData(wire), len(wire)), version: e.version}
		if form.wire == e.wire {
			form = e // the own form: shared, not held twice
		}
		if l.forms == nil {
			l.forms = make(map[string]*cachedEntry)
		}
		l.forms[key] = form
	}
	return form
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
			if wire, err := encoding(res); err == nil && bytes.Equal(e.bytesOf(), wire) && c.sameVariants(name, res) &&
				c.sameLocalized(name, res) {
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
	return c.watch(&cacheWatch{sub: sub, req: req, out: out}, req.GetNode(), req.GetVersionInfo() == ""), nil
}

// CreateDeltaWatch implements cachev3.ConfigWatcher for Delta.
func (c *Resources) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, out chan cachev3.DeltaResponse) (func(), error) {
	if req.GetTypeUrl() != c.typeURL {
		return nil, fmt.Errorf("request type %s does not match cache type %s", req.GetTypeUrl(), c.typeURL)
	}
	return c.watch(&cacheWatch{sub: sub, dreq: req, dout: out}, req.GetNode(), sub.IsWildcard() && req.GetResponseNonce() == ""), nil
}

// watch answers w at once when it has something to send (or evenIfEmpty),
// else tracks it until an update wakes it. It returns w's cancel.
func (c *Resources) watch(w *cacheWatch, node *core.Node, evenIfEmpty bool) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.view = c.viewOf(node)
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
	changed, removed := c.changes(w.sub, &w.view, delta, nil, nil)
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
	node := w.req.GetNode()
	if delta {
		node = w.dreq.GetNode()
	}
	defer c.noteSubstitutions(node, w.profile, send)
	if delta {
		resources := make([]*discovery.Resource, len(send))
		for i, name := range send {
			r := c.deltaResource(name, c.entryFor(name, c.resources[name], &w.view))
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
		e := c.entryFor(name, c.resources[name], &w.view)
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

// noteSubstitutions tells served what the substituted forms among the
// resources sent to node (of profile) substituted. Call with mu held.
func (c *Resources) noteSubstitutions(node *core.Node, profile int, sent []string) {
	if profile == 0 || c.served == nil || len(c.variants) == 0 {
		return
	}
	var substituted []string
	for _, name := range sent {
		if forms := c.variants[name]; forms != nil && forms[profile-1] != nil {
			substituted = append(substituted, forms[profile-1].substituted...)
		}
	}
	if len(substituted) > 0 {
		c.served(node, substituted)
	}
}

// changes returns the names w's subscription should be sent (new to the stream, or of
// another version than it was sent) and the names it has that are gone
// (removed from the cache, or no longer subscribed), as LinearCache's
// computeResourceChange. Call with mu held.
//
// They are appended to changed and removed as given (nil, or buffers to
// reuse).
func (c *Resources) changes(sub cachev3.Subscription, w *view, delta bool, changed, removed []string) ([]string, []string) {
	known := sub.ReturnedResources()
	version := func(name string, e *cachedEntry) string {
		if delta {
			return c.deltaResource(name, c.entryFor(name, e, w)).Version
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
	held := 0 // subscribed names the stream holds
	for name := range subscribed {
		e, exists := c.resources[name]
		v, ok := known[name]
		if ok {
			held++
		}
		switch {
		case !exists:
			if ok {
				removed = append(removed, name)
			}
		case !ok || v != version(name, e):
			changed = append(changed, name)
		}
	}
	if held == len(known) {
		return changed, removed // it holds no name it does not subscribe to
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

// NumWatches returns how many open watches an update of name wakes:
// go-control-plane's and the ADS server's (source.go).
func (c *Resources) NumWatches(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watches[name]) + len(c.wildcard) + len(c.adsWatches[name]) + len(c.adsWildcard)
}

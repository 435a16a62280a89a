package ads

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/internal/wire"
)

// Source serves one type's resources to the watches Route gives it. The
// server calls Watch, Unwatch and Respond for one watch at a time (under
// the watch's stream's lock); a Source calls Wake, never under a lock the
// server could wait for in a Source call.
type Source interface {
	// Watch starts waking w (Wake) when a resource its subscription names,
	// or any for a wildcard one, changes. It may set w.Private.
	Watch(w *Watch)
	// Unwatch stops waking w; its subscription is the one Watch saw.
	Unwatch(w *Watch)
	// Respond returns the response w's stream is to be sent now and its
	// version (a DiscoveryResponse's version_info, a Delta response's
	// system_version_info), or nil when there is nothing to send and not
	// force. It records what the response sends in w.Sub's returned
	// resources (ReturnedResources, written in place), which the next
	// Respond compares with: the server sends every response Respond
	// returns, or the stream ends.
	Respond(w *Watch, force bool) (resp *wire.Response, version string)
}

// ErrHandOff is Route's answer for a type the stream is to be served by
// Options.HandOff (rule 11).
var ErrHandOff = errors.New("ads: stream handed off")

// Watch is one stream's subscription to one type. Sources read it while
// the server holds the stream's lock: in Watch, Unwatch and Respond.
type Watch struct {
	TypeURL string
	Delta   bool
	// Node is the stream's Node, from its first request.
	Node *core.Node
	// Sub is the subscription (rule 3); Respond writes its returned
	// resources.
	Sub stream.Subscription
	// Private is the Source's own, set by Watch.
	Private any

	st     *adsStream
	source Source
	rank   int // flush order (rule 8)
	// names is SotW's last taken request's names, so a request that
	// repeats them leaves the subscription alone.
	names    []string
	awaiting bool   // a response awaits its answer
	nonce    string // that response's nonce
	size     int    // that response's encoded size
	dirty    bool   // woken while awaiting
	pending  bool   // in st.pending
	force    bool   // the next Respond answers even with nothing (rules 6, 7)
}

// Hooks observe the streams. IDs number SotW and Delta streams apart, each
// from 1, as go-control-plane's do.
type Hooks interface {
	// Opened sees a stream before its first request, from its handler
	// goroutine, and returns what observes the stream from then on (nil:
	// nothing), so that a stream's observations find their state without a
	// lookup.
	Opened(ctx context.Context, id int64, delta bool) StreamHooks
}

// StreamHooks observe one stream. The server calls them from the stream's
// handler goroutine (Request, Closed) and from whichever goroutine sends
// (Response), never two at once, and never while it holds a lock of the
// stream.
type StreamHooks interface {
	// Request sees every request, stale ones included, before the server
	// acts on it; node is the stream's.
	Request(node *core.Node, req Request)
	// Response sees every response just before it is sent: its type,
	// nonce, version, encoded size in bytes, and the time its flush began
	// (one clock read per flush, not per send: rule 10).
	Response(typeURL, nonce, version string, size int, at time.Time)
	// Closed sees the stream end, after its last Request and Response.
	Closed()
}

// Request is what Hooks are told of a request.
type Request struct {
	TypeURL, Nonce string
	ErrorDetail    *status.Status
	// Names is SotW's list; Subscribe and Unsubscribe Delta's changes.
	Names, Subscribe, Unsubscribe []string
}

// Options configure a Server.
type Options struct {
	// Route returns the Source of typeURL for a stream of node, or an
	// error that ends the stream (rule 11). Required.
	Route func(typeURL string, node *core.Node, delta bool) (Source, error)
	// LegacyWildcard reports whether an empty first request of typeURL
	// subscribes to everything (go-control-plane's
	// DeactivateLegacyWildcardForTypes inverted). nil: every type.
	LegacyWildcard func(typeURL string) bool
	// HandOff serves the SotW streams whose first request Route hands off.
	HandOff discovery.AggregatedDiscoveryServiceServer
	// Hooks observe the streams; nil: none.
	Hooks Hooks
	// Workers send the pushes; 0: GOMAXPROCS.
	Workers int
	// SlowBytes is the un-answered bytes past which a stream's sends take
	// the slow path (rule 9); 0: DefaultSlowBytes.
	SlowBytes int
}

// DefaultSlowBytes is Options.SlowBytes' default: grpc-go's default
// per-stream write quota, past which a send may block on the client.
const DefaultSlowBytes = 64 << 10

// Server is the ADS server (discovery.AggregatedDiscoveryServiceServer).
// Serve it on a grpc.Server made with its ServerOptions.
type Server struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	opts Options
	ctx  context.Context
	// ids number the SotW and Delta streams.
	ids, deltaIDs atomic.Int64
	queue         chan []*adsStream
	// flushing counts flushes in progress (workers and slow paths), for
	// Close.
	flushing sync.WaitGroup
	workers  sync.WaitGroup
}

// NewServer returns a Server whose workers run until ctx ends.
func NewServer(ctx context.Context, opts Options) *Server {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.SlowBytes <= 0 {
		opts.SlowBytes = DefaultSlowBytes
	}
	s := &Server{opts: opts, ctx: ctx, queue: make(chan []*adsStream, 256)}
	for range opts.Workers {
		s.workers.Go(s.work)
	}
	return s
}

// ServerOptions are the gRPC server options the Server needs: its Codec,
// and a tap handle that ends every stream's context when the server's
// ends, so that a handler blocked reading its client returns (rule 12):
// the stream ends with status Canceled, which grpc-go writes when Recv
// fails on the ended context.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(Codec{}),
		grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			ctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(s.ctx, cancel)
			// Unregistered when the stream ends (the transport cancels
			// its context), so ended streams leave nothing on s.ctx.
			context.AfterFunc(ctx, func() { stop() })
			return ctx, nil
		}),
	}
}

// Close waits until the workers stopped (the server's context ended) and
// every send in flight returned.
func (s *Server) Close() {
	s.workers.Wait()
	s.flushing.Wait()
}

// adsStream is one open stream.
type adsStream struct {
	s     *Server
	id    int64
	delta bool
	gs    grpc.ServerStream
	hooks StreamHooks // nil: none

	// sendMu orders the stream's sends: it is held from a flush's first
	// Respond to its last send (rule 8).
	sendMu sync.Mutex
	// node is the stream's Node (nodeOf); the handler goroutine's alone.
	node *core.Node
	mu   sync.Mutex // guards the fields below and every Watch's state
	// ranked are the watches of the four generated types, by rank (a
	// request finds its watch without hashing its type URL); watches the
	// others' by type URL.
	ranked  [Ranked]*Watch
	watches map[string]*Watch
	pending []*Watch // woken or answered, to flush, by rank
	queued  bool     // in the workers' queue
	closed  bool
	nonce   uint64
	unacked int // bytes of the responses awaiting their answers
	slow    bool
	err     error // a send's error: the stream is done
}

// RankOf orders a flush's responses (rule 8): 0 to 3 for Clusters,
// ClusterLoadAssignments, Listeners and RouteConfigurations (Ranked of
// them), Ranked for any other type.
func RankOf(typeURL string) int {
	switch typeURL {
	case resourcev3.ClusterType:
		return 0
	case resourcev3.EndpointType:
		return 1
	case resourcev3.ListenerType:
		return 2
	case resourcev3.RouteType:
		return 3
	}
	return Ranked
}

// Ranked is the number of types RankOf orders apart.
const Ranked = 4

// Wake tells the watches' streams that their Source changed: a watch
// awaiting an answer becomes dirty, another is flushed by a worker. The
// streams go to the workers in batches of wakeBatch, so a push to many
// streams costs a channel operation per batch. Call it without holding a
// lock the server might take (a Source's own lock is fine only if Respond
// does not take it: it is not).
func Wake(ws []*Watch) {
	var b wakeBatchOf
	for _, w := range ws {
		st := w.st
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			continue
		}
		if w.awaiting {
			w.dirty = true
			st.mu.Unlock()
			continue
		}
		st.addPending(w)
		enqueue := !st.queued
		st.queued = true
		st.mu.Unlock()
		if enqueue {
			b.add(st)
		}
	}
	b.send()
}

// wakeBatch is the size of the batches of streams Wake hands the workers.
const wakeBatch = 64

// wakeBatchOf collects the streams of one server to hand its workers.
type wakeBatchOf struct {
	s   *Server
	sts []*adsStream
}

func (b *wakeBatchOf) add(st *adsStream) {
	if b.s != st.s {
		b.send()
		b.s = st.s
	}
	if b.sts == nil {
		b.sts = make([]*adsStream, 0, wakeBatch)
	}
	b.sts = append(b.sts, st)
	if len(b.sts) == wakeBatch {
		b.send()
	}
}

// send hands the batch to the workers.
func (b *wakeBatchOf) send() {
	if len(b.sts) == 0 {
		return
	}
	select {
	case b.s.queue <- b.sts:
	case <-b.s.ctx.Done():
	}
	b.sts = nil
}

// addPending puts w in the flush list in rank order. Call with st.mu held.
func (st *adsStream) addPending(w *Watch) {
	if w.pending {
		return
	}
	w.pending = true
	i := len(st.pending)
	st.pending = append(st.pending, w)
	for i > 0 && st.pending[i-1].rank > w.rank {
		st.pending[i] = st.pending[i-1]
		i--
	}
	st.pending[i] = w
}

// work flushes queued streams until the server's context ends.
func (s *Server) work() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case batch := <-s.queue:
			s.flushing.Add(1)
			now := time.Now()
			for _, st := range batch {
				s.flushQueued(st, now)
			}
			s.flushing.Done()
		}
	}
}

// flushQueued flushes a stream a worker took from the queue, or moves it
// to the slow path (rule 9).
func (s *Server) flushQueued(st *adsStream, now time.Time) {
	st.mu.Lock()
	st.queued = false
	slow := st.slow || st.unacked >= s.opts.SlowBytes
	st.mu.Unlock()
	if slow || !st.sendMu.TryLock() {
		st.flushSlow()
		return
	}
	st.flushLocked(now)
	st.sendMu.Unlock()
}

// flushSlow flushes st from a goroutine of its own (rule 9): one at a
// time per stream, the next wake finding st.slow set.
func (st *adsStream) flushSlow() {
	st.mu.Lock()
	if st.slow {
		st.mu.Unlock()
		return // the running slow flush sees the pending watches
	}
	st.slow = true
	st.mu.Unlock()
	st.s.flushing.Add(1)
	go func() {
		defer st.s.flushing.Done()
		for {
			st.sendMu.Lock()
			st.flushLocked(time.Now())
			st.sendMu.Unlock()
			st.mu.Lock()
			if len(st.pending) == 0 || st.closed || st.err != nil {
				st.slow = false
				st.mu.Unlock()
				return
			}
			st.mu.Unlock()
		}
	}()
}

// flushLocked sends each pending watch its response, in rank order; now
// is when the flush began (StreamHooks.Response). Call with st.sendMu
// held, not st.mu.
func (st *adsStream) flushLocked(now time.Time) {
	for {
		st.mu.Lock()
		if st.closed || st.err != nil || len(st.pending) == 0 {
			st.mu.Unlock()
			return
		}
		w := st.pending[0]
		st.removePending(w)
		if w.awaiting {
			w.dirty = true
			st.mu.Unlock()
			continue
		}
		w.dirty = false
		force := w.force
		w.force = false
		resp, version := w.source.Respond(w, force)
		if resp == nil {
			st.mu.Unlock()
			continue
		}
		msg := st.prepare(w, resp, version)
		st.mu.Unlock()
		st.sendMsg(msg, now)
	}
}

// prepare numbers resp for w and records it as awaiting. Call with st.mu
// held.
func (st *adsStream) prepare(w *Watch, resp *wire.Response, version string) sending {
	st.nonce++
	msg := numbered(resp, st.nonce)
	nonce := msg.Nonce()
	size := resp.Size(nonce)
	w.awaiting, w.nonce, w.size = true, nonce, size
	st.unacked += size
	return sending{msg: msg, typeURL: w.TypeURL, nonce: nonce, version: version, size: size}
}

// sending is a response on its way out.
type sending struct {
	msg                     *Message
	typeURL, nonce, version string
	size                    int
}

// sendMsg sends m. Call with st.sendMu held, not st.mu. A failed send
// ends the stream's sends; its handler returns when Recv fails.
func (st *adsStream) sendMsg(m sending, now time.Time) {
	if h := st.hooks; h != nil {
		h.Response(m.typeURL, m.nonce, m.version, m.size, now)
	}
	if err := st.gs.SendMsg(m.msg); err != nil {
		st.mu.Lock()
		if st.err == nil {
			st.err = err
		}
		st.mu.Unlock()
	}
}

// StreamAggregatedResources serves a SotW ADS stream.
func (s *Server) StreamAggregatedResources(gs discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	req, err := gs.Recv()
	if err != nil {
		return nil
	}
	if s.opts.HandOff != nil {
		if _, err := s.opts.Route(req.GetTypeUrl(), req.GetNode(), false); errors.Is(err, ErrHandOff) {
			return s.opts.HandOff.StreamAggregatedResources(&replayed{
				AggregatedDiscoveryService_StreamAggregatedResourcesServer: gs, first: req})
		}
	}
	st := s.open(gs, false)
	defer st.close()
	if err := st.sotw(req); err != nil {
		return err
	}
	// The later requests are read into one message, reset by each read:
	// what a request hands on (names, Node, error detail) is its own, not
	// the message's, so a read never changes what the last one gave.
	req = new(discovery.DiscoveryRequest)
	for {
		if err := gs.RecvMsg(req); err != nil {
			return nil
		}
		if err := st.sotw(req); err != nil {
			return err
		}
	}
}

// DeltaAggregatedResources serves a Delta ADS stream.
func (s *Server) DeltaAggregatedResources(gs discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	st := s.open(gs, true)
	defer st.close()
	req := new(discovery.DeltaDiscoveryRequest) // read as SotW's are
	for {
		if err := gs.RecvMsg(req); err != nil {
			return nil
		}
		if err := st.deltaRequest(req); err != nil {
			return err
		}
	}
}

func (s *Server) open(gs grpc.ServerStream, delta bool) *adsStream {
	ids := &s.ids
	if delta {
		ids = &s.deltaIDs
	}
	st := &adsStream{s: s, id: ids.Add(1), delta: delta, gs: gs}
	if h := s.opts.Hooks; h != nil {
		st.hooks = h.Opened(gs.Context(), st.id, delta)
	}
	return st
}

// close ends st: no more sends, its watches leave their Sources. Once.
func (st *adsStream) close() {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return
	}
	st.closed = true
	for _, w := range st.ranked {
		if w != nil {
			w.source.Unwatch(w)
		}
	}
	for _, w := range st.watches {
		w.source.Unwatch(w)
	}
	st.mu.Unlock()
	if h := st.hooks; h != nil {
		h.Closed()
	}
}

// watch returns the stream's watch of typeURL, nil when it has none.
// Call with st.mu held.
func (st *adsStream) watch(typeURL string) *Watch {
	if r := RankOf(typeURL); r < len(st.ranked) {
		return st.ranked[r]
	}
	return st.watches[typeURL]
}

// newWatch routes typeURL and returns a new watch of it, not yet watching
// its Source. Call with st.mu held.
func (st *adsStream) newWatch(typeURL string, sub stream.Subscription) (*Watch, error) {
	source, err := st.s.opts.Route(typeURL, st.node, st.delta)
	switch {
	case errors.Is(err, ErrHandOff) && st.delta:
		return nil, grpcstatus.Errorf(codes.Unimplemented, "type %q is not served over Delta ADS", typeURL)
	case errors.Is(err, ErrHandOff):
		return nil, grpcstatus.Errorf(codes.FailedPrecondition,
			"type %q is served on a stream of its own: its first request must ask for it", typeURL)
	case err != nil:
		return nil, err
	}
	w := &Watch{TypeURL: typeURL, Delta: st.delta, Node: st.node, Sub: sub, st: st, source: source, rank: RankOf(typeURL)}
	if w.rank < len(st.ranked) {
		st.ranked[w.rank] = w
		return w, nil
	}
	if st.watches == nil {
		st.watches = make(map[string]*Watch)
	}
	st.watches[typeURL] = w
	return w, nil
}

// legacy reports whether typeURL's empty first request is a wildcard.
func (s *Server) legacy(typeURL string) bool {
	return s.opts.LegacyWildcard == nil || s.opts.LegacyWildcard(typeURL)
}

// nodeOf records n as the stream's Node if it has none yet and returns
// the stream's Node (rule 2). Only the handler goroutine reads and writes
// st.node (the watches carry their own copy), so it takes no lock.
func (st *adsStream) nodeOf(n *core.Node) *core.Node {
	if st.node == nil && n != nil {
		st.node = n
	}
	return st.node
}

// sotw applies a SotW request (rules 2–6) and flushes what it asks for.
func (st *adsStream) sotw(req *discovery.DiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	node := st.nodeOf(req.GetNode())
	if h := st.hooks; h != nil {
		h.Request(node, Request{TypeURL: typeURL, Nonce: req.GetResponseNonce(),
			ErrorDetail: req.GetErrorDetail(), Names: req.GetResourceNames()})
	}
	if typeURL == "" {
		return grpcstatus.Errorf(codes.InvalidArgument, "type URL is required for ADS")
	}
	names := req.GetResourceNames()
	// No response is built and unsent while a request changes what the
	// stream subscribes to (rule 13).
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	w := st.watch(typeURL)
	flush := false
	switch {
	case w == nil:
		var err error
		if w, err = st.newWatch(typeURL, stream.NewSotwSubscription(names, st.s.legacy(typeURL))); err != nil {
			st.mu.Unlock()
			return err
		}
		w.names = names
		w.source.Watch(w)
		flush = true
	case w.awaiting && req.GetResponseNonce() != w.nonce:
		st.mu.Unlock() // stale (rule 5)
		return nil
	default:
		st.answered(w)
		if !equalNames(w.names, names) {
			w.source.Unwatch(w)
			w.Sub.SetResourceSubscription(names)
			w.names = names
			w.source.Watch(w)
			flush = true
		}
		flush = flush || w.dirty
	}
	force := req.GetVersionInfo() == "" && req.GetErrorDetail() == nil
	return st.finishRequest(w, flush, force)
}

// deltaRequest applies a Delta request (rules 2–7) and flushes what it
// asks for.
func (st *adsStream) deltaRequest(req *discovery.DeltaDiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	node := st.nodeOf(req.GetNode())
	if h := st.hooks; h != nil {
		h.Request(node, Request{TypeURL: typeURL, Nonce: req.GetResponseNonce(),
			ErrorDetail: req.GetErrorDetail(), Subscribe: req.GetResourceNamesSubscribe(),
			Unsubscribe: req.GetResourceNamesUnsubscribe()})
	}
	if typeURL == "" {
		return grpcstatus.Errorf(codes.InvalidArgument, "type URL is required for ADS")
	}
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	w := st.watch(typeURL)
	flush := false
	if w == nil {
		var err error
		sub := stream.NewDeltaSubscription(subscribe, unsubscribe, req.GetInitialResourceVersions(), st.s.legacy(typeURL))
		if w, err = st.newWatch(typeURL, sub); err != nil {
			st.mu.Unlock()
			return err
		}
		w.source.Watch(w)
		flush = true
	} else {
		st.answered(w)
		if len(subscribe)+len(unsubscribe) > 0 {
			w.source.Unwatch(w)
			w.Sub.UpdateResourceSubscriptions(subscribe, unsubscribe)
			w.source.Watch(w)
			flush = true
		}
		flush = flush || w.dirty
	}
	force := w.Sub.IsWildcard() && req.GetResponseNonce() == ""
	return st.finishRequest(w, flush, force)
}

// answered settles w's awaiting response. Call with st.mu held.
func (st *adsStream) answered(w *Watch) {
	if w.awaiting {
		w.awaiting = false
		st.unacked -= w.size
	}
}

// finishRequest flushes w when asked (force: even with nothing to send,
// rules 6 and 7), from the handler's goroutine. Called with st.sendMu and
// st.mu held; releases st.mu.
func (st *adsStream) finishRequest(w *Watch, flush, force bool) error {
	if !flush && !force {
		st.mu.Unlock()
		return nil
	}
	w.force = w.force || force
	st.addPending(w)
	st.mu.Unlock()
	st.flushLocked(time.Now())
	return st.sendErr()
}

// removePending takes w out of the flush list. Call with st.mu held.
func (st *adsStream) removePending(w *Watch) {
	for i, p := range st.pending {
		if p == w {
			st.pending = append(st.pending[:i], st.pending[i+1:]...)
			break
		}
	}
	w.pending = false
}

// sendErr returns the error that ended the stream's sends, as the handler
// returns it.
func (st *adsStream) sendErr() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return grpcstatus.Errorf(codes.Unavailable, "send: %v", st.err)
	}
	return nil
}

// equalNames reports whether a and b list the same names in the same
// order (a SotW ACK repeats its request's list).
func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// replayed is a SotW stream whose first request was already read: Recv
// returns it first.
type replayed struct {
	discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	first *discovery.DiscoveryRequest
}

func (r *replayed) Recv() (*discovery.DiscoveryRequest, error) {
	if f := r.first; f != nil {
		r.first = nil
		return f, nil
	}
	return r.AggregatedDiscoveryService_StreamAggregatedResourcesServer.Recv()
}

// RecvMsg keeps Recv's order for a caller that reads through it.
func (r *replayed) RecvMsg(m any) error {
	if f := r.first; f != nil {
		r.first = nil
		if req, ok := m.(*discovery.DiscoveryRequest); ok {
			req.Reset()
			proto.Merge(req, f)
			return nil
		}
	}
	return r.AggregatedDiscoveryService_StreamAggregatedResourcesServer.RecvMsg(m)
}

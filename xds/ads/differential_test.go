package ads_test

// The differential test: random request sequences against meshbridge's
// ADS server (A) and go-control-plane's (B, the oracle), over the same
// caches, must be answered the same, modulo nonce.
//
// Each seed builds three cache.Resources (CDS: full state, legacy
// wildcard; EDS: changes only, no legacy wildcard; LDS: full state, no
// legacy wildcard), serves them with both servers as package xds does
// (A: ads.Server with a Route by type; B: serverv3.NewServer over a
// MuxCache behind nackGuard's rule, with legacy wildcard off for EDS, LDS
// and RDS and ordered ADS) and drives pairs of client streams ("twins",
// one on each server, SotW or Delta, several per connection) in
// lockstep: each step is one cache update (both servers see it: the
// caches are shared) or one operation applied to both streams of a twin
// (subscribe, unsubscribe, ACK, NACK, stale nonce, empty version or
// nonce, nothing, reconnect, an unserved type). Each stream answers from
// its own state (its own nonces and versions).
//
// After each step, every stream the step may have made the server answer
// is sent a probe: a request of a type of its own that both servers
// answer at once (probeSource, probeCache) and after every response the
// step caused (A: a stream's requests are handled in order and a request
// flushes what is pending; B: a request drains the stream's response
// channel first, and the channel is FIFO). What a stream received before
// the probe's response is the step's output, compared per type between
// the twins: same count, each response equal once its nonce is cleared
// and its resources (and Delta removed_resources) sorted; a stream that
// ended must end the same (code and message) on both.
//
// Not generated, as the oracle is not deterministic there: two requests
// of one type without a probe between them (go-control-plane's SotW loop
// drops a pending response of the request's type, processAllExcept, or
// sends it first, as its select picks), and an update concurrent with a
// request. A reconnect sends one request per type at once.
//
// Flags: -ads.seeds (default 300), -ads.seed (run one seed), -ads.steps
// (default 100), -ads.trace (log every seed's steps). The operations a
// seed draws do not depend on what the servers answer, so a seed and a
// step count replay a run. A failure prints the seed, the steps so far
// (operations and what each A stream received) and both sides' responses
// of the failing step.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/xds/ads"
	"github.com/meshbridge/meshbridge/xds/cache"
)

var (
	diffSeeds = flag.Int("ads.seeds", 300, "differential test: how many seeds to run")
	diffSeed  = flag.Int("ads.seed", 0, "differential test: run only this seed")
	diffSteps = flag.Int("ads.steps", 100, "differential test: steps per seed")
	diffTrace = flag.Bool("ads.trace", false, "differential test: log every seed's steps")
)

const (
	typeCDS     = resourcev3.ClusterType
	typeEDS     = resourcev3.EndpointType
	typeLDS     = resourcev3.ListenerType
	typeProbe   = "type.googleapis.com/google.protobuf.Empty"
	typeInvalid = "type.googleapis.com/meshbridge.test.Unserved"

	probeVersion = "probe"
	// nackedFirstVersion is package xds's nackGuard stand-in.
	nackedFirstVersion = "nacked"
	// answerTimeout bounds the wait for a probe's answer: generous, as it
	// is only reached when a server is stuck.
	answerTimeout = 20 * time.Second
)

// diffTypes are the served types; legacyWildcardOff as package xds's.
var (
	diffTypes         = []string{typeCDS, typeEDS, typeLDS}
	legacyWildcardOff = []string{resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}
	namePool          = []string{"a", "b", "c", "d", "e"}
)

func shortType(t string) string {
	switch t {
	case typeCDS:
		return "CDS"
	case typeEDS:
		return "EDS"
	case typeLDS:
		return "LDS"
	case typeProbe:
		return "probe"
	case typeInvalid:
		return "unserved"
	case "":
		return `""`
	}
	return t
}

// errUnserved is both servers' answer to an unserved type.
func errUnserved(typeURL string) error {
	return status.Errorf(codes.InvalidArgument, "type %q is not served", typeURL)
}

// probeSource answers every probe request (A).
type probeSource struct{}

func (probeSource) Watch(*ads.Watch)   {}
func (probeSource) Unwatch(*ads.Watch) {}
func (probeSource) Respond(w *ads.Watch, _ bool) (*wire.Response, string) {
	if w.Delta {
		return wire.DeltaResponse(probeVersion, typeProbe, nil, nil), probeVersion
	}
	return wire.SotWResponse(probeVersion, typeProbe, nil), probeVersion
}

// probeCache answers every probe request (B). Its response must go into
// the stream's channel at once (FIFO after what is pending); overflow
// counts the times it could not.
type probeCache struct{ overflow *atomic.Int64 }

func (p probeCache) CreateWatch(req *cachev3.Request, _ cachev3.Subscription, out chan cachev3.Response) (func(), error) {
	resp := &cachev3.PassthroughResponse{Request: req, ReturnedResources: map[string]string{},
		DiscoveryResponse: &discovery.DiscoveryResponse{VersionInfo: probeVersion, TypeUrl: typeProbe}}
	select {
	case out <- resp:
	default:
		p.overflow.Add(1)
		go func() { out <- resp }()
	}
	return func() {}, nil
}

func (p probeCache) CreateDeltaWatch(req *cachev3.DeltaRequest, _ cachev3.Subscription, out chan cachev3.DeltaResponse) (func(), error) {
	resp := &cachev3.DeltaPassthroughResponse{DeltaRequest: req, NextVersionMap: map[string]string{},
		DeltaDiscoveryResponse: &discovery.DeltaDiscoveryResponse{SystemVersionInfo: probeVersion, TypeUrl: typeProbe}}
	select {
	case out <- resp:
	default:
		p.overflow.Add(1)
		go func() { out <- resp }()
	}
	return func() {}, nil
}

func (probeCache) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("no fetch")
}

// unservedCache refuses every request (B), as Route does (A).
type unservedCache struct{}

func (unservedCache) CreateWatch(req *cachev3.Request, _ cachev3.Subscription, _ chan cachev3.Response) (func(), error) {
	return nil, errUnserved(req.GetTypeUrl())
}

func (unservedCache) CreateDeltaWatch(req *cachev3.DeltaRequest, _ cachev3.Subscription, _ chan cachev3.DeltaResponse) (func(), error) {
	return nil, errUnserved(req.GetTypeUrl())
}

func (unservedCache) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("no fetch")
}

// nackGuard is package xds's (xds/nack.go): a SotW NACK with an empty
// version_info gets a non-empty one before it reaches the cache.
type nackGuard struct{ cachev3.Cache }

func (g nackGuard) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, out chan cachev3.Response) (func(), error) {
	if req.GetErrorDetail() != nil && req.GetVersionInfo() == "" {
		req = proto.Clone(req).(*discovery.DiscoveryRequest)
		req.VersionInfo = nackedFirstVersion
	}
	return g.Cache.CreateWatch(req, sub, out)
}

// diffStats count what the test exercised, over every seed.
type diffStats struct {
	seeds, steps, updates, requests, probes, responses, streams, ends atomic.Int64
}

func TestDifferential(t *testing.T) {
	start := time.Now()
	var st diffStats
	first, last := 1, *diffSeeds
	if *diffSeed != 0 {
		first, last = *diffSeed, *diffSeed
	}
	failed := 0
	for seed := first; seed <= last; seed++ {
		if failed >= 3 {
			t.Errorf("stopped after %d failing seeds (seed %d of %d)", failed, seed, last)
			break
		}
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runDifferential(t, uint64(seed), *diffSteps, &st) }) {
			failed++
		}
	}
	// Each request, probe and stream is one on each server.
	t.Logf("differential: %d seeds, %d steps (%d cache updates), %d requests to each server (+%d probes), "+
		"%d responses compared (A's with B's), %d streams opened on each server, %d stream ends, %v",
		st.seeds.Load(), st.steps.Load(), st.updates.Load(), st.requests.Load()/2, st.probes.Load()/2,
		st.responses.Load(), st.streams.Load()/2, st.ends.Load()/2, time.Since(start).Round(time.Millisecond))
}

// world is one seed's servers, caches and client streams.
type world struct {
	t      *testing.T
	seed   uint64
	r      *rand.Rand
	ctx    context.Context
	stats  *diffStats
	caches map[string]*cache.Resources
	conns  [2][]*grpc.ClientConn
	twins  []*twin
	log    []string
	// overflow counts probeCache's late answers.
	overflow atomic.Int64
}

// twin is a client stream on each server, driven in lockstep.
type twin struct {
	id    int
	delta bool
	conn  int
	node  *core.Node
	sides [2]*side
}

// side is one client stream and what its client holds.
type side struct {
	label  string // "A" or "B"
	w      *world
	tw     *twin
	sotw   discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	deltaS discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	cancel context.CancelFunc
	events chan event
	done   chan struct{}
	// dead: the stream ended (its end event was read).
	dead     bool
	sentNode bool
	// probeNonce is the nonce of the last probe answer (SotW); probed: a
	// probe was sent on this stream.
	probeNonce string
	probed     bool
	nonces     map[string]bool // every nonce received on the stream
	types      map[string]*typeState
}

// typeState is a client's state of one type on one stream.
type typeState struct {
	requested bool
	// history are the nonces of the type's responses on the stream.
	history   []string
	lastNonce string
	// SotW
	names                     []string
	lastVersion, ackedVersion string
	// Delta
	subs   map[string]bool // subscribed names, "*" included
	legacy bool            // still in legacy wildcard (no name sent yet)
	held   map[string]string
}

// event is a response, or the stream's end (err; io.EOF for status OK).
type event struct {
	sotw  *discovery.DiscoveryResponse
	delta *discovery.DeltaDiscoveryResponse
	err   error
}

func (e event) typeURL() string {
	switch {
	case e.sotw != nil:
		return e.sotw.GetTypeUrl()
	case e.delta != nil:
		return e.delta.GetTypeUrl()
	}
	return ""
}

func (e event) nonce() string {
	if e.sotw != nil {
		return e.sotw.GetNonce()
	}
	return e.delta.GetNonce()
}

func runDifferential(t *testing.T, seed uint64, steps int, stats *diffStats) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := rand.New(rand.NewPCG(seed, 0x6d657368))
	w := &world{t: t, seed: seed, r: r, ctx: ctx, stats: stats,
		caches: map[string]*cache.Resources{},
	}
	for _, typ := range diffTypes {
		w.caches[typ] = cache.NewResources(typ)
	}

	// A: meshbridge's server, routed as package xds routes.
	route := func(typeURL string, _ *core.Node, _ bool) (ads.Source, error) {
		if c, ok := w.caches[typeURL]; ok {
			return c, nil
		}
		if typeURL == typeProbe {
			return probeSource{}, nil
		}
		return nil, errUnserved(typeURL)
	}
	optsA := ads.Options{
		Route:          route,
		LegacyWildcard: func(typeURL string) bool { return !slices.Contains(legacyWildcardOff, typeURL) },
		Workers:        1 + r.IntN(3),
		SlowBytes:      []int{0, 0, 1, 300}[r.IntN(4)],
	}
	srvCtx, stopServers := context.WithCancel(ctx)
	srvA := ads.NewServer(srvCtx, optsA)
	gsA := grpc.NewServer(srvA.ServerOptions()...)
	discovery.RegisterAggregatedDiscoveryServiceServer(gsA, srvA)

	// B: go-control-plane's, as package xds builds it for MCP.
	muxCaches := map[string]cachev3.Cache{typeProbe: probeCache{&w.overflow}, "unserved": unservedCache{}}
	for typ, c := range w.caches {
		muxCaches[typ] = c
	}
	classify := func(typeURL string) string {
		if _, ok := muxCaches[typeURL]; ok {
			return typeURL
		}
		return "unserved"
	}
	mux := nackGuard{&cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return classify(r.GetTypeUrl()) },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return classify(r.GetTypeUrl()) },
		Caches:        muxCaches,
	}}
	srvB := serverv3.NewServer(srvCtx, mux, nil,
		sotw.DeactivateLegacyWildcardForTypes(legacyWildcardOff), sotw.WithOrderedADS())
	gsB := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(gsB, srvB)

	var addrs [2]string
	for i, gs := range []*grpc.Server{gsA, gsB} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = lis.Addr().String()
		go gs.Serve(lis)
	}
	defer func() {
		for _, tw := range w.twins {
			for _, s := range tw.sides {
				s.close()
			}
		}
		for _, cs := range w.conns {
			for _, c := range cs {
				c.Close()
			}
		}
		stopServers()
		gsA.Stop()
		gsB.Stop()
		srvA.Close()
	}()

	nConns := 1 + r.IntN(3)
	for i := range 2 {
		for range nConns {
			c, err := grpc.NewClient(addrs[i], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			w.conns[i] = append(w.conns[i], c)
		}
	}
	nTwins := 2 + r.IntN(4)
	for i := range nTwins {
		tw := &twin{id: i, delta: r.IntN(2) == 0, conn: r.IntN(nConns),
			node: &core.Node{Id: fmt.Sprintf("node-%d", i), Cluster: "diff"}}
		for j, label := range []string{"A", "B"} {
			tw.sides[j] = &side{label: label, w: w, tw: tw}
			if err := tw.sides[j].open(); err != nil {
				t.Fatalf("seed %d: open %s stream of twin %d: %v", seed, label, i, err)
			}
		}
		w.twins = append(w.twins, tw)
	}
	w.logf("seed %d: A workers=%d slowBytes=%d; %d connections per server; twins %s",
		seed, optsA.Workers, optsA.SlowBytes, nConns, w.describeTwins())

	for step := 1; step <= steps; step++ {
		stats.steps.Add(1)
		affected := w.step(step)
		w.settle(step, affected)
	}
	w.settle(steps+1, w.twins) // nothing may be left over
	if *diffTrace {
		t.Log(strings.Join(w.log, "\n"))
	}
	if n := w.overflow.Load(); n > 0 {
		t.Fatalf("seed %d: probeCache's answer did not fit a stream's response channel %d times: the barrier may not hold", seed, n)
	}
	stats.seeds.Add(1)
}

func (w *world) describeTwins() string {
	var b strings.Builder
	for _, tw := range w.twins {
		kind := "sotw"
		if tw.delta {
			kind = "delta"
		}
		fmt.Fprintf(&b, " %d:%s@conn%d", tw.id, kind, tw.conn)
	}
	return b.String()
}

func (w *world) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

// open opens s's stream (again, after close) with a fresh client state
// for its nonces; the names and versions a client holds are kept.
func (s *side) open() error {
	i := 0
	if s.label == "B" {
		i = 1
	}
	conn := s.w.conns[i][s.tw.conn]
	client := discovery.NewAggregatedDiscoveryServiceClient(conn)
	ctx, cancel := context.WithCancel(s.w.ctx)
	s.cancel = cancel
	s.events = make(chan event, 256)
	s.done = make(chan struct{})
	s.dead, s.sentNode, s.probeNonce, s.probed = false, false, "", false
	s.nonces = map[string]bool{}
	if s.types == nil {
		s.types = map[string]*typeState{}
	}
	for _, ts := range s.types {
		ts.history, ts.lastNonce = nil, ""
	}
	s.w.stats.streams.Add(1)
	events, done := s.events, s.done
	if s.tw.delta {
		ds, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			return err
		}
		s.deltaS, s.sotw = ds, nil
		go pump(ds.Recv, func(m *discovery.DeltaDiscoveryResponse, err error) event { return event{delta: m, err: err} },
			events, done)
		return nil
	}
	ss, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	s.sotw, s.deltaS = ss, nil
	go pump(ss.Recv, func(m *discovery.DiscoveryResponse, err error) event { return event{sotw: m, err: err} },
		events, done)
	return nil
}

// pump hands every response recv returns, and its final error, to events
// as wrap makes them, until the error or done.
func pump[M any](recv func() (M, error), wrap func(M, error) event, events chan<- event, done <-chan struct{}) {
	for {
		m, err := recv()
		select {
		case events <- wrap(m, err):
		case <-done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *side) close() {
	if s.cancel != nil {
		s.cancel()
		close(s.done)
		s.cancel = nil
	}
}

func (s *side) state(typ string) *typeState {
	ts := s.types[typ]
	if ts == nil {
		ts = &typeState{subs: map[string]bool{}, held: map[string]string{}}
		s.types[typ] = ts
	}
	return ts
}

// sendSotW sends req (with the node on the stream's first request). A
// send error is ignored: the stream's end shows on its events.
func (s *side) sendSotW(req *discovery.DiscoveryRequest, probe bool) {
	if !s.sentNode {
		req.Node, s.sentNode = s.tw.node, true
	}
	s.count(probe)
	_ = s.sotw.Send(req)
}

func (s *side) sendDelta(req *discovery.DeltaDiscoveryRequest, probe bool) {
	if !s.sentNode {
		req.Node, s.sentNode = s.tw.node, true
	}
	s.count(probe)
	_ = s.deltaS.Send(req)
}

func (s *side) count(probe bool) {
	if probe {
		s.w.stats.probes.Add(1)
	} else {
		s.w.stats.requests.Add(1)
	}
}

// randomNames returns up to max names of the pool in random order, now
// and then with "*" or a repeated name.
func (w *world) randomNames(max int, star bool) []string {
	n := w.r.IntN(max + 1)
	names := slices.Clone(namePool)
	w.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	names = names[:n]
	if star && w.r.IntN(5) == 0 {
		names = append(names, "*")
	}
	if len(names) > 0 && w.r.IntN(12) == 0 {
		names = append(names, names[0])
	}
	w.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	return names
}

// Operations on a twin.
const (
	opSubscribe = iota
	opACK
	opNACK
	opStale
	opReset // SotW: an empty version_info; Delta: no nonce
	opNothing
	opReconnect
	opUnserved
	opNoType
)

var opNames = []string{"subscribe", "ACK", "NACK", "stale", "reset", "nothing", "reconnect", "unserved type", "no type"}

// pickOp draws a twin operation.
func (w *world) pickOp() int {
	switch x := w.r.IntN(200); {
	case x < 60:
		return opSubscribe
	case x < 115:
		return opACK
	case x < 135:
		return opNACK
	case x < 157:
		return opStale
	case x < 167:
		return opReset
	case x < 180:
		return opNothing
	case x < 196:
		return opReconnect
	case x < 199:
		return opUnserved
	}
	return opNoType
}

// step runs one random step and returns the twins it may have made a
// server answer.
func (w *world) step(step int) []*twin {
	if w.r.IntN(100) < 25 {
		w.update(step)
		return w.twins
	}
	tw := w.twins[w.r.IntN(len(w.twins))]
	op := w.pickOp()
	if tw.sides[0].dead || tw.sides[1].dead {
		op = opReconnect
	}
	typ := diffTypes[w.r.IntN(len(diffTypes))]
	if tw.delta {
		w.deltaOp(step, tw, op, typ)
	} else {
		w.sotwOp(step, tw, op, typ)
	}
	return []*twin{tw}
}

// update changes one cache or more (the same change for both servers:
// the caches are shared).
func (w *world) update(step int) {
	typs := []string{diffTypes[w.r.IntN(len(diffTypes))]}
	if w.r.IntN(5) == 0 {
		// Several caches, in random order: B sends in the order of the
		// updates, A may put CDS before EDS before LDS (rule 8); both are
		// compared per type.
		typs = slices.Clone(diffTypes)
		w.r.Shuffle(len(typs), func(i, j int) { typs[i], typs[j] = typs[j], typs[i] })
	}
	var desc []string
	for _, typ := range typs {
		set := map[string]types.Resource{}
		var setDesc []string
		names := w.randomNames(3, false)
		for _, name := range names {
			if _, dup := set[name]; dup {
				continue
			}
			v := w.r.IntN(3)
			set[name] = resourceOf(typ, name, v)
			setDesc = append(setDesc, fmt.Sprintf("%s:v%d", name, v))
		}
		var remove []string
		for _, name := range w.randomNames(2, false) {
			if _, ok := set[name]; !ok && !slices.Contains(remove, name) {
				remove = append(remove, name)
			}
		}
		slices.Sort(setDesc)
		desc = append(desc, fmt.Sprintf("%s set%v remove%v", shortType(typ), setDesc, remove))
		if err := w.caches[typ].Update(set, remove); err != nil {
			w.t.Fatalf("seed %d: update: %v", w.seed, err)
		}
	}
	w.stats.updates.Add(1)
	w.logf("step %d: update %s", step, strings.Join(desc, "; "))
}

// resourceOf returns a small real resource of typ named name, in one of
// a few variants (equal variants encode equally).
func resourceOf(typ, name string, v int) types.Resource {
	switch typ {
	case typeCDS:
		return &clusterv3.Cluster{Name: name, AltStatName: fmt.Sprintf("v%d", v)}
	case typeEDS:
		return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Address: fmt.Sprintf("10.0.0.%d", v+1), PortSpecifier: &core.SocketAddress_PortValue{PortValue: 8080}}}},
			}}}},
		}}}
	case typeLDS:
		return &listenerv3.Listener{Name: name, StatPrefix: fmt.Sprintf("v%d", v)}
	}
	panic(typ)
}

var nackDetail = &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: "rejected by the differential test"}

// staleNonce returns a nonce the server does not await for ts: an
// earlier one of the type (index pick), a bogus one or none.
func staleNonce(ts *typeState, kind, pick int) string {
	switch {
	case kind == 0 && len(ts.history) >= 2:
		return ts.history[pick%(len(ts.history)-1)]
	case kind == 1:
		return ""
	}
	return "stale-nonce"
}

// sotwOp applies op to both streams of a SotW twin.
func (w *world) sotwOp(step int, tw *twin, op int, typ string) {
	desc := fmt.Sprintf("step %d: twin %d (sotw) %s", step, tw.id, opNames[op])
	var reqA *discovery.DiscoveryRequest
	record := func(s *side, req *discovery.DiscoveryRequest) {
		if s.label == "A" {
			reqA = req
		}
	}
	switch op {
	case opSubscribe, opACK, opNACK, opStale, opReset:
		var names []string
		if op == opSubscribe || (op == opStale && w.r.IntN(2) == 0) {
			names = w.randomNames(4, true)
		}
		kind, pick := w.r.IntN(3), w.r.IntN(1000)
		for _, s := range tw.sides {
			ts := s.state(typ)
			if names != nil {
				ts.names = names
			}
			req := &discovery.DiscoveryRequest{TypeUrl: typ, ResourceNames: slices.Clone(ts.names),
				VersionInfo: ts.ackedVersion, ResponseNonce: ts.lastNonce}
			switch op {
			case opACK:
				ts.ackedVersion = ts.lastVersion
				req.VersionInfo = ts.lastVersion
			case opNACK:
				req.ErrorDetail = nackDetail
			case opStale:
				req.ResponseNonce = staleNonce(ts, kind, pick)
			case opReset:
				req.VersionInfo = ""
			}
			ts.requested = true
			record(s, req)
			s.sendSotW(req, false)
		}
	case opNothing:
	case opReconnect:
		order := slices.Clone(diffTypes)
		w.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		noVersion := w.r.IntN(3) == 0
		var sent []string
		for _, s := range tw.sides {
			s.close()
			if err := s.open(); err != nil {
				w.t.Fatalf("seed %d: reopen: %v", w.seed, err)
			}
			sent = sent[:0]
			for _, t := range order {
				ts := s.types[t]
				if ts == nil || !ts.requested {
					continue
				}
				req := &discovery.DiscoveryRequest{TypeUrl: t, ResourceNames: slices.Clone(ts.names), VersionInfo: ts.ackedVersion}
				if noVersion {
					req.VersionInfo = ""
				}
				sent = append(sent, fmt.Sprintf("%s%v@%q", shortType(t), ts.names, req.VersionInfo))
				s.sendSotW(req, false)
			}
		}
		desc += fmt.Sprintf(" %v", sent)
	case opUnserved, opNoType:
		t := typeInvalid
		if op == opNoType {
			t = ""
		}
		for _, s := range tw.sides {
			req := &discovery.DiscoveryRequest{TypeUrl: t, ResourceNames: []string{"x"}}
			record(s, req)
			s.sendSotW(req, false)
		}
	}
	if reqA != nil {
		desc += fmt.Sprintf(" %s names=%v version=%q nonce(A)=%q nack=%v", shortType(reqA.TypeUrl), reqA.ResourceNames,
			reqA.VersionInfo, reqA.ResponseNonce, reqA.ErrorDetail != nil)
	}
	w.log = append(w.log, desc)
}

// deltaOp applies op to both streams of a Delta twin.
func (w *world) deltaOp(step int, tw *twin, op int, typ string) {
	desc := fmt.Sprintf("step %d: twin %d (delta) %s", step, tw.id, opNames[op])
	var reqA *discovery.DeltaDiscoveryRequest
	switch op {
	case opSubscribe, opACK, opNACK, opStale, opReset:
		var sub, unsub []string
		if op == opSubscribe || (op == opStale && w.r.IntN(3) == 0) {
			sub = w.randomNames(3, true)
			if w.r.IntN(2) == 0 {
				unsub = w.randomNames(2, true)
			}
		}
		kind, pick := w.r.IntN(3), w.r.IntN(1000)
		for _, s := range tw.sides {
			ts := s.state(typ)
			if !ts.requested {
				ts.legacy = len(sub) == 0
			}
			if len(sub) > 0 {
				ts.legacy = false
			}
			for _, n := range sub {
				ts.subs[n] = true
			}
			for _, n := range unsub {
				delete(ts.subs, n)
			}
			req := &discovery.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: ts.lastNonce,
				ResourceNamesSubscribe: slices.Clone(sub), ResourceNamesUnsubscribe: slices.Clone(unsub)}
			switch op {
			case opNACK:
				req.ErrorDetail = nackDetail
			case opStale:
				req.ResponseNonce = staleNonce(ts, kind, pick)
			case opReset:
				req.ResponseNonce = ""
			}
			ts.requested = true
			if s.label == "A" {
				reqA = req
			}
			s.sendDelta(req, false)
		}
	case opNothing:
	case opReconnect:
		order := slices.Clone(diffTypes)
		w.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		perturb, pick := w.r.IntN(4), w.r.IntN(1000)
		var sent []string
		for _, s := range tw.sides {
			s.close()
			if err := s.open(); err != nil {
				w.t.Fatalf("seed %d: reopen: %v", w.seed, err)
			}
			sent = sent[:0]
			for _, t := range order {
				ts := s.types[t]
				if ts == nil || !ts.requested {
					continue
				}
				var sub []string
				if !ts.legacy {
					sub = slices.Sorted(maps.Keys(ts.subs))
				}
				initial := maps.Clone(ts.held)
				held := slices.Sorted(maps.Keys(initial))
				switch {
				case perturb == 0 && len(held) > 0:
					initial[held[pick%len(held)]] = "not-a-version"
				case perturb == 1 && len(held) > 0:
					delete(initial, held[pick%len(held)])
				case perturb == 2:
					initial[namePool[pick%len(namePool)]] = "unknown"
				}
				sent = append(sent, fmt.Sprintf("%s%v initial=%v", shortType(t), sub, initial))
				s.sendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: t, ResourceNamesSubscribe: sub,
					InitialResourceVersions: initial}, false)
			}
		}
		desc += fmt.Sprintf(" %v", sent)
	case opUnserved, opNoType:
		t := typeInvalid
		if op == opNoType {
			t = ""
		}
		for _, s := range tw.sides {
			req := &discovery.DeltaDiscoveryRequest{TypeUrl: t, ResourceNamesSubscribe: []string{"x"}}
			if s.label == "A" {
				reqA = req
			}
			s.sendDelta(req, false)
		}
	}
	if reqA != nil {
		desc += fmt.Sprintf(" %s +%v -%v nonce(A)=%q nack=%v", shortType(reqA.TypeUrl), reqA.ResourceNamesSubscribe,
			reqA.ResourceNamesUnsubscribe, reqA.ResponseNonce, reqA.ErrorDetail != nil)
	}
	w.log = append(w.log, desc)
}

// probe asks s's server for a probe answer, which comes after every
// response the last step caused.
func (s *side) probe() {
	if s.dead {
		return
	}
	if s.tw.delta {
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: typeProbe}
		if !s.probed {
			req.ResourceNamesSubscribe = []string{"*"}
		}
		s.probed = true
		s.sendDelta(req, true)
		return
	}
	s.probed = true
	s.sendSotW(&discovery.DiscoveryRequest{TypeUrl: typeProbe, ResourceNames: []string{"probe"}, ResponseNonce: s.probeNonce}, true)
}

// collect reads s's events up to the probe's answer or the stream's end,
// applies them to the client's state and returns them (the probe's
// answer left out).
func (s *side) collect() ([]event, error) {
	if s.dead {
		return nil, nil
	}
	timer := time.NewTimer(answerTimeout)
	defer timer.Stop()
	var evs []event
	for {
		select {
		case ev := <-s.events:
			if ev.err != nil {
				s.dead = true
				s.w.stats.ends.Add(1)
				return append(evs, ev), nil
			}
			n := ev.nonce()
			if s.nonces[n] {
				return append(evs, ev), fmt.Errorf("%s: nonce %q sent twice on a stream", s.label, n)
			}
			s.nonces[n] = true
			if ev.typeURL() == typeProbe {
				s.probeNonce = n
				return evs, nil
			}
			s.apply(ev)
			evs = append(evs, ev)
		case <-timer.C:
			return evs, fmt.Errorf("%s: no answer to the probe in %v", s.label, answerTimeout)
		}
	}
}

// apply records a response in the client's state.
func (s *side) apply(ev event) {
	ts := s.state(ev.typeURL())
	ts.lastNonce = ev.nonce()
	ts.history = append(ts.history, ts.lastNonce)
	if ev.sotw != nil {
		ts.lastVersion = ev.sotw.GetVersionInfo()
		return
	}
	for _, r := range ev.delta.GetResources() {
		ts.held[r.GetName()] = r.GetVersion()
	}
	for _, name := range ev.delta.GetRemovedResources() {
		delete(ts.held, name)
	}
}

// settle probes the affected twins' streams, collects what each received
// and compares the twins.
func (w *world) settle(step int, affected []*twin) {
	for _, tw := range affected {
		for _, s := range tw.sides {
			s.probe()
		}
	}
	for _, tw := range affected {
		var got [2][]event
		var errs []error
		for i, s := range tw.sides {
			evs, err := s.collect()
			got[i] = evs
			if err != nil {
				errs = append(errs, err)
			}
		}
		diff := compareEvents(got[0], got[1])
		if diff != "" {
			errs = append(errs, errors.New(diff))
		}
		if len(errs) > 0 {
			diff = errors.Join(errs...).Error()
		}
		w.logf("  twin %d: A %s", tw.id, summarize(got[0]))
		if diff != "" {
			w.logf("  twin %d: B %s", tw.id, summarize(got[1]))
			w.t.Fatalf("seed %d step %d twin %d: the servers differ: %s\n\nsteps (replay: go test -run 'Differential/seed=%d$' -ads.steps %d):\n%s\n\nA (meshbridge) received:\n%s\nB (go-control-plane) received:\n%s",
				w.seed, step, tw.id, diff, w.seed, max(step, 1), strings.Join(w.log, "\n"), dump(got[0]), dump(got[1]))
		}
		for _, ev := range got[0] {
			if ev.err == nil {
				w.stats.responses.Add(1)
			}
		}
	}
}

// canonical returns ev's response without its nonce, its resources and
// removed names sorted.
func canonical(ev event) proto.Message {
	if ev.sotw != nil {
		m := proto.Clone(ev.sotw).(*discovery.DiscoveryResponse)
		m.Nonce = ""
		slices.SortFunc(m.Resources, func(a, b *anypb.Any) int {
			return cmp.Or(strings.Compare(a.GetTypeUrl(), b.GetTypeUrl()), bytes.Compare(a.GetValue(), b.GetValue()))
		})
		return m
	}
	m := proto.Clone(ev.delta).(*discovery.DeltaDiscoveryResponse)
	m.Nonce = ""
	slices.SortFunc(m.Resources, func(a, b *discovery.Resource) int {
		return cmp.Or(strings.Compare(a.GetName(), b.GetName()), strings.Compare(a.GetVersion(), b.GetVersion()))
	})
	slices.Sort(m.RemovedResources)
	slices.SortFunc(m.RemovedResourceNames, func(a, b *discovery.ResourceName) int { return strings.Compare(a.GetName(), b.GetName()) })
	return m
}

// endOf describes how a stream ended.
func endOf(err error) string {
	if errors.Is(err, io.EOF) {
		return "end: OK"
	}
	st := status.Convert(err)
	return fmt.Sprintf("end: %s %q", st.Code(), st.Message())
}

// compareEvents compares what two twins received in a step: per type,
// the same responses modulo nonce, and the same end. It returns "" when
// they match.
func compareEvents(a, b []event) string {
	byType := func(evs []event) (map[string][]event, string) {
		m := map[string][]event{}
		end := ""
		for _, ev := range evs {
			if ev.err != nil {
				end = endOf(ev.err)
				continue
			}
			m[ev.typeURL()] = append(m[ev.typeURL()], ev)
		}
		return m, end
	}
	ma, endA := byType(a)
	mb, endB := byType(b)
	var diffs []string
	if endA != endB {
		diffs = append(diffs, fmt.Sprintf("stream end: A %q, B %q", cmp.Or(endA, "open"), cmp.Or(endB, "open")))
	}
	typs := slices.Sorted(maps.Keys(ma))
	for t := range mb {
		if _, ok := ma[t]; !ok {
			typs = append(typs, t)
		}
	}
	for _, t := range typs {
		ra, rb := ma[t], mb[t]
		if len(ra) != len(rb) {
			diffs = append(diffs, fmt.Sprintf("%s: A received %d responses, B %d", shortType(t), len(ra), len(rb)))
			continue
		}
		for i := range ra {
			if ca, cb := canonical(ra[i]), canonical(rb[i]); !proto.Equal(ca, cb) {
				diffs = append(diffs, fmt.Sprintf("%s response %d differs:\n  A: %s\n  B: %s", shortType(t), i+1, brief(ra[i]), brief(rb[i])))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

// resourceName returns the name of an xDS resource in an Any.
func resourceName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return "?" + err.Error()
	}
	switch r := m.(type) {
	case *clusterv3.Cluster:
		return fmt.Sprintf("%s:%s", r.GetName(), r.GetAltStatName())
	case *endpointv3.ClusterLoadAssignment:
		addr := r.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
		return fmt.Sprintf("%s:%s", r.GetClusterName(), addr)
	case *listenerv3.Listener:
		return fmt.Sprintf("%s:%s", r.GetName(), r.GetStatPrefix())
	}
	return fmt.Sprintf("%T", m)
}

// brief is one line of an event: type, version, resources (and Delta
// removals), nonce.
func brief(ev event) string {
	if ev.err != nil {
		return endOf(ev.err)
	}
	if ev.sotw != nil {
		var names []string
		for _, a := range ev.sotw.GetResources() {
			names = append(names, resourceName(a))
		}
		slices.Sort(names)
		return fmt.Sprintf("%s v=%s %v (nonce %s)", shortType(ev.sotw.GetTypeUrl()), ev.sotw.GetVersionInfo(), names, ev.sotw.GetNonce())
	}
	var names []string
	for _, r := range ev.delta.GetResources() {
		v := r.GetVersion()
		if len(v) > 6 {
			v = v[:6]
		}
		names = append(names, resourceName(r.GetResource())+"@"+v)
	}
	slices.Sort(names)
	removed := slices.Sorted(slices.Values(ev.delta.GetRemovedResources()))
	return fmt.Sprintf("%s v=%s +%v -%v (nonce %s)", shortType(ev.delta.GetTypeUrl()), ev.delta.GetSystemVersionInfo(), names, removed, ev.delta.GetNonce())
}

func summarize(evs []event) string {
	if len(evs) == 0 {
		return "-"
	}
	var parts []string
	for _, ev := range evs {
		parts = append(parts, brief(ev))
	}
	return strings.Join(parts, " | ")
}

// dump prints events in full.
func dump(evs []event) string {
	if len(evs) == 0 {
		return "  (nothing)\n"
	}
	var b strings.Builder
	for _, ev := range evs {
		if ev.err != nil {
			fmt.Fprintf(&b, "  %s\n", endOf(ev.err))
			continue
		}
		var m proto.Message = ev.sotw
		if ev.delta != nil {
			m = ev.delta
		}
		fmt.Fprintf(&b, "  %s\n", prototext.MarshalOptions{}.Format(m))
	}
	return b.String()
}

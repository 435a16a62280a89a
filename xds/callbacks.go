package xds

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/xds/ads"
)

// streamKey names a stream; SotW and Delta streams are numbered
// separately, and so are meshbridge's ADS server's (package ads) and
// go-control-plane's (MCP), each from 1.
type streamKey struct {
	id    int64
	delta bool
	gcp   bool // served by go-control-plane's server
}

func (k streamKey) mode() string {
	if k.delta {
		return modeDelta
	}
	return modeSotW
}

// streamState is what callbacks knows of one open stream. One stream's
// callbacks come from its own goroutine; /debug/syncz and convergence read
// it from others, under mu, which only they contend for.
type streamState struct {
	mu     sync.Mutex            // guards the fields below
	gen    Generator             // "" until the first request, which carries the Node
	node   string                // node ID from the first request
	client string                // for logs: "mcp" when the first request is an Istio config type, else gen
	agent  clientAgent           // the client table's row of the node (clients.go)
	peer   peerInfo              // from the stream's context
	opened time.Time             // when the stream opened
	types  map[string]*typeState // by type URL, from the type's first request or response
	// served holds the entries of types for the types meshbridge
	// generates, by servedIndex: the lookups of every request and response
	// then read no map.
	served [len(servedTypeURLs)]*typeState
}

// servedTypeURLs are the types meshbridge generates (servedXDSTypes), in
// servedIndex order, the ADS server's (ads.RankOf).
var servedTypeURLs = [...]string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}

// servedIndex returns typeURL's index in servedTypeURLs (the ADS server's
// rank of it), or -1.
func servedIndex(typeURL string) int {
	if r := ads.RankOf(typeURL); r < ads.Ranked {
		return r
	}
	return -1
}

// typeState is what a stream asked and was sent of one type.
type typeState struct {
	sent     sentReply // the last response sent
	awaiting bool      // sent awaits the client's answer (ACK or NACK, by its nonce)
	acked    string    // the version of the last ACKed response
	ackedAt  time.Time
	nack     *nackRecord // the last NACK
	// sub mirrors go-control-plane's subscription of the type on this
	// stream (hasSub once a request was taken), for the types meshbridge
	// generates: which resources the stream watches (convergence.go).
	// names is the resource list of SotW's last request taken, so that an
	// ACK repeating it leaves sub alone.
	sub    stream.Subscription
	hasSub bool
	names  []string
	// tally counts the type's responses (responses, metrics.go), looked
	// up at the first response.
	tally *tallySlot
	// waits are the followed pushes waiting for this stream and type
	// (convergence.go).
	waits []*trackedPush
}

// sentReply is a response sent. version is the DiscoveryResponse's
// version_info (SotW) or system_version_info (Delta), both the
// cache's version when it answered (xds/cache).
type sentReply struct {
	nonce, version string
	at             time.Time
}

// nackRecord is a NACK: the version of the response it rejected ("" when
// its nonce named no response awaiting an answer) and the client's message.
type nackRecord struct {
	version, message string
	at               time.Time
}

// requestedNames is what a request says of its type's subscription: SotW's
// complete list of names, or Delta's changes to it.
type requestedNames struct {
	names, subscribe, unsubscribe []string
}

// typ returns the stream's state of typeURL, creating it on first sight.
func (st *streamState) typ(typeURL string) *typeState {
	i := servedIndex(typeURL)
	if i >= 0 && st.served[i] != nil {
		return st.served[i]
	}
	ts, ok := st.types[typeURL]
	if !ok {
		ts = &typeState{}
		if i >= 0 {
			// The constant, not the request's copy, stays as the key.
			typeURL = servedTypeURLs[i]
			st.served[i] = ts
		}
		st.types[typeURL] = ts
	}
	return ts
}

// lookup returns the stream's state of typeURL, nil when it has none.
func (st *streamState) lookup(typeURL string) *typeState {
	if i := servedIndex(typeURL); i >= 0 {
		return st.served[i]
	}
	return st.types[typeURL]
}

// subscribe applies a request taken by go-control-plane to the mirrored
// subscription, by go-control-plane's own rules (server/stream/v3
// Subscription): a SotW request replaces the names, a Delta request
// changes them, and an empty first request is a wildcard for the types
// whose legacy wildcard is on (server.go, legacyWildcard).
func (ts *typeState) subscribe(delta bool, typeURL string, rn requestedNames) {
	switch {
	case !delta && ts.hasSub && slices.Equal(ts.names, rn.names):
	case !delta && ts.hasSub:
		ts.sub.SetResourceSubscription(rn.names)
		ts.names = rn.names
	case !delta:
		ts.sub = stream.NewSotwSubscription(rn.names, legacyWildcard(typeURL))
		ts.names = rn.names
	case ts.hasSub:
		ts.sub.UpdateResourceSubscriptions(rn.subscribe, rn.unsubscribe)
	default:
		ts.sub = stream.NewDeltaSubscription(rn.subscribe, rn.unsubscribe, nil, legacyWildcard(typeURL))
	}
	ts.hasSub = true
}

// callbacks observes the ADS streams of one listener: it logs who connected,
// counts streams per mode and clients per generator, counts responses and
// their bytes, and keeps per stream and type what was sent, ACKed and
// NACKed (logging and counting NACKs) and what the stream subscribes to
// (/debug/syncz, syncz.go; the convergence stages, convergence.go).
// go-control-plane calls it synchronously from each stream's goroutine.
// Each stream's state has its own lock, and the streams are found in a
// sync.Map, so that a push answered by thousands of streams at once does
// not make them queue on one lock. It decides nothing: which versions a
// stream was sent, and so what it is sent next, go-control-plane's
// subscription keeps (nack.go).
type callbacks struct {
	log      *slog.Logger
	listener string       // "xds" or "mcp", for logs
	conv     *convergence // nil: no convergence stages
	// sotw and delta are the open streams by ID, gcpSotW and gcpDelta
	// go-control-plane's: each server numbers SotW and Delta streams apart
	// (streams.go).
	sotw, delta, gcpSotW, gcpDelta streamTable
	// hinted are the nodes told that they asked for Listeners without
	// being proxyless gRPC clients (hintNotGRPC), so each is told once;
	// hintMu guards it.
	hintMu sync.Mutex
	hinted map[string]bool
	// subs records what each node was served substituted (clients.go).
	subs *substitutions
}

func newCallbacks(logger *slog.Logger, listener string, subs *substitutions) *callbacks {
	return &callbacks{log: logger, listener: listener, hinted: make(map[string]bool), subs: subs}
}

// maxHinted bounds callbacks.hinted: past it the set starts again, so a
// node may be told twice rather than the set grow without end.
const maxHinted = 10000

// hintOnce reports whether node is to be hinted now: true the first time
// it is asked for a node (until maxHinted nodes were).
func (c *callbacks) hintOnce(node string) bool {
	c.hintMu.Lock()
	defer c.hintMu.Unlock()
	if c.hinted[node] {
		return false
	}
	if len(c.hinted) >= maxHinted {
		clear(c.hinted)
	}
	c.hinted[node] = true
	return true
}

// funcs adapts c to go-control-plane's Callbacks.
func (c *callbacks) funcs() serverv3.Callbacks {
	return serverv3.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			c.opened(ctx, streamKey{id: id, gcp: true})
			return nil
		},
		DeltaStreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			c.opened(ctx, streamKey{id: id, delta: true, gcp: true})
			return nil
		},
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			key := streamKey{id: id, gcp: true}
			c.request(key, c.state(key), req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail(),
				requestedNames{names: req.GetResourceNames()})
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			key := streamKey{id: id, delta: true, gcp: true}
			c.request(key, c.state(key), req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail(),
				requestedNames{subscribe: req.GetResourceNamesSubscribe(), unsubscribe: req.GetResourceNamesUnsubscribe()})
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
			key := streamKey{id: id, gcp: true}
			c.response(key, c.state(key), resp.GetTypeUrl(), resp.GetNonce(), resp.GetVersionInfo(), proto.Size(resp), time.Now())
		},
		StreamDeltaResponseFunc: func(id int64, _ *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
			key := streamKey{id: id, delta: true, gcp: true}
			c.response(key, c.state(key), resp.GetTypeUrl(), resp.GetNonce(), resp.GetSystemVersionInfo(),
				proto.Size(resp), time.Now())
		},
		StreamClosedFunc:      func(id int64, _ *core.Node) { c.closed(streamKey{id: id, gcp: true}) },
		DeltaStreamClosedFunc: func(id int64, _ *core.Node) { c.closed(streamKey{id: id, delta: true, gcp: true}) },
	}
}

// hooks adapts c to the ads.Server's Hooks; both servers of one listener
// share c (streamKey tells their streams apart).
func (c *callbacks) hooks() ads.Hooks { return adsHooks{c} }

type adsHooks struct{ c *callbacks }

func (h adsHooks) Opened(ctx context.Context, id int64, delta bool) ads.StreamHooks {
	key := streamKey{id: id, delta: delta}
	return &adsStreamHooks{c: h.c, key: key, st: h.c.opened(ctx, key)}
}

// adsStreamHooks observe one stream of the ADS server: its state, found
// once when it opened.
type adsStreamHooks struct {
	c   *callbacks
	key streamKey
	st  *streamState
}

func (h *adsStreamHooks) Request(node *core.Node, r ads.Request) {
	h.c.request(h.key, h.st, node, r.TypeURL, r.Nonce, r.ErrorDetail,
		requestedNames{names: r.Names, subscribe: r.Subscribe, unsubscribe: r.Unsubscribe})
}

func (h *adsStreamHooks) Response(typeURL, nonce, version string, size int, at time.Time) {
	h.c.response(h.key, h.st, typeURL, nonce, version, size, at)
}

func (h *adsStreamHooks) Closed() { h.c.closed(h.key) }

// opened counts a new stream and notes its peer; ctx is the stream's.
// go-control-plane calls it before any request of the stream and calls
// closed after the last. It returns the stream's state.
func (c *callbacks) opened(ctx context.Context, key streamKey) *streamState {
	p := peerOf(ctx)
	st := c.state(key)
	st.mu.Lock()
	st.peer, st.opened = p, time.Now()
	st.mu.Unlock()
	xdsStreams.WithLabelValues(key.mode()).Inc()
	return st
}

// table returns the streams of key's mode.
func (c *callbacks) table(key streamKey) *streamTable {
	switch {
	case key.gcp && key.delta:
		return &c.gcpDelta
	case key.gcp:
		return &c.gcpSotW
	case key.delta:
		return &c.delta
	}
	return &c.sotw
}

// state returns the stream's state, creating it on first sight.
func (c *callbacks) state(key streamKey) *streamState {
	t := c.table(key)
	if st := t.load(key.id); st != nil {
		return st
	}
	return t.loadOrStore(key.id, &streamState{types: make(map[string]*typeState)})
}

// eachStream calls f with every open stream's key and state, unlocked.
func (c *callbacks) eachStream(f func(streamKey, *streamState)) {
	c.sotw.each(func(id int64, st *streamState) { f(streamKey{id: id}, st) })
	c.delta.each(func(id int64, st *streamState) { f(streamKey{id: id, delta: true}, st) })
	c.gcpSotW.each(func(id int64, st *streamState) { f(streamKey{id: id, gcp: true}, st) })
	c.gcpDelta.each(func(id int64, st *streamState) { f(streamKey{id: id, delta: true, gcp: true}, st) })
}

// request registers the stream's generator at its first request (the one that
// carries the Node), logging who connected, and settles the response the
// request answers: an ACK records its version, a NACK is recorded, logged
// and counted. A request go-control-plane takes (SotW ignores one quoting
// a nonce other than the last response's while that awaits its answer;
// Delta takes every request) updates the mirrored subscription.
func (c *callbacks) request(key streamKey, st *streamState, node *core.Node, typeURL, nonce string, nack *status.Status,
	rn requestedNames) {
	now := time.Now()
	st.mu.Lock()
	if st.gen == "" {
		st.gen, st.node, st.client = generatorOf(node), node.GetId(), string(generatorOf(node))
		st.agent = agentOf(node)
		if isMCPType(typeURL) {
			st.client = clientMCP
		}
		xdsClients.WithLabelValues(st.client).Inc()
		if c.subs != nil {
			c.subs.opened(st.node)
		}
		c.log.Info("Connected xDS client", append([]any{"listener", c.listener, "streamID", key.id, "mode", key.mode(),
			"node", st.node, "generator", st.client, "userAgent", st.agent.userAgent, "family", st.agent.family,
			"lacks", st.agent.lacks.Names()}, st.peer.attrs()...)...)
	}
	ts := st.typ(typeURL)
	answers := ts.awaiting && ts.sent.nonce == nonce
	var settled sentReply
	if answers {
		ts.awaiting, settled = false, ts.sent
		if nack == nil {
			ts.acked, ts.ackedAt = settled.version, now
		}
	}
	if nack != nil {
		ts.nack = &nackRecord{version: settled.version, message: nack.GetMessage(), at: now}
	}
	if (key.delta || !ts.awaiting) && servedXDSTypes[typeURL] {
		ts.subscribe(key.delta, typeURL, rn)
	}
	acked, nodeID := ts.acked, st.node
	if answers && c.conv != nil && len(ts.waits) > 0 {
		c.conv.answered(ts, servedIndex(typeURL), settled.version, nack == nil, now)
	}
	gen := st.gen
	st.mu.Unlock()
	if gen == GeneratorEnvoy && typeURL == resourcev3.ListenerType && len(rn.names)+len(rn.subscribe) > 0 && c.hintOnce(nodeID) {
		// A proxyless gRPC client names the Listener of its target; one
		// without GENERATOR: grpc is served as an Envoy, which gets none,
		// and its calls fail with "resource does not exist".
		c.log.Warn("A client asked for Listeners by name without node metadata GENERATOR: grpc: it is served as an "+
			"Envoy, which gets Clusters and ClusterLoadAssignments only, so it gets no Listener; a proxyless gRPC client "+
			"needs GENERATOR: grpc in its bootstrap's node.metadata (meshbridge bootstrap writes it)",
			"node", nodeID, "streamID", key.id, "listener", c.listener, "resources", slices.Concat(rn.names, rn.subscribe))
	}
	if nack != nil {
		nacksTotal.WithLabelValues(typeLabel(typeURL)).Inc()
		c.log.Warn("Received NACK", "typeURL", typeURL, "node", nodeID, "streamID", key.id, "mode", key.mode(),
			"version", settled.version, "ackedVersion", acked, "err", nack.GetMessage())
	}
}

// response counts a response of size bytes about to be sent (at: when
// its flush began) in the stream's state st and remembers it until the
// client answers.
func (c *callbacks) response(key streamKey, st *streamState, typeURL, nonce, version string, size int, at time.Time) {
	st.mu.Lock()
	ts := st.typ(typeURL)
	ts.sent, ts.awaiting = sentReply{nonce: nonce, version: version, at: at}, true
	if ts.tally == nil {
		ts.tally = responses.slot(typeURL, key.id)
	}
	ts.tally.add(size)
	if c.conv != nil && len(ts.waits) > 0 {
		c.conv.sent(ts, servedIndex(typeURL), version, at)
	}
	st.mu.Unlock()
}

// ackedVersion returns the version of the last response of typeURL the
// stream ACKed, or "" when it ACKed none.
func (c *callbacks) ackedVersion(key streamKey, typeURL string) string {
	st := c.table(key).load(key.id)
	if st == nil {
		return ""
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if ts := st.lookup(typeURL); ts != nil {
		return ts.acked
	}
	return ""
}

func (c *callbacks) closed(key streamKey) {
	st := c.table(key).loadAndDelete(key.id)
	if st == nil {
		return
	}
	xdsStreams.WithLabelValues(key.mode()).Dec()
	st.mu.Lock()
	if st.gen != "" {
		xdsClients.WithLabelValues(st.client).Dec()
	}
	if c.conv != nil {
		c.conv.closed(st)
	}
	node, client, peerAddr, opened, named := st.node, st.client, st.peer.addr, st.opened, st.gen != ""
	st.mu.Unlock()
	if c.subs != nil && named {
		c.subs.closed(node)
	}
	c.log.Debug("Closed xDS stream", "listener", c.listener, "streamID", key.id, "mode", key.mode(), "node", node,
		"generator", client, "peer", peerAddr, "duration", time.Since(opened))
}

// clientMCP is the generator logged for a stream whose first request is an
// Istio config type: istiod's MCP client.
const clientMCP = "mcp"

// peerInfo is a stream's peer as logged: its address and, when mTLS
// verified its client certificate, the certificate's identity.
type peerInfo struct {
	addr     string
	verified bool     // a client certificate was verified
	uris     []string // URI SANs (an Istio workload's SPIFFE ID)
	dnsNames []string // DNS SANs
	subject  string   // "" when empty, as in Istio workload certificates
}

// peerOf reads the peer of a stream's context (grpc peer.FromContext).
func peerOf(ctx context.Context) peerInfo {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return peerInfo{}
	}
	out := peerInfo{addr: addrString(p.Addr)}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return out
	}
	leaf := info.State.PeerCertificates[0]
	out.verified, out.dnsNames, out.subject = true, leaf.DNSNames, leaf.Subject.String()
	for _, u := range leaf.URIs {
		out.uris = append(out.uris, u.String())
	}
	return out
}

// attrs are p's log attributes.
func (p peerInfo) attrs() []any {
	out := []any{"peer", p.addr}
	if p.verified {
		out = append(out, "uriSANs", p.uris, "dnsSANs", p.dnsNames)
		if p.subject != "" {
			out = append(out, "subject", p.subject)
		}
	}
	return out
}

package xds

import (
	"context"
	"log/slog"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
)

// streamKey names a stream; SotW and Delta streams are numbered separately.
type streamKey struct {
	id    int64
	delta bool
}

func (k streamKey) mode() string {
	if k.delta {
		return modeDelta
	}
	return modeSotW
}

// streamState is what callbacks knows of one open stream.
type streamState struct {
	gen    Generator            // "" until the first request, which carries the Node
	node   string               // node ID from the first request
	client string               // for logs: "mcp" when the first request is an Istio config type, else gen
	peer   peerInfo             // from the stream's context
	opened time.Time            // when the stream opened
	sent   map[string]sentReply // by type URL: the last response sent
	acked  map[string]string    // by type URL: the version of the last ACKed response
}

// sentReply is a response awaiting its ACK or NACK. version is the
// DiscoveryResponse's version_info (SotW) or system_version_info (Delta),
// both the LinearCache's version when it answered.
type sentReply struct {
	nonce, version string
}

// callbacks observes the ADS streams of one listener: it logs who connected,
// counts streams per mode and clients per generator, counts responses and
// their bytes, and keeps per stream and type the last ACKed version, logging
// and counting NACKs. go-control-plane
// calls it synchronously from each stream's goroutine, so it only takes a
// short lock. It decides nothing: which versions a stream was sent, and so
// what it is sent next, go-control-plane's subscription keeps (nack.go).
type callbacks struct {
	log      *slog.Logger
	listener string // "xds" or "mcp", for logs
	mu       sync.Mutex
	streams  map[streamKey]*streamState
}

func newCallbacks(logger *slog.Logger, listener string) *callbacks {
	return &callbacks{log: logger, listener: listener, streams: make(map[streamKey]*streamState)}
}

// funcs adapts c to go-control-plane's Callbacks.
func (c *callbacks) funcs() serverv3.Callbacks {
	return serverv3.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, id int64, _ string) error { c.opened(ctx, streamKey{id: id}); return nil },
		DeltaStreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			c.opened(ctx, streamKey{id: id, delta: true})
			return nil
		},
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			c.request(streamKey{id: id}, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail())
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			c.request(streamKey{id: id, delta: true}, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail())
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
			c.response(streamKey{id: id}, resp.GetTypeUrl(), resp.GetNonce(), resp.GetVersionInfo(), resp)
		},
		StreamDeltaResponseFunc: func(id int64, _ *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
			c.response(streamKey{id: id, delta: true}, resp.GetTypeUrl(), resp.GetNonce(), resp.GetSystemVersionInfo(), resp)
		},
		StreamClosedFunc:      func(id int64, _ *core.Node) { c.closed(streamKey{id: id}) },
		DeltaStreamClosedFunc: func(id int64, _ *core.Node) { c.closed(streamKey{id: id, delta: true}) },
	}
}

// opened counts a new stream and notes its peer; ctx is the stream's.
// go-control-plane calls it before any request of the stream and calls
// closed after the last.
func (c *callbacks) opened(ctx context.Context, key streamKey) {
	p := peerOf(ctx)
	c.mu.Lock()
	st := c.state(key)
	st.peer, st.opened = p, time.Now()
	c.mu.Unlock()
	xdsStreams.WithLabelValues(key.mode()).Inc()
}

// state returns the stream's state, creating it on first sight.
func (c *callbacks) state(key streamKey) *streamState {
	st, ok := c.streams[key]
	if !ok {
		st = &streamState{sent: make(map[string]sentReply), acked: make(map[string]string)}
		c.streams[key] = st
	}
	return st
}

// request registers the stream's generator at its first request (the one that
// carries the Node), logging who connected, and settles the response the
// request answers: an ACK records its version, a NACK is logged and counted.
func (c *callbacks) request(key streamKey, node *core.Node, typeURL, nonce string, nack *status.Status) {
	c.mu.Lock()
	st := c.state(key)
	if st.gen == "" {
		st.gen, st.node, st.client = generatorOf(node), node.GetId(), string(generatorOf(node))
		if isMCPType(typeURL) {
			st.client = clientMCP
		}
		xdsClients.WithLabelValues(st.client).Inc()
		c.log.Info("Connected xDS client", append([]any{"listener", c.listener, "streamID", key.id, "mode", key.mode(),
			"node", st.node, "generator", st.client}, st.peer.attrs()...)...)
	}
	sent, answers := st.sent[typeURL]
	if answers && sent.nonce == nonce {
		delete(st.sent, typeURL)
		if nack == nil {
			st.acked[typeURL] = sent.version
		}
	}
	acked, nodeID := st.acked[typeURL], st.node
	c.mu.Unlock()
	if nack != nil {
		nacksTotal.WithLabelValues(typeLabel(typeURL)).Inc()
		c.log.Warn("Received NACK", "typeURL", typeURL, "node", nodeID, "streamID", key.id, "mode", key.mode(),
			"version", sent.version, "ackedVersion", acked, "err", nack.GetMessage())
	}
}

// response counts a response about to be sent and remembers it until the
// client answers. proto.Size walks only the response's envelope: the
// resources in it are already bytes.
func (c *callbacks) response(key streamKey, typeURL, nonce, version string, resp proto.Message) {
	streamPushesTotal.WithLabelValues(typeLabel(typeURL)).Inc()
	pushBytesTotal.WithLabelValues(typeLabel(typeURL)).Add(float64(proto.Size(resp)))
	c.mu.Lock()
	c.state(key).sent[typeURL] = sentReply{nonce: nonce, version: version}
	c.mu.Unlock()
}

// ackedVersion returns the version of the last response of typeURL the
// stream ACKed, or "" when it ACKed none.
func (c *callbacks) ackedVersion(key streamKey, typeURL string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.streams[key]; ok {
		return st.acked[typeURL]
	}
	return ""
}

func (c *callbacks) closed(key streamKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.streams[key]
	if !ok {
		return
	}
	delete(c.streams, key)
	xdsStreams.WithLabelValues(key.mode()).Dec()
	if st.gen != "" {
		xdsClients.WithLabelValues(st.client).Dec()
	}
	c.log.Debug("Closed xDS stream", "listener", c.listener, "streamID", key.id, "mode", key.mode(), "node", st.node,
		"generator", st.client, "peer", st.peer.addr, "duration", time.Since(st.opened))
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

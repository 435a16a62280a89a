package xds

import (
	"cmp"
	"slices"
	"time"
)

// SyncStatus is every open ADS stream as the server's callbacks know it
// (/debug/syncz): what each stream subscribes to, was sent, ACKed and
// NACKed, per type.
type SyncStatus struct {
	// Time is when the status was taken, on the server's clock: ages are
	// measured from it.
	Time    time.Time      `json:"time"`
	Streams []StreamStatus `json:"streams"`
}

// StreamStatus is one ADS stream.
type StreamStatus struct {
	// Listener is "xds", or "mcp" for the listener of mcp.address.
	Listener string `json:"listener"`
	// ID is go-control-plane's stream ID, unique per listener and mode.
	ID   int64  `json:"id"`
	Mode string `json:"mode"` // "sotw" or "delta"
	// Node is the node ID of the stream's first request.
	Node string `json:"node"`
	// Client is "grpc" (proxyless gRPC), "envoy" (any other node) or "mcp"
	// (istiod asking Istio config types); "" before the first request.
	Client string `json:"client"`
	// UserAgent is the node's user_agent_name and user_agent_version;
	// Family its client family in the client table (grpc-go, grpc-java,
	// grpc-c-core, grpc-js, envoy, unknown).
	UserAgent string `json:"userAgent,omitempty"`
	Family    string `json:"family,omitempty"`
	// Lacks are the optional features the stream is not served; Substituted
	// what its node was served in their place ("loadBalancer.simple:
	// LEAST_REQUEST", served as ROUND_ROBIN).
	Lacks       []string  `json:"lacks,omitempty"`
	Substituted []string  `json:"substituted,omitempty"`
	Peer        string    `json:"peer"`
	Connected   time.Time `json:"connected"`
	// LastAck is the stream's latest ACK of any type.
	LastAck time.Time    `json:"lastAck,omitzero"`
	Types   []TypeStatus `json:"types"`
}

// TypeStatus is what one stream asked and was sent of one type.
type TypeStatus struct {
	TypeURL string `json:"typeURL"`
	// Wildcard and Resources are the stream's subscription (the names it
	// subscribes to explicitly), for the types meshbridge generates.
	Wildcard  bool `json:"wildcard,omitempty"`
	Resources int  `json:"resources,omitempty"`
	// Sent is the version of the last response sent, SentNonce its nonce,
	// SentAt when the flush that sent it began (ads.StreamHooks); Pending
	// is true while it awaits the stream's ACK or NACK.
	Sent      string    `json:"sent,omitempty"`
	SentNonce string    `json:"sentNonce,omitempty"`
	SentAt    time.Time `json:"sentAt,omitzero"`
	Pending   bool      `json:"pending"`
	// Acked is the version of the last response the stream ACKed.
	Acked   string      `json:"acked,omitempty"`
	AckedAt time.Time   `json:"ackedAt,omitzero"`
	NACK    *NACKStatus `json:"lastNack,omitempty"`
}

// NACKStatus is a stream's last NACK of a type.
type NACKStatus struct {
	// Version is the version of the response it rejected; empty when its
	// nonce named no response awaiting an answer.
	Version string    `json:"version,omitempty"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// SyncStatus returns every open stream of every listener, by listener,
// node, mode and ID; each stream's types by type URL. Safe for concurrent
// use.
func (s *DiscoveryServer) SyncStatus() SyncStatus {
	out := SyncStatus{Time: time.Now(), Streams: []StreamStatus{}}
	for _, name := range []string{listenerXDS, listenerMCP} {
		out.Streams = append(out.Streams, s.listeners[name].status()...)
	}
	slices.SortFunc(out.Streams, func(a, b StreamStatus) int {
		return cmp.Or(cmp.Compare(a.Listener, b.Listener), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Mode, b.Mode),
			cmp.Compare(a.ID, b.ID))
	})
	return out
}

// status returns c's streams.
func (c *callbacks) status() []StreamStatus {
	var out []StreamStatus
	c.eachStream(func(key streamKey, st *streamState) {
		st.mu.Lock()
		defer st.mu.Unlock()
		ss := StreamStatus{Listener: c.listener, ID: key.id, Mode: key.mode(), Node: st.node, Client: st.client,
			Peer: st.peer.addr, Connected: st.opened, Types: make([]TypeStatus, 0, len(st.types))}
		if st.gen != "" && st.client != clientMCP {
			ss.UserAgent, ss.Family, ss.Lacks = st.agent.userAgent, st.agent.family, st.agent.lacks.Names()
			if c.subs != nil {
				ss.Substituted = c.subs.of(st.node)
			}
		}
		for typeURL, ts := range st.types {
			t := TypeStatus{TypeURL: typeURL, Sent: ts.sent.version, SentNonce: ts.sent.nonce, SentAt: ts.sent.at,
				Pending: ts.awaiting, Acked: ts.acked, AckedAt: ts.ackedAt}
			if ts.hasSub {
				t.Wildcard, t.Resources = ts.sub.IsWildcard(), len(ts.sub.SubscribedResources())
			}
			if n := ts.nack; n != nil {
				t.NACK = &NACKStatus{Version: n.version, Message: n.message, At: n.at}
			}
			if ts.ackedAt.After(ss.LastAck) {
				ss.LastAck = ts.ackedAt
			}
			ss.Types = append(ss.Types, t)
		}
		slices.SortFunc(ss.Types, func(a, b TypeStatus) int { return cmp.Compare(a.TypeURL, b.TypeURL) })
		out = append(out, ss)
	})
	return out
}

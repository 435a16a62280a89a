package xds

import (
	"log/slog"
	"sync"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
)

// streamKey names a stream; SotW and Delta streams are numbered separately.
type streamKey struct {
	id    int64
	delta bool
}

// callbacks observes the ADS streams: it counts clients per generator and logs
// and counts NACKs. go-control-plane calls it synchronously from each stream's
// goroutine, so it only takes a short lock.
type callbacks struct {
	log     *slog.Logger
	mu      sync.Mutex
	streams map[streamKey]Generator // streams whose node is known
}

func newCallbacks(logger *slog.Logger) serverv3.Callbacks {
	c := &callbacks{log: logger, streams: make(map[streamKey]Generator)}
	return serverv3.CallbackFuncs{
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			c.request(streamKey{id: id}, req.GetNode(), req.GetTypeUrl(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			c.request(streamKey{id: id, delta: true}, req.GetNode(), req.GetTypeUrl(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
			return nil
		},
		StreamClosedFunc:      func(id int64, _ *core.Node) { c.closed(streamKey{id: id}) },
		DeltaStreamClosedFunc: func(id int64, _ *core.Node) { c.closed(streamKey{id: id, delta: true}) },
	}
}

// request registers the stream's generator at its first request (the one that
// carries the Node) and reports a NACK.
func (c *callbacks) request(key streamKey, node *core.Node, typeURL, detail string, nack bool) {
	c.mu.Lock()
	if _, seen := c.streams[key]; !seen {
		gen := generatorOf(node)
		c.streams[key] = gen
		xdsClients.WithLabelValues(string(gen)).Inc()
		c.log.Info("Connected xDS client", "streamID", key.id, "node", node.GetId(), "generator", gen)
	}
	c.mu.Unlock()
	if nack {
		nacksTotal.WithLabelValues(typeURL).Inc()
		c.log.Warn("Received NACK", "typeURL", typeURL, "node", node.GetId(), "streamID", key.id, "err", detail)
	}
}

func (c *callbacks) closed(key streamKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gen, ok := c.streams[key]
	if !ok {
		return
	}
	delete(c.streams, key)
	xdsClients.WithLabelValues(string(gen)).Dec()
	c.log.Info("Disconnected xDS client", "streamID", key.id, "generator", gen)
}

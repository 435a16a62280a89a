package xds

import (
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/cache"
)

// MCPOptions turns on MCP-over-xDS for istiod: on the ADS port, or on a
// listener of its own with Options.MCPAddress.
type MCPOptions struct {
	// Source is the aggregate store whose ServiceEntries and WorkloadEntries
	// are served; required. Tell the server of changes with
	// DiscoveryServer.MCPConfigChanged.
	Source cache.ConfigSource
}

// MCPConfigChanged tells the server that objects of kind changed in the
// MCP source; cmd/bridge calls it from a store handler. A burst of changes
// becomes one push per type after Options.DebounceAfter (at most
// DebounceMax), to the streams watching kind's MCP types only. It never
// blocks and does nothing without Options.MCP.
func (s *DiscoveryServer) MCPConfigChanged(kind model.Kind) {
	if s.caches.mcp != nil {
		s.caches.mcp.Changed(kind)
	}
}

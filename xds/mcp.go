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
	// Validate checks an object before it is served: one it fails is
	// logged and left off the wire (istiod would drop it with a log line
	// only). Required: NewDiscoveryServer panics without it, so that no
	// wiring serves MCP unvalidated. The pipeline gives
	// translate.ValidateConfig, istiod's rules; this package imports no
	// translation.
	Validate func(*model.Config) error
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

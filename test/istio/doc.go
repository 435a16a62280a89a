// Package istio tests meshbridge's MCP server with the MCP client istiod runs
// (istio.io/istio/pkg/adsc). It is a separate module so that istio.io/istio
// stays out of the product's go.mod.
package istio

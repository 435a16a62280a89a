// Package istio tests meshbridge against Istio's own code, at the
// istio.io/istio version go.mod pins: its MCP server with the MCP client
// istiod runs (istio.io/istio/pkg/adsc), and its Kubernetes output with an
// unpatched istiod of that version (pilot-discovery, named as a tool in
// go.mod and built by tools/build.sh istiod) in ambient mode: the TestAmbient…
// tests read ztunnel's view of meshbridge's objects (WDS, over Delta ADS as
// ztunnel subscribes), the VIPs istiod allocates, the sidecar view through a
// proxyless gRPC client, and the apiserver writes meshbridge makes meanwhile.
// It is a separate module so that istio.io/istio stays out of the product's
// go.mod.
package istio

// Package e2e runs meshbridge end to end, as an operator does: a real Consul
// (test/harness), the meshbridge binary built from this tree, real gRPC
// backends and grpc-go's xDS resolver in a separate client process (grpc
// reads GRPC_XDS_BOOTSTRAP when the process starts). Each file covers one
// feature and names the README section or rule it pins.
package e2e

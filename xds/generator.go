package xds

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Generator names the kind of xDS client, as istiod's node metadata field
// GENERATOR does.
type Generator string

const (
	// GeneratorGRPC is a proxyless gRPC client (node metadata GENERATOR: grpc);
	// it gets LDS, RDS, CDS and EDS.
	GeneratorGRPC Generator = "grpc"
	// GeneratorEnvoy is every other client; it gets CDS and EDS, and empty
	// LDS/RDS answers.
	GeneratorEnvoy Generator = "envoy"
)

// generatorOf classifies a node by its metadata field GENERATOR. A nil node or
// one without the field is an Envoy.
func generatorOf(node *core.Node) Generator {
	if v, ok := node.GetMetadata().GetFields()["GENERATOR"]; ok && v.GetStringValue() == string(GeneratorGRPC) {
		return GeneratorGRPC
	}
	return GeneratorEnvoy
}

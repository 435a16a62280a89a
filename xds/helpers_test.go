package xds

import (
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen/gentest"
)

// The helpers shared with the tests of the other xds package (gentest).
var (
	assertEqual = gentest.AssertEqual
	grpcService = gentest.GRPCService
	portName    = gentest.PortName
	ep          = gentest.Endpoint
)

// maxFileWeight is the largest weight a registry lets through (the file
// registry's 42949672 on the common scale).
const maxFileWeight = 42949672 * model.DefaultWeight

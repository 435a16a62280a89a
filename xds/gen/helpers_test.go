package gen

import (
	"github.com/meshbridge/meshbridge/xds/gen/gentest"
)

// The helpers shared with the tests of the other xds package (gentest).
var (
	assertEqual = gentest.AssertEqual
	grpcService = gentest.GRPCService
	portName    = gentest.PortName
	ep          = gentest.Endpoint
)

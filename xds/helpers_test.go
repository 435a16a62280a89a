package xds

import (
	"strconv"
	"strings"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/xds/gen/gentest"
)

// The helpers shared with the tests of the other xds package (gentest).
var (
	assertEqual = gentest.AssertEqual
	grpcService = gentest.GRPCService
	portName    = gentest.PortName
	ep          = gentest.Endpoint
)

// logLines returns the lines of a slog text log whose message is msg.
func logLines(logs *harness.LockedBuffer, msg string) []string {
	var out []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, " msg="+strconv.Quote(msg)+" ") || strings.Contains(line, " msg="+msg+" ") {
			out = append(out, line)
		}
	}
	return out
}

// maxFileWeight is the largest weight a registry lets through (the file
// registry's 42949672 on the common scale).
const maxFileWeight = 42949672 * model.DefaultWeight

package xds

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
)

// assertEqual fails the test with a diff when got differs from want; protos
// are compared by content.
func assertEqual(t *testing.T, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// grpcService is a one-port gRPC service in namespace "mesh".
func grpcService(host string, port uint32) *model.Service {
	return &model.Service{
		Hostname:   host,
		Namespace:  "mesh",
		Resolution: model.ResolutionStatic,
		Ports:      []model.Port{{Name: portName(port), Number: port, Protocol: model.ProtocolGRPC}},
	}
}

func portName(port uint32) string {
	return "grpc-" + strconv.FormatUint(uint64(port), 10)
}

// ep is an endpoint of port grpc-<port> with weight 1.
func ep(addr string, port uint32, locality string) *model.Endpoint {
	return &model.Endpoint{Address: addr, ServicePortName: portName(port), EndpointPort: port, Weight: 1, Locality: locality}
}

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

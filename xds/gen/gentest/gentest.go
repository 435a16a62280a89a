// Package gentest holds the test helpers that the tests of xds and xds/gen
// share: services and endpoints of one shape, and a diff of protos by
// content. For tests only.
package gentest

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/meshbridge/meshbridge/model"
)

// AssertEqual fails the test with a diff when got differs from want; protos
// are compared by content.
func AssertEqual(t testing.TB, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// GRPCService is a one-port gRPC service in namespace "mesh", its port
// named PortName(port).
func GRPCService(host string, port uint32) *model.Service {
	return &model.Service{
		Hostname:   host,
		Namespace:  "mesh",
		Resolution: model.ResolutionStatic,
		Ports:      []model.Port{{Name: PortName(port), Number: port, Protocol: model.ProtocolGRPC}},
	}
}

// PortName is "grpc-<port>".
func PortName(port uint32) string {
	return "grpc-" + strconv.FormatUint(uint64(port), 10)
}

// Endpoint is an endpoint of port grpc-<port> with weight 1.
func Endpoint(addr string, port uint32, locality string) *model.Endpoint {
	return &model.Endpoint{Address: addr, ServicePortName: PortName(port), EndpointPort: port, Weight: 1, Locality: locality}
}

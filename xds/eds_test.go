package xds

import (
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshbridge/meshbridge/model"
)

func lbEndpoint(addr string, port, weight uint32) *endpoint.LbEndpoint {
	return &endpoint.LbEndpoint{
		HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
				Address: addr, PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
			}}},
		}},
		HealthStatus:        core.HealthStatus_HEALTHY,
		LoadBalancingWeight: wrapperspb.UInt32(weight),
	}
}

func locality(region, zone, subzone string, weight uint32, eps ...*endpoint.LbEndpoint) *endpoint.LocalityLbEndpoints {
	return &endpoint.LocalityLbEndpoints{
		Locality:            &core.Locality{Region: region, Zone: zone, SubZone: subzone},
		LbEndpoints:         eps,
		LoadBalancingWeight: wrapperspb.UInt32(weight),
	}
}

func TestBuildLoadAssignment(t *testing.T) {
	const name = "outbound|80||a.local"
	weighted := func(e *model.Endpoint, w uint32) *model.Endpoint { e.Weight = w; return e }
	tests := map[string]struct {
		endpoints []*model.Endpoint
		want      *endpoint.ClusterLoadAssignment
	}{
		"no endpoints give an empty assignment, not a missing one": {
			want: &endpoint.ClusterLoadAssignment{ClusterName: name},
		},
		"one locality per distinct locality, sorted, weight is the sum of endpoint weights": {
			endpoints: []*model.Endpoint{
				weighted(ep("10.0.0.3", 80, "r2/z1/"), 5),
				weighted(ep("10.0.0.2", 80, "r1/z1/s1"), 2),
				weighted(ep("10.0.0.1", 80, "r1/z1/s1"), 3),
			},
			want: &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
				locality("r1", "z1", "s1", 5, lbEndpoint("10.0.0.1", 80, 3), lbEndpoint("10.0.0.2", 80, 2)),
				locality("r2", "z1", "", 5, lbEndpoint("10.0.0.3", 80, 5)),
			}},
		},
		"weight 0 becomes 1, as grpc-go NACKs weight-0 endpoints": {
			endpoints: []*model.Endpoint{weighted(ep("10.0.0.1", 80, ""), 0)},
			want: &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
				locality("", "", "", 1, lbEndpoint("10.0.0.1", 80, 1)),
			}},
		},
		"duplicate address:port keeps the first, as grpc-go NACKs duplicates": {
			endpoints: []*model.Endpoint{
				weighted(ep("10.0.0.1", 80, "r1"), 7),
				weighted(ep("10.0.0.1", 80, "r2"), 9),
				ep("10.0.0.1", 81, "r2"),
			},
			want: &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
				locality("r1", "", "", 7, lbEndpoint("10.0.0.1", 80, 7)),
				locality("r2", "", "", 1, lbEndpoint("10.0.0.1", 81, 1)),
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, buildLoadAssignment("outbound|80||a.local", tc.endpoints))
			assertEncodes(t, tc.want, encodeLoadAssignment("outbound|80||a.local", encodeEach(tc.endpoints)))
		})
	}
}

func TestBuildLoadAssignmentsSelectsByPortName(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Ports: []model.Port{
		{Name: "grpc-80", Number: 80, Protocol: model.ProtocolGRPC},
		{Name: "grpc-90", Number: 90, Protocol: model.ProtocolGRPC},
	}}
	endpoints := []*model.Endpoint{ep("10.0.0.1", 80, ""), ep("10.0.0.2", 90, "")}
	got := buildLoadAssignments(svc, endpoints)
	want := map[string]*endpoint.ClusterLoadAssignment{
		"outbound|80||a.local": {ClusterName: "outbound|80||a.local", Endpoints: []*endpoint.LocalityLbEndpoints{
			locality("", "", "", 1, lbEndpoint("10.0.0.1", 80, 1)),
		}},
		"outbound|90||a.local": {ClusterName: "outbound|90||a.local", Endpoints: []*endpoint.LocalityLbEndpoints{
			locality("", "", "", 1, lbEndpoint("10.0.0.2", 90, 1)),
		}},
	}
	assertEqual(t, want, got)
	encoded := encodeLoadAssignments(svc, encodeEach(endpoints))
	if len(encoded) != len(want) {
		t.Fatalf("%d encoded assignments, want %d", len(encoded), len(want))
	}
	for name, cla := range want {
		assertEncodes(t, cla, encoded[name])
	}
}

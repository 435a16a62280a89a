package gen

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
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

// maxFileWeight is the largest weight a registry lets through (the file
// registry's 42949672 on the common scale).
const maxFileWeight = 42949672 * model.DefaultWeight

// encodeOne is encodeLoadAssignment without its report of scaled weights.
func encodeOne(name string, eps []*Endpoint) types.Resource {
	res, _ := encodeLoadAssignment(name, eps, nil)
	return res
}

// encodeEveryPort is LoadAssignments without its report of scaled weights.
func encodeEveryPort(svc *model.Service, eps []*Endpoint) map[string]types.Resource {
	cla, _ := LoadAssignments(svc, eps)
	return cla
}

// TestWeightScaleReported: LoadAssignments names the clusters whose
// weights it scaled, and only those.
func TestWeightScaleReported(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Ports: []model.Port{
		{Name: "grpc-80", Number: 80, Protocol: model.ProtocolGRPC},
		{Name: "grpc-90", Number: 90, Protocol: model.ProtocolGRPC},
	}}
	heavy := func(addr string, port uint32) *model.Endpoint {
		e := ep(addr, port, "")
		e.Weight = maxFileWeight
		return e
	}
	_, scaled := LoadAssignments(svc, encodeEach([]*model.Endpoint{
		heavy("10.0.0.1", 80), heavy("10.0.0.2", 80), heavy("10.0.0.1", 90),
	}))
	if want := []string{"outbound|80||a.local"}; !slices.Equal(scaled, want) {
		t.Errorf("scaled = %v, want %v", scaled, want)
	}
}

func TestBuildLoadAssignment(t *testing.T) {
	const name = "outbound|80||a.local"
	weighted := func(e *model.Endpoint, w uint32) *model.Endpoint { e.Weight = w; return e }
	tests := map[string]struct {
		endpoints []*model.Endpoint
		want      *endpoint.ClusterLoadAssignment
		scaled    bool // the weights are scaled down: the resource is the message
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
		"weights summing past MaxUint32 in a locality are scaled down by one factor, as grpc-go NACKs the sum": {
			scaled: true,
			endpoints: []*model.Endpoint{
				weighted(ep("10.0.0.1", 80, "r1"), maxFileWeight),
				weighted(ep("10.0.0.2", 80, "r1"), maxFileWeight),
			},
			want: &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
				locality("r1", "", "", 4294967292, lbEndpoint("10.0.0.1", 80, 2147483646), lbEndpoint("10.0.0.2", 80, 2147483646)),
			}},
		},
		"localities whose weights sum past MaxUint32 are scaled down too, as grpc-go NACKs that sum as well": {
			scaled: true,
			endpoints: []*model.Endpoint{
				weighted(ep("10.0.0.1", 80, "r1"), maxFileWeight),
				weighted(ep("10.0.0.2", 80, "r2"), maxFileWeight),
			},
			want: &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
				locality("r1", "", "", 2147483646, lbEndpoint("10.0.0.1", 80, 2147483646)),
				locality("r2", "", "", 2147483646, lbEndpoint("10.0.0.2", 80, 2147483646)),
			}},
		},
		"a light endpoint scaled with heavy ones keeps weight 1": {
			scaled: true,
			endpoints: []*model.Endpoint{
				weighted(ep("10.0.0.1", 80, ""), maxFileWeight),
				weighted(ep("10.0.0.2", 80, ""), maxFileWeight),
				weighted(ep("10.0.0.3", 80, ""), 1),
			},
			want: &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{
				locality("", "", "", 4294967291, lbEndpoint("10.0.0.1", 80, 2147483645), lbEndpoint("10.0.0.2", 80, 2147483645),
					lbEndpoint("10.0.0.3", 80, 1)),
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
			res, scaled := encodeLoadAssignment("outbound|80||a.local", encodeEach(tc.endpoints), nil)
			switch {
			case scaled != tc.scaled:
				t.Errorf("scaled = %v, want %v", scaled, tc.scaled)
			case scaled:
				assertEqual(t, tc.want, res)
			default:
				assertEncodes(t, tc.want, res)
			}
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
	encoded := encodeEveryPort(svc, encodeEach(endpoints))
	if len(encoded) != len(want) {
		t.Fatalf("%d encoded assignments, want %d", len(encoded), len(want))
	}
	for name, cla := range want {
		assertEncodes(t, cla, encoded[name])
	}
}

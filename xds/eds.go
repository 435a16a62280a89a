package xds

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshbridge/meshbridge/model"
)

// buildLoadAssignments returns one ClusterLoadAssignment per port of svc,
// keyed by cluster name, from the service's endpoints (all shards). A port
// without endpoints still gets an empty assignment, so a client learns "no
// endpoints" instead of waiting for one.
func buildLoadAssignments(svc *model.Service, endpoints []*model.Endpoint) map[string]*endpoint.ClusterLoadAssignment {
	out := make(map[string]*endpoint.ClusterLoadAssignment, len(svc.Ports))
	for _, port := range svc.Ports {
		name := ClusterName(port.Number, svc.Hostname)
		var selected []*model.Endpoint
		for _, ep := range endpoints {
			if ep.ServicePortName == port.Name {
				selected = append(selected, ep)
			}
		}
		out[name] = buildLoadAssignment(name, selected)
	}
	return out
}

// buildLoadAssignment groups endpoints into one LocalityLbEndpoints per
// distinct locality. The output is sorted (localities by name, endpoints by
// address and port) so equal inputs give equal protos. grpc-go NACKs a
// ClusterLoadAssignment with a weight-0 endpoint, a duplicate address or a
// duplicate locality, and ignores a locality without weight (gRFC A27,
// xdsresource/unmarshal_eds.go), hence:
//   - endpoint weight 0 becomes 1;
//   - of several endpoints with one address:port the first (in shard order)
//     wins;
//   - each locality's load_balancing_weight is the sum of its endpoints'
//     weights, capped at MaxUint32.
func buildLoadAssignment(name string, endpoints []*model.Endpoint) *endpoint.ClusterLoadAssignment {
	unique := dedupe(endpoints)
	byLocality := make(map[string][]*model.Endpoint)
	for _, ep := range unique {
		byLocality[ep.Locality] = append(byLocality[ep.Locality], ep)
	}
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	for _, loc := range slices.Sorted(maps.Keys(byLocality)) {
		cla.Endpoints = append(cla.Endpoints, buildLocality(loc, byLocality[loc]))
	}
	return cla
}

func buildLocality(locality string, endpoints []*model.Endpoint) *endpoint.LocalityLbEndpoints {
	var total uint64
	lbEndpoints := make([]*endpoint.LbEndpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		weight := max(ep.Weight, 1)
		total += uint64(weight)
		lbEndpoints = append(lbEndpoints, &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Protocol:      core.SocketAddress_TCP,
					Address:       ep.Address,
					PortSpecifier: &core.SocketAddress_PortValue{PortValue: ep.EndpointPort},
				}}},
			}},
			HealthStatus:        core.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(weight),
		})
	}
	return &endpoint.LocalityLbEndpoints{
		Locality:            parseLocality(locality),
		LbEndpoints:         lbEndpoints,
		LoadBalancingWeight: wrapperspb.UInt32(uint32(min(total, math.MaxUint32))),
	}
}

// dedupe returns the endpoints sorted by address and port, keeping the first
// of each address:port in input order.
func dedupe(endpoints []*model.Endpoint) []*model.Endpoint {
	sorted := slices.Clone(endpoints)
	slices.SortStableFunc(sorted, func(a, b *model.Endpoint) int {
		return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.EndpointPort, b.EndpointPort))
	})
	return slices.CompactFunc(sorted, func(a, b *model.Endpoint) bool {
		return a.Address == b.Address && a.EndpointPort == b.EndpointPort
	})
}

// parseLocality splits "region/zone/subzone"; missing parts stay empty.
func parseLocality(s string) *core.Locality {
	parts := strings.SplitN(s, "/", 3)
	parts = append(parts, "", "")
	return &core.Locality{Region: parts[0], Zone: parts[1], SubZone: parts[2]}
}

package xds

import (
	"cmp"
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
	if len(svc.Ports) == 1 {
		// The common case: every endpoint serves the one port, so the
		// caller's slice is selected as is, without a copy.
		port := svc.Ports[0]
		name := ClusterName(port.Number, svc.Hostname)
		selected := endpoints
		if !allServe(endpoints, port.Name) {
			selected = selectPort(endpoints, port.Name)
		}
		out[name] = buildLoadAssignment(name, selected)
		return out
	}
	for _, port := range svc.Ports {
		name := ClusterName(port.Number, svc.Hostname)
		out[name] = buildLoadAssignment(name, selectPort(endpoints, port.Name))
	}
	return out
}

func allServe(endpoints []*model.Endpoint, portName string) bool {
	for _, ep := range endpoints {
		if ep.ServicePortName != portName {
			return false
		}
	}
	return true
}

func selectPort(endpoints []*model.Endpoint, portName string) []*model.Endpoint {
	var selected []*model.Endpoint
	for _, ep := range endpoints {
		if ep.ServicePortName == portName {
			selected = append(selected, ep)
		}
	}
	return selected
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
//
// An EDS push runs this for every changed cluster, so it allocates per
// assignment, not per endpoint: the messages of all endpoints are carved
// from a few slices (BenchmarkEDSGeneration).
func buildLoadAssignment(name string, endpoints []*model.Endpoint) *endpoint.ClusterLoadAssignment {
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	unique := dedupe(endpoints)
	if len(unique) == 0 {
		return cla
	}
	groups := groupByLocality(unique)
	msgs := newEndpointMessages(unique)
	cla.Endpoints = make([]*endpoint.LocalityLbEndpoints, len(groups))
	localities := make([]endpoint.LocalityLbEndpoints, len(groups))
	coreLocalities := make([]core.Locality, len(groups))
	weights := make([]wrapperspb.UInt32Value, len(groups))
	for i, g := range groups {
		var total uint64
		lbEndpoints := msgs.lbEndpoints[:0:len(g.endpoints)]
		for _, ep := range g.endpoints {
			weight := max(ep.Weight, 1)
			total += uint64(weight)
			lbEndpoints = append(lbEndpoints, msgs.next(ep, weight))
		}
		msgs.lbEndpoints = msgs.lbEndpoints[len(g.endpoints):]
		setLocality(&coreLocalities[i], g.locality)
		weights[i].Value = uint32(min(total, math.MaxUint32))
		loc := &localities[i]
		loc.Locality = &coreLocalities[i]
		loc.LbEndpoints = lbEndpoints
		loc.LoadBalancingWeight = &weights[i]
		cla.Endpoints[i] = loc
	}
	return cla
}

// localityGroup is one locality's endpoints, sorted by address and port.
type localityGroup struct {
	locality  string
	endpoints []*model.Endpoint
}

// groupByLocality splits endpoints (sorted by address and port) by locality,
// keeping their order within a group; groups are sorted by locality. A mesh
// has few localities, so distinct ones are found by a linear scan.
func groupByLocality(endpoints []*model.Endpoint) []localityGroup {
	var groups []localityGroup
	counts := make([]int, 0, 4)
	index := make([]int, len(endpoints))
	for i, ep := range endpoints {
		g := slices.IndexFunc(groups, func(g localityGroup) bool { return g.locality == ep.Locality })
		if g < 0 {
			g = len(groups)
			groups = append(groups, localityGroup{locality: ep.Locality})
			counts = append(counts, 0)
		}
		index[i] = g
		counts[g]++
	}
	backing := make([]*model.Endpoint, len(endpoints))
	off := 0
	for g := range groups {
		groups[g].endpoints = backing[off : off : off+counts[g]]
		off += counts[g]
	}
	for i, ep := range endpoints {
		groups[index[i]].endpoints = append(groups[index[i]].endpoints, ep)
	}
	slices.SortFunc(groups, func(a, b localityGroup) int { return strings.Compare(a.locality, b.locality) })
	return groups
}

// endpointMessages holds the protos of n endpoints, allocated together.
type endpointMessages struct {
	lbEndpoints []*endpoint.LbEndpoint
	lb          []endpoint.LbEndpoint
	hosts       []endpoint.LbEndpoint_Endpoint
	endpoints   []endpoint.Endpoint
	addresses   []core.Address
	sockets     []core.Address_SocketAddress
	socketAddrs []core.SocketAddress
	ports       []core.SocketAddress_PortValue
	weights     []wrapperspb.UInt32Value // for weights other than the default
	common      *wrapperspb.UInt32Value  // model.DefaultWeight, shared: most endpoints have it
}

// newEndpointMessages allocates the messages of endpoints.
func newEndpointMessages(endpoints []*model.Endpoint) *endpointMessages {
	n, weighted := len(endpoints), 0
	for _, ep := range endpoints {
		if max(ep.Weight, 1) != model.DefaultWeight {
			weighted++
		}
	}
	return &endpointMessages{
		common:      wrapperspb.UInt32(model.DefaultWeight),
		lbEndpoints: make([]*endpoint.LbEndpoint, n),
		lb:          make([]endpoint.LbEndpoint, n),
		hosts:       make([]endpoint.LbEndpoint_Endpoint, n),
		endpoints:   make([]endpoint.Endpoint, n),
		addresses:   make([]core.Address, n),
		sockets:     make([]core.Address_SocketAddress, n),
		socketAddrs: make([]core.SocketAddress, n),
		ports:       make([]core.SocketAddress_PortValue, n),
		weights:     make([]wrapperspb.UInt32Value, weighted),
	}
}

// next fills the next endpoint's messages and returns its LbEndpoint.
func (m *endpointMessages) next(ep *model.Endpoint, weight uint32) *endpoint.LbEndpoint {
	port, sa, sock, addr := &m.ports[0], &m.socketAddrs[0], &m.sockets[0], &m.addresses[0]
	e, host, lb := &m.endpoints[0], &m.hosts[0], &m.lb[0]
	m.ports, m.socketAddrs, m.sockets, m.addresses = m.ports[1:], m.socketAddrs[1:], m.sockets[1:], m.addresses[1:]
	m.endpoints, m.hosts, m.lb = m.endpoints[1:], m.hosts[1:], m.lb[1:]
	w := m.common
	if weight != model.DefaultWeight {
		w = &m.weights[0]
		m.weights = m.weights[1:]
		w.Value = weight
	}

	port.PortValue = ep.EndpointPort
	sa.Protocol = core.SocketAddress_TCP
	sa.Address = ep.Address
	sa.PortSpecifier = port
	sock.SocketAddress = sa
	addr.Address = sock
	e.Address = addr
	host.Endpoint = e
	lb.HostIdentifier = host
	lb.HealthStatus = core.HealthStatus_HEALTHY
	lb.LoadBalancingWeight = w
	return lb
}

// dedupe returns the endpoints sorted by address and port, keeping the first
// of each address:port in input order. Shard endpoints arrive sorted, so the
// sort is skipped when it would not change the order.
func dedupe(endpoints []*model.Endpoint) []*model.Endpoint {
	byAddress := func(a, b *model.Endpoint) int {
		return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.EndpointPort, b.EndpointPort))
	}
	sorted := slices.Clone(endpoints)
	if !slices.IsSortedFunc(sorted, byAddress) {
		slices.SortStableFunc(sorted, byAddress)
	}
	return slices.CompactFunc(sorted, func(a, b *model.Endpoint) bool {
		return a.Address == b.Address && a.EndpointPort == b.EndpointPort
	})
}

// setLocality splits "region/zone/subzone" into l; missing parts stay empty.
func setLocality(l *core.Locality, s string) {
	l.Region, s, _ = strings.Cut(s, "/")
	l.Zone, l.SubZone, _ = strings.Cut(s, "/")
}

package gen

import (
	"cmp"
	"math"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/model"
)

// forEachPort calls f with each port of svc, its cluster name and the
// endpoints serving it; f may reorder the slice it gets, which can be
// endpoints itself. A port without endpoints still gets its call, so a client
// learns "no endpoints" instead of waiting for one.
func forEachPort(svc *model.Service, endpoints []*Endpoint, f func(port uint32, name string, selected []*Endpoint)) {
	if len(svc.Ports) == 1 {
		// The common case: every endpoint serves the one port, so the
		// slice is selected as is, without a copy.
		port := svc.Ports[0]
		selected := endpoints
		if !allServe(endpoints, port.Name) {
			selected = selectPort(endpoints, port.Name)
		}
		f(port.Number, ClusterName(port.Number, svc.Hostname), selected)
		return
	}
	for _, port := range svc.Ports {
		f(port.Number, ClusterName(port.Number, svc.Hostname), selectPort(endpoints, port.Name))
	}
}

func allServe(endpoints []*Endpoint, portName string) bool {
	for _, e := range endpoints {
		if e.portName() != portName {
			return false
		}
	}
	return true
}

func selectPort(endpoints []*Endpoint, portName string) []*Endpoint {
	var selected []*Endpoint
	for _, e := range endpoints {
		if e.portName() == portName {
			selected = append(selected, e)
		}
	}
	return selected
}

// buildLoadAssignments returns one ClusterLoadAssignment message per port of
// svc, keyed by cluster name, from the service's endpoints (all shards): the
// messages whose encodings LoadAssignments assembles.
func buildLoadAssignments(svc *model.Service, endpoints []*model.Endpoint) map[string]*endpoint.ClusterLoadAssignment {
	out := make(map[string]*endpoint.ClusterLoadAssignment, len(svc.Ports))
	forEachPort(svc, plain(endpoints), func(port uint32, name string, selected []*Endpoint) {
		for _, sub := range svc.Policy.GetSubsets() {
			sname := SubsetClusterName(port, sub.GetName(), svc.Hostname)
			out[sname] = loadAssignmentMessage(sname, sortCompact(selectSubset(selected, sub.GetLabels())))
		}
		out[name] = loadAssignmentMessage(name, sortCompact(selected))
	})
	return out
}

// buildLoadAssignment returns the ClusterLoadAssignment message of
// endpoints: one LocalityLbEndpoints per distinct locality. The output is
// sorted (localities by name, endpoints by address and port) so equal inputs
// give equal protos. grpc-go NACKs a ClusterLoadAssignment with a weight-0
// endpoint, a duplicate address or a duplicate locality, with endpoints of
// one locality whose weights sum past MaxUint32, or localities of one
// priority whose weights do, and ignores a locality without weight (gRFC
// A27, xdsresource/unmarshal_eds.go; Envoy refuses the same sums), hence:
//   - endpoint weight 0 becomes 1 (lbWeight);
//   - of several endpoints with one address:port the first (in shard order)
//     wins;
//   - when the endpoints' weights sum past MaxUint32, every weight is
//     scaled down by one factor so that they fit (weightScale), which keeps
//     their ratios and every weight at least 1;
//   - each locality's load_balancing_weight is the sum of its endpoints'
//     weights.
//
// Pushes serve its encoding, assembled by encodeLoadAssignment from
// per-endpoint encodings; the message is the reference those bytes are
// tested against, and what encodeLoadAssignment falls back to for a string
// that is not valid UTF-8 and for scaled weights.
func buildLoadAssignment(name string, endpoints []*model.Endpoint) *endpoint.ClusterLoadAssignment {
	return loadAssignmentMessage(name, sortCompact(plain(endpoints)))
}

// loadAssignmentMessage builds the message of unique (sortCompact's
// output). It allocates per assignment, not per endpoint: the messages of
// all endpoints are carved from a few slices.
func loadAssignmentMessage(name string, unique []*Endpoint) *endpoint.ClusterLoadAssignment {
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	if len(unique) == 0 {
		return cla
	}
	scale, _ := weightScale(unique)
	groups := groupByLocality(unique)
	msgs := newEndpointMessages(unique, scale)
	cla.Endpoints = make([]*endpoint.LocalityLbEndpoints, len(groups))
	localities := make([]endpoint.LocalityLbEndpoints, len(groups))
	coreLocalities := make([]core.Locality, len(groups))
	weights := make([]wrapperspb.UInt32Value, len(groups))
	for i, g := range groups {
		var total uint64
		lbEndpoints := msgs.lbEndpoints[:0:len(g.members)]
		for _, m := range g.members {
			ep := unique[m]
			weight := scale.of(ep.weight)
			total += uint64(weight)
			lbEndpoints = append(lbEndpoints, msgs.next(ep, weight))
		}
		msgs.lbEndpoints = msgs.lbEndpoints[len(g.members):]
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

// scale maps an endpoint's weight (lbWeight's, at least 1) to the weight a
// ClusterLoadAssignment carries: itself, or times num/den when the
// assignment's weights must be scaled down, at least 1.
type scale struct{ num, den uint64 }

func (s scale) of(weight uint32) uint32 {
	if s.den == 0 {
		return weight
	}
	return uint32(max(uint64(weight)*s.num/s.den, 1))
}

// weightScale returns the scale of an assignment of unique: identity when
// the weights (each at least 1) sum to at most MaxUint32, else the factor
// (MaxUint32 - n) / sum, with scaled reporting it. Each scaled weight is
// rounded down, then raised to 1 if it fell to 0, which adds at most 1 per
// endpoint: the scaled weights sum to at most MaxUint32, so every
// locality's sum and the sum of the localities' weights fit too. Weights
// below MaxUint32 each, so w × num fits in a uint64.
func weightScale(unique []*Endpoint) (s scale, scaled bool) {
	var total uint64
	for _, e := range unique {
		total += uint64(e.weight)
	}
	if total <= math.MaxUint32 {
		return scale{}, false
	}
	return scale{num: math.MaxUint32 - uint64(len(unique)), den: total}, true
}

// localityGroup is one locality's endpoints, as indexes into the slice
// groupByLocality split, in its order.
type localityGroup struct {
	locality string
	members  []int32
}

// groupByLocality splits endpoints (sorted by address and port) by locality,
// keeping their order within a group; groups are sorted by locality. A mesh
// has few localities, so distinct ones are found by a linear scan.
func groupByLocality(endpoints []*Endpoint) []localityGroup {
	var groups []localityGroup
	counts := make([]int, 0, 4)
	index := make([]int32, len(endpoints))
	for i, e := range endpoints {
		loc := e.locality()
		g := 0
		for g < len(groups) && groups[g].locality != loc {
			g++
		}
		if g == len(groups) {
			groups = append(groups, localityGroup{locality: loc})
			counts = append(counts, 0)
		}
		index[i] = int32(g)
		counts[g]++
	}
	// Every group's members, one group after the other.
	backing := make([]int32, len(endpoints))
	off := 0
	for g := range groups {
		groups[g].members = backing[off : off : off+counts[g]]
		off += counts[g]
	}
	for i, g := range index {
		groups[g].members = append(groups[g].members, int32(i))
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

// newEndpointMessages allocates the messages of endpoints at scale.
func newEndpointMessages(endpoints []*Endpoint, scale scale) *endpointMessages {
	n, weighted := len(endpoints), 0
	for _, e := range endpoints {
		if scale.of(e.weight) != model.DefaultWeight {
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
func (m *endpointMessages) next(ep *Endpoint, weight uint32) *endpoint.LbEndpoint {
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

	port.PortValue = ep.port
	sa.Protocol = core.SocketAddress_TCP
	sa.Address = ep.address
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

// sortCompact sorts endpoints by address and port in place, stably, and
// drops all but the first of each address:port (in input order). Shard
// endpoints arrive sorted, so the sort is skipped when it would not change
// the order.
func sortCompact(endpoints []*Endpoint) []*Endpoint {
	byAddress := func(a, b *Endpoint) int {
		if c := strings.Compare(a.address, b.address); c != 0 {
			return c
		}
		return cmp.Compare(a.port, b.port)
	}
	if !slices.IsSortedFunc(endpoints, byAddress) {
		slices.SortStableFunc(endpoints, byAddress)
	}
	return slices.CompactFunc(endpoints, func(a, b *Endpoint) bool {
		return a.address == b.address && a.port == b.port
	})
}

// setLocality splits "region/zone/subzone" into l; missing parts stay empty.
func setLocality(l *core.Locality, s string) {
	l.Region, l.Zone, l.SubZone = wire.SplitLocality(s)
}

// LoadAssignments returns the ClusterLoadAssignments of svc, one per port,
// keyed by cluster name, from the service's endpoints (every shard's, as
// the endpoint shards hold them), each the encoding BuildLoadAssignments'
// message would have (an *Encoded), and the names of those whose weights
// were scaled down to fit (weightScale). It takes endpoints over and
// reorders it.
//
// A port's cluster has its endpoints; each subset of the host's
// DestinationRule has a cluster of its own (SubsetClusterName), whose
// assignment holds the port's endpoints whose labels the subset's select
// (hasLabels), as istiod builds a subset's (gRFC A28: a route's weighted
// clusters name them). A subset no endpoint matches has an assignment
// without endpoints: a client calling it learns there is none.
//
// A cluster with locality load balancing (its traffic policy's
// localityLbSetting, localityLBOf) has a Localized assignment: each client
// is sent the form for where it runs.
func LoadAssignments(svc *model.Service, endpoints []*Endpoint) (cla map[string]types.Resource, scaled []string) {
	subsets := svc.Policy.GetSubsets()
	cla = make(map[string]types.Resource, len(svc.Ports)*(1+len(subsets)))
	add := func(name string, selected []*Endpoint, lb *localityLB) {
		var s bool
		cla[name], s = encodeLoadAssignment(name, selected, lb)
		if s {
			scaled = append(scaled, name)
		}
	}
	forEachPort(svc, endpoints, func(port uint32, name string, selected []*Endpoint) {
		// Subsets first: encoding the port's assignment reorders and
		// compacts selected in place.
		for _, sub := range subsets {
			add(SubsetClusterName(port, sub.GetName(), svc.Hostname), selectSubset(selected, sub.GetLabels()),
				localityLBOf(subsetPolicy(svc, sub, port)))
		}
		add(name, selected, localityLBOf(servedPolicy(svc, port)))
	})
	for _, name := range refusedAssignmentNames(svc) {
		cla[name] = Encode(name, &endpoint.ClusterLoadAssignment{ClusterName: name})
	}
	return cla, scaled
}

// refusedAssignmentNames returns the EDS service names the clusters of
// svc that ask for TLS name for a client that cannot apply it
// (RefusedEDSPrefix): each is served an assignment without endpoints, so
// that such a client's calls fail at once instead of after the
// resource-does-not-exist timer.
func refusedAssignmentNames(svc *model.Service) []string {
	var out []string
	for _, p := range svc.Ports {
		if usesTLS(servedPolicy(svc, p.Number).GetTls()) {
			out = append(out, RefusedEDSPrefix+ClusterName(p.Number, svc.Hostname))
		}
		for _, sub := range svc.Policy.GetSubsets() {
			if usesTLS(subsetPolicy(svc, sub, p.Number).GetTls()) {
				out = append(out, RefusedEDSPrefix+SubsetClusterName(p.Number, sub.GetName(), svc.Hostname))
			}
		}
	}
	return out
}

// AssignmentNames returns the names of every ClusterLoadAssignment of svc:
// its clusters' (ClusterNames), then the refused forms of those that ask
// for TLS (RefusedEDSPrefix). The xDS server removes the assignments of a
// service by it.
func AssignmentNames(svc *model.Service) []string {
	return append(ClusterNames(svc), refusedAssignmentNames(svc)...)
}

// LabelsMatter reports whether the labels of svc's endpoints decide what
// clients are sent: its DestinationRule has subsets, or a cluster of it
// fails over by failoverPriority labels.
func LabelsMatter(svc *model.Service) bool {
	if len(svc.Policy.GetSubsets()) > 0 {
		return true
	}
	for _, p := range svc.Ports {
		if lb := localityLBOf(servedPolicy(svc, p.Number)); lb != nil && len(lb.labels) > 0 {
			return true
		}
	}
	return false
}

// selectSubset returns, in a new slice, the endpoints whose labels hold
// every label of selector.
func selectSubset(endpoints []*Endpoint, selector map[string]string) []*Endpoint {
	var out []*Endpoint
	for _, e := range endpoints {
		if hasLabels(e.labels(), selector) {
			out = append(out, e)
		}
	}
	return out
}

// claType is the ClusterLoadAssignment message type.
var claType = (*endpoint.ClusterLoadAssignment)(nil).ProtoReflect().Type()

// encodeLoadAssignment assembles the ClusterLoadAssignment
// buildLoadAssignment builds from endpoints (the same endpoints dropped,
// grouping, order and weights) from the endpoints' LbEndpoint encodings
// (wire.LoadAssignment), and reports whether the weights were scaled down
// to fit. When a string it would encode is not valid UTF-8, or the weights
// need scaling (the encodings carry the unscaled weights), it returns the
// message instead, so that the cache's marshal fails as it does for that
// message, or carries the scaled weights. With lb (not nil), it returns the
// Localized assignment, or, where a string is not valid UTF-8, the
// message. It reorders endpoints in place.
func encodeLoadAssignment(name string, endpoints []*Endpoint, lb *localityLB) (cla types.Resource, scaled bool) {
	unique := sortCompact(endpoints)
	s, scaled := weightScale(unique)
	if lb != nil && len(unique) > 0 && !lb.uniform(unique) {
		if r, ok := localizedAssignment(name, unique, s, scaled, lb); ok {
			return r, scaled
		}
		return loadAssignmentMessage(name, unique), scaled
	}
	if scaled {
		return loadAssignmentMessage(name, unique), true
	}
	groups := groupByLocality(unique)
	localities := make([]wire.Locality, len(groups))
	lbs := make([]string, len(unique))
	for i, g := range groups {
		var weight uint64
		members := lbs[:len(g.members):len(g.members)]
		lbs = lbs[len(g.members):]
		for k, m := range g.members {
			e := unique[m]
			members[k] = e.lb
			weight += uint64(e.weight)
		}
		localities[i] = wire.Locality{Name: g.locality, Weight: uint32(weight), LbEndpoints: members}
	}
	b, ok := wire.LoadAssignment(name, localities)
	if !ok {
		return loadAssignmentMessage(name, unique), false
	}
	return &Encoded{name: name, wire: b, typ: claType}, false
}

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

// encodedEndpoint is what a ClusterLoadAssignment carries of an endpoint,
// the fields of model.Endpoint that buildLoadAssignment reads, with its
// LbEndpoint's encoding (encodeLbEndpoint). It is all the endpoint shards
// keep of an endpoint: labels, service account and workload name reach no
// client. lb is "" where no encoding is needed (buildLoadAssignment) and
// where the address is not valid UTF-8, which proto.Marshal refuses. 48
// bytes: the service port and locality, which most endpoints of a shard
// share, are one shared endpointPlace, and the encoding is a string.
type encodedEndpoint struct {
	address string
	lb      string
	place   *endpointPlace
	port    uint32 // EndpointPort
	weight  uint32 // as the endpoint has it; the LbEndpoint carries max(weight, 1)
}

// endpointPlace is where an endpoint serves: the service port it serves
// (ServicePortName) and its locality. Shared, read-only.
type endpointPlace struct {
	portName string
	locality string
}

func (e *encodedEndpoint) portName() string { return e.place.portName }
func (e *encodedEndpoint) locality() string { return e.place.locality }

// samePlace reports whether a and b serve the same port in the same
// locality.
func samePlace(a, b *endpointPlace) bool { return a == b || *a == *b }

// endpointOf returns ep's encodedEndpoint at place, without an encoding.
func endpointOf(ep *model.Endpoint, place *endpointPlace) encodedEndpoint {
	return encodedEndpoint{
		address: ep.Address,
		place:   place,
		port:    ep.EndpointPort,
		weight:  ep.Weight,
	}
}

// places hands out the endpointPlaces of one shard's update: an endpoint
// gets the place of an earlier one, or of one the last update kept, with
// the same port and locality. It remembers at most maxPlaces, which covers
// a service's ports times its localities in all but odd meshes (past them,
// a place is not shared). It lives on the caller's stack.
type places struct {
	n    int
	list [maxPlaces]*endpointPlace
}

const maxPlaces = 16

// of returns the remembered place equal to here, or a new one.
func (p *places) of(here endpointPlace) *endpointPlace {
	for _, pl := range p.list[:p.n] {
		if *pl == here {
			return pl
		}
	}
	pl := &endpointPlace{portName: here.portName, locality: here.locality}
	p.remember(pl)
	return pl
}

// remember adds pl unless an equal place is remembered or the list is full.
func (p *places) remember(pl *endpointPlace) {
	for _, q := range p.list[:p.n] {
		if samePlace(q, pl) {
			return
		}
	}
	if p.n < maxPlaces {
		p.list[p.n] = pl
		p.n++
	}
}

// plain returns endpoints with no encoding.
func plain(endpoints []*model.Endpoint) []*encodedEndpoint {
	out := make([]*encodedEndpoint, len(endpoints))
	var pl places
	for i, ep := range endpoints {
		e := endpointOf(ep, pl.of(endpointPlace{portName: ep.ServicePortName, locality: ep.Locality}))
		out[i] = &e
	}
	return out
}

// forEachPort calls f with the cluster name of each port of svc and the
// endpoints serving it; f may reorder the slice it gets, which can be
// endpoints itself. A port without endpoints still gets its call, so a client
// learns "no endpoints" instead of waiting for one.
func forEachPort(svc *model.Service, endpoints []*encodedEndpoint, f func(name string, selected []*encodedEndpoint)) {
	if len(svc.Ports) == 1 {
		// The common case: every endpoint serves the one port, so the
		// slice is selected as is, without a copy.
		port := svc.Ports[0]
		selected := endpoints
		if !allServe(endpoints, port.Name) {
			selected = selectPort(endpoints, port.Name)
		}
		f(ClusterName(port.Number, svc.Hostname), selected)
		return
	}
	for _, port := range svc.Ports {
		f(ClusterName(port.Number, svc.Hostname), selectPort(endpoints, port.Name))
	}
}

func allServe(endpoints []*encodedEndpoint, portName string) bool {
	for _, e := range endpoints {
		if e.portName() != portName {
			return false
		}
	}
	return true
}

func selectPort(endpoints []*encodedEndpoint, portName string) []*encodedEndpoint {
	var selected []*encodedEndpoint
	for _, e := range endpoints {
		if e.portName() == portName {
			selected = append(selected, e)
		}
	}
	return selected
}

// buildLoadAssignments returns one ClusterLoadAssignment message per port of
// svc, keyed by cluster name, from the service's endpoints (all shards): the
// messages whose encodings encodeLoadAssignments assembles.
func buildLoadAssignments(svc *model.Service, endpoints []*model.Endpoint) map[string]*endpoint.ClusterLoadAssignment {
	out := make(map[string]*endpoint.ClusterLoadAssignment, len(svc.Ports))
	forEachPort(svc, plain(endpoints), func(name string, selected []*encodedEndpoint) {
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
//   - endpoint weight 0 becomes 1;
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
// that is not valid UTF-8.
func buildLoadAssignment(name string, endpoints []*model.Endpoint) *endpoint.ClusterLoadAssignment {
	return loadAssignmentMessage(name, sortCompact(plain(endpoints)))
}

// loadAssignmentMessage builds the message of unique (sortCompact's
// output). It allocates per assignment, not per endpoint: the messages of
// all endpoints are carved from a few slices.
func loadAssignmentMessage(name string, unique []*encodedEndpoint) *endpoint.ClusterLoadAssignment {
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

// scale maps an endpoint's weight to the weight a ClusterLoadAssignment
// carries: max(weight, 1), times num/den when the assignment's weights
// must be scaled down, at least 1.
type scale struct{ num, den uint64 }

func (s scale) of(weight uint32) uint32 {
	w := uint64(max(weight, 1))
	if s.den == 0 {
		return uint32(w)
	}
	return uint32(max(w*s.num/s.den, 1))
}

// weightScale returns the scale of an assignment of unique: identity when
// the weights (each at least 1) sum to at most MaxUint32, else the factor
// (MaxUint32 - n) / sum, with scaled reporting it. Each scaled weight is
// rounded down, then raised to 1 if it fell to 0, which adds at most 1 per
// endpoint: the scaled weights sum to at most MaxUint32, so every
// locality's sum and the sum of the localities' weights fit too. Weights
// below MaxUint32 each, so w × num fits in a uint64.
func weightScale(unique []*encodedEndpoint) (s scale, scaled bool) {
	var total uint64
	for _, e := range unique {
		total += uint64(max(e.weight, 1))
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
func groupByLocality(endpoints []*encodedEndpoint) []localityGroup {
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
func newEndpointMessages(endpoints []*encodedEndpoint, scale scale) *endpointMessages {
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
func (m *endpointMessages) next(ep *encodedEndpoint, weight uint32) *endpoint.LbEndpoint {
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
func sortCompact(endpoints []*encodedEndpoint) []*encodedEndpoint {
	byAddress := func(a, b *encodedEndpoint) int {
		if c := strings.Compare(a.address, b.address); c != 0 {
			return c
		}
		return cmp.Compare(a.port, b.port)
	}
	if !slices.IsSortedFunc(endpoints, byAddress) {
		slices.SortStableFunc(endpoints, byAddress)
	}
	return slices.CompactFunc(endpoints, func(a, b *encodedEndpoint) bool {
		return a.address == b.address && a.port == b.port
	})
}

// setLocality splits "region/zone/subzone" into l; missing parts stay empty.
func setLocality(l *core.Locality, s string) {
	l.Region, s, _ = strings.Cut(s, "/")
	l.Zone, l.SubZone, _ = strings.Cut(s, "/")
}

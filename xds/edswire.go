package xds

import (
	"strings"
	"unicode/utf8"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/meshbridge/meshbridge/model"
)

// Pre-encoded ClusterLoadAssignments. The endpoint shards encode each
// endpoint's LbEndpoint when the endpoint changes (encodeLbEndpoint); an
// EDS push assembles a service port's ClusterLoadAssignment from those
// bytes (encodeLoadAssignment) and hands the cache an encodedMessage,
// whose marshal returns the assembled bytes. The bytes are exactly what
// proto.Marshal, deterministic or not, gives for the message
// buildLoadAssignment builds from the same endpoints
// (TestEncodedLoadAssignmentMatchesMarshal, FuzzEncodedLoadAssignment): a
// message's fields in field-number order, except that its oneof fields come
// last (protobuf-go's wire order, internal/order.LegacyFieldOrder); unset
// messages and zero scalars are left out, a set oneof scalar (the port) is
// not.

// claType is the ClusterLoadAssignment message type.
var claType = (*endpoint.ClusterLoadAssignment)(nil).ProtoReflect().Type()

// Field numbers of the messages an assignment is assembled from
// (envoy/config/endpoint/v3/endpoint.proto and endpoint_components.proto,
// envoy/config/core/v3/address.proto and base.proto,
// google/protobuf/wrappers.proto).
const (
	claClusterName       protowire.Number = 1 // ClusterLoadAssignment.cluster_name
	claEndpoints         protowire.Number = 2 // ClusterLoadAssignment.endpoints
	localityLocality     protowire.Number = 1 // LocalityLbEndpoints.locality
	localityLbEndpoints  protowire.Number = 2 // LocalityLbEndpoints.lb_endpoints
	localityWeight       protowire.Number = 3 // LocalityLbEndpoints.load_balancing_weight
	coreLocalityRegion   protowire.Number = 1 // Locality.region
	coreLocalityZone     protowire.Number = 2 // Locality.zone
	coreLocalitySubZone  protowire.Number = 3 // Locality.sub_zone
	lbEndpointEndpoint   protowire.Number = 1 // LbEndpoint.endpoint (oneof host_identifier)
	lbEndpointHealth     protowire.Number = 2 // LbEndpoint.health_status
	lbEndpointWeight     protowire.Number = 4 // LbEndpoint.load_balancing_weight
	endpointAddress      protowire.Number = 1 // Endpoint.address
	addressSocket        protowire.Number = 1 // Address.socket_address (oneof address)
	socketAddressAddress protowire.Number = 2 // SocketAddress.address
	socketAddressPort    protowire.Number = 3 // SocketAddress.port_value (oneof port_specifier)
	uint32ValueValue     protowire.Number = 1 // UInt32Value.value
)

// encodeLbEndpoint returns the encoding of the LbEndpoint buildLoadAssignment
// makes of ep: socket address (protocol TCP, the zero value), HEALTHY,
// weight max(ep.weight, 1). It depends only on the address, the port and
// max(weight, 1), so endpoints equal in those share one encoding
// (encodeShard). "" when the address is not valid UTF-8.
func encodeLbEndpoint(ep *encodedEndpoint) string {
	if !utf8.ValidString(ep.address) {
		return ""
	}
	weight := uint64(max(ep.weight, 1))
	port := uint64(ep.port)
	socket := stringSize(socketAddressAddress, ep.address) + protowire.SizeTag(socketAddressPort) + protowire.SizeVarint(port)
	address := messageSize(addressSocket, socket)
	endpointMsg := messageSize(endpointAddress, address)
	weightMsg := protowire.SizeTag(uint32ValueValue) + protowire.SizeVarint(weight)
	size := messageSize(lbEndpointEndpoint, endpointMsg) +
		protowire.SizeTag(lbEndpointHealth) + protowire.SizeVarint(uint64(core.HealthStatus_HEALTHY)) +
		messageSize(lbEndpointWeight, weightMsg)

	// The oneofs (LbEndpoint.endpoint, SocketAddress.port_value) come after
	// the other fields of their message. Built on the stack when it fits
	// (an IPv4 or IPv6 endpoint does), so the string is the one allocation.
	var stack [64]byte
	b := stack[:0]
	if size > len(stack) {
		b = make([]byte, 0, size)
	}
	b = protowire.AppendTag(b, lbEndpointHealth, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(core.HealthStatus_HEALTHY))
	b = appendMessageHeader(b, lbEndpointWeight, weightMsg)
	b = protowire.AppendTag(b, uint32ValueValue, protowire.VarintType)
	b = protowire.AppendVarint(b, weight)
	b = appendMessageHeader(b, lbEndpointEndpoint, endpointMsg)
	b = appendMessageHeader(b, endpointAddress, address)
	b = appendMessageHeader(b, addressSocket, socket)
	b = appendString(b, socketAddressAddress, ep.address)
	b = protowire.AppendTag(b, socketAddressPort, protowire.VarintType)
	b = protowire.AppendVarint(b, port)
	return string(b)
}

// encodeLoadAssignments is buildLoadAssignments over encoded endpoints: one
// assignment per port of svc, keyed by cluster name, and the names of those
// whose weights were scaled down to fit (weightScale). It takes endpoints
// over (endpointShards.encoded returns a fresh slice) and reorders it.
func encodeLoadAssignments(svc *model.Service, endpoints []*encodedEndpoint) (cla map[string]types.Resource, scaled []string) {
	cla = make(map[string]types.Resource, len(svc.Ports))
	forEachPort(svc, endpoints, func(name string, selected []*encodedEndpoint) {
		var s bool
		cla[name], s = encodeLoadAssignment(name, selected)
		if s {
			scaled = append(scaled, name)
		}
	})
	return cla, scaled
}

// encodeLoadAssignment assembles the ClusterLoadAssignment
// buildLoadAssignment builds from endpoints (the same endpoints dropped,
// grouping, order and weights) from the endpoints' LbEndpoint encodings, in
// one allocation of the exact size, and reports whether the weights were
// scaled down to fit. When a string it would encode is not valid UTF-8, or
// the weights need scaling (the encodings carry the unscaled weights), it
// returns the message instead, so that the cache's marshal fails as it does
// for that message, or carries the scaled weights. It reorders endpoints in
// place.
func encodeLoadAssignment(name string, endpoints []*encodedEndpoint) (cla types.Resource, scaled bool) {
	unique := sortCompact(endpoints)
	if _, scaled := weightScale(unique); scaled {
		return loadAssignmentMessage(name, unique), true
	}
	groups := groupByLocality(unique)
	valid := utf8.ValidString(name)
	size := stringSize(claClusterName, name)
	type groupSize struct {
		locality, group int
		weight          uint64
	}
	sizes := make([]groupSize, len(groups))
	for i, g := range groups {
		valid = valid && utf8.ValidString(g.locality)
		region, zone, subZone := splitLocality(g.locality)
		loc := stringSize(coreLocalityRegion, region) + stringSize(coreLocalityZone, zone) + stringSize(coreLocalitySubZone, subZone)
		n := messageSize(localityLocality, loc)
		var weight uint64
		for _, m := range g.members {
			e := unique[m]
			valid = valid && e.lb != ""
			n += messageSize(localityLbEndpoints, len(e.lb))
			weight += uint64(max(e.weight, 1))
		}
		n += messageSize(localityWeight, protowire.SizeTag(uint32ValueValue)+protowire.SizeVarint(weight))
		sizes[i] = groupSize{locality: loc, group: n, weight: weight}
		size += messageSize(claEndpoints, n)
	}
	if !valid {
		return loadAssignmentMessage(name, unique), false
	}

	b := make([]byte, 0, size)
	b = appendString(b, claClusterName, name)
	for i, g := range groups {
		s := sizes[i]
		b = appendMessageHeader(b, claEndpoints, s.group)
		region, zone, subZone := splitLocality(g.locality)
		b = appendMessageHeader(b, localityLocality, s.locality)
		b = appendString(b, coreLocalityRegion, region)
		b = appendString(b, coreLocalityZone, zone)
		b = appendString(b, coreLocalitySubZone, subZone)
		for _, m := range g.members {
			lb := unique[m].lb
			b = appendMessageHeader(b, localityLbEndpoints, len(lb))
			b = append(b, lb...)
		}
		b = appendMessageHeader(b, localityWeight, protowire.SizeTag(uint32ValueValue)+protowire.SizeVarint(s.weight))
		b = protowire.AppendTag(b, uint32ValueValue, protowire.VarintType)
		b = protowire.AppendVarint(b, s.weight)
	}
	return &encodedMessage{name: name, wire: b, typ: claType}, false
}

// splitLocality splits "region/zone/subzone" as setLocality does.
func splitLocality(s string) (region, zone, subZone string) {
	region, s, _ = strings.Cut(s, "/")
	zone, subZone, _ = strings.Cut(s, "/")
	return region, zone, subZone
}

// stringSize is the encoded size of a proto3 string field: nothing when
// empty.
func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// messageSize is the encoded size of a set message field whose content
// takes n bytes.
func messageSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// appendMessageHeader appends the tag and length of a message field whose
// content (n bytes) follows.
func appendMessageHeader(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

package wire

import (
	"strings"
	"unicode/utf8"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// Pre-encoded ClusterLoadAssignments (package xds/gen). The endpoint shards
// encode each endpoint's LbEndpoint when the endpoint changes (LbEndpoint);
// an EDS push assembles a service port's ClusterLoadAssignment from those
// bytes (LoadAssignment). The bytes are exactly what proto.Marshal,
// deterministic or not, gives for the message built from the same fields
// (TestLoadAssignmentMatchesMarshal, FuzzEncoders): a message's fields in
// field-number order, except that its oneof fields come last
// (protobuf-go's wire order, internal/order.LegacyFieldOrder); unset
// messages and zero scalars are left out, a set oneof scalar (the port) is
// not.

// Field numbers of the messages an assignment is assembled from
// (envoy/config/endpoint/v3/endpoint.proto and endpoint_components.proto,
// envoy/config/core/v3/address.proto and base.proto,
// google/protobuf/wrappers.proto). Of each message only these fields are
// set; TestEncodersKnowEveryField lists the others.
const (
	claClusterName       protowire.Number = 1 // ClusterLoadAssignment.cluster_name
	claEndpoints         protowire.Number = 2 // ClusterLoadAssignment.endpoints
	localityLocality     protowire.Number = 1 // LocalityLbEndpoints.locality
	localityLbEndpoints  protowire.Number = 2 // LocalityLbEndpoints.lb_endpoints
	localityWeight       protowire.Number = 3 // LocalityLbEndpoints.load_balancing_weight
	localityPriority     protowire.Number = 5 // LocalityLbEndpoints.priority
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

// LbEndpoint returns the encoding of the LbEndpoint
//
//	{endpoint: {address: {socket_address: {address, port_value: port}}},
//	 health_status: HEALTHY, load_balancing_weight: {value: weight}}
//
// (protocol TCP, the zero value), "" when address is not valid UTF-8,
// which proto.Marshal refuses. Built on the stack when it fits (an IPv4 or
// IPv6 endpoint does), so the string is its one allocation.
func LbEndpoint(address string, port, weight uint32) string {
	if !utf8.ValidString(address) {
		return ""
	}
	socket := stringSize(socketAddressAddress, address) + protowire.SizeTag(socketAddressPort) + protowire.SizeVarint(uint64(port))
	addressMsg := messageSize(addressSocket, socket)
	endpointMsg := messageSize(endpointAddress, addressMsg)
	weightMsg := uint32ValueSize(weight)
	size := messageSize(lbEndpointEndpoint, endpointMsg) +
		protowire.SizeTag(lbEndpointHealth) + protowire.SizeVarint(uint64(core.HealthStatus_HEALTHY)) +
		messageSize(lbEndpointWeight, weightMsg)

	// The oneofs (LbEndpoint.endpoint, SocketAddress.port_value) come after
	// the other fields of their message.
	var stack [64]byte
	b := stack[:0]
	if size > len(stack) {
		b = make([]byte, 0, size)
	}
	b = protowire.AppendTag(b, lbEndpointHealth, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(core.HealthStatus_HEALTHY))
	b = appendMessageHeader(b, lbEndpointWeight, weightMsg)
	b = appendVarintField(b, uint32ValueValue, uint64(weight))
	b = appendMessageHeader(b, lbEndpointEndpoint, endpointMsg)
	b = appendMessageHeader(b, endpointAddress, addressMsg)
	b = appendMessageHeader(b, addressSocket, socket)
	b = appendString(b, socketAddressAddress, address)
	b = protowire.AppendTag(b, socketAddressPort, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(port))
	return string(b)
}

// uint32ValueSize is the encoded size of a google.protobuf.UInt32Value
// holding v.
func uint32ValueSize(v uint32) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(uint32ValueValue) + protowire.SizeVarint(uint64(v))
}

// Locality is one LocalityLbEndpoints of an assignment.
type Locality struct {
	// Name is "region/zone/subzone" (SplitLocality).
	Name string
	// Weight is the locality's load_balancing_weight.
	Weight uint32
	// Priority is the locality's priority (0, the highest, is omitted).
	Priority uint32
	// LbEndpoints are the encodings (LbEndpoint) of its endpoints, in
	// order.
	LbEndpoints []string
}

// LoadAssignment returns the encoding of the ClusterLoadAssignment
//
//	{cluster_name: clusterName, endpoints: [for each locality:
//	 {locality: {region, zone, sub_zone}, lb_endpoints, load_balancing_weight: {value: weight}, priority}]}
//
// in one allocation of the exact size, or false when a string it would
// encode is not valid UTF-8 or an LbEndpoint is "" (LbEndpoint's invalid
// address): proto.Marshal refuses such a message.
func LoadAssignment(clusterName string, localities []Locality) ([]byte, bool) {
	if !utf8.ValidString(clusterName) {
		return nil, false
	}
	size := stringSize(claClusterName, clusterName)
	for _, l := range localities {
		if !utf8.ValidString(l.Name) {
			return nil, false
		}
		n, _ := localitySize(l)
		for _, lb := range l.LbEndpoints {
			if lb == "" {
				return nil, false
			}
		}
		size += messageSize(claEndpoints, n)
	}
	b := make([]byte, 0, size)
	b = appendString(b, claClusterName, clusterName)
	for _, l := range localities {
		n, loc := localitySize(l)
		b = appendMessageHeader(b, claEndpoints, n)
		region, zone, subZone := SplitLocality(l.Name)
		b = appendMessageHeader(b, localityLocality, loc)
		b = appendString(b, coreLocalityRegion, region)
		b = appendString(b, coreLocalityZone, zone)
		b = appendString(b, coreLocalitySubZone, subZone)
		for _, lb := range l.LbEndpoints {
			b = appendMessageHeader(b, localityLbEndpoints, len(lb))
			b = append(b, lb...)
		}
		b = appendMessageHeader(b, localityWeight, uint32ValueSize(l.Weight))
		b = appendVarintField(b, uint32ValueValue, uint64(l.Weight))
		if l.Priority != 0 {
			b = appendVarintField(b, localityPriority, uint64(l.Priority))
		}
	}
	return b, true
}

// localitySize returns the encoded size of l's LocalityLbEndpoints and of
// its Locality message.
func localitySize(l Locality) (n, locality int) {
	region, zone, subZone := SplitLocality(l.Name)
	locality = stringSize(coreLocalityRegion, region) + stringSize(coreLocalityZone, zone) + stringSize(coreLocalitySubZone, subZone)
	n = messageSize(localityLocality, locality)
	for _, lb := range l.LbEndpoints {
		n += messageSize(localityLbEndpoints, len(lb))
	}
	n += messageSize(localityWeight, uint32ValueSize(l.Weight))
	if l.Priority != 0 {
		n += protowire.SizeTag(localityPriority) + protowire.SizeVarint(uint64(l.Priority))
	}
	return n, locality
}

// SplitLocality splits "region/zone/subzone" into its parts; missing parts
// are empty, and a fourth part stays in subZone.
func SplitLocality(s string) (region, zone, subZone string) {
	region, s, _ = strings.Cut(s, "/")
	zone, subZone, _ = strings.Cut(s, "/")
	return region, zone, subZone
}

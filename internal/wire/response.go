package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// xDS responses encoded once and shared (package xds/ads). A push encodes
// one response body per type, version, resource set and removals, and every
// ADS stream it goes to sends those bytes with its own nonce added at send
// time (Response.Parts). The bytes with a nonce are exactly what
// proto.Marshal, deterministic or not, gives for the message with that
// nonce (TestResponseMatchesMarshal): the fields in field-number order
// (the messages have no oneof), empty strings left out, an element of a
// repeated field written even when empty, a set message written even when
// empty. The nonce (field 5) sits between type_url (4) and
// DeltaDiscoveryResponse.removed_resources (6), so a response is held as
// the fields before the nonce (head) and those after it (tail).

// Field numbers of the response messages (envoy/service/discovery/v3/
// discovery.proto, google/protobuf/any.proto). Of each message only these
// fields are set; TestEncodersKnowEveryField lists the others.
const (
	discoveryVersionInfo   protowire.Number = 1 // DiscoveryResponse.version_info
	discoveryResources     protowire.Number = 2 // DiscoveryResponse.resources
	discoveryTypeURL       protowire.Number = 4 // DiscoveryResponse.type_url
	discoveryNonce         protowire.Number = 5 // DiscoveryResponse.nonce
	deltaSystemVersionInfo protowire.Number = 1 // DeltaDiscoveryResponse.system_version_info
	deltaResources         protowire.Number = 2 // DeltaDiscoveryResponse.resources
	deltaTypeURL           protowire.Number = 4 // DeltaDiscoveryResponse.type_url
	deltaNonce             protowire.Number = 5 // DeltaDiscoveryResponse.nonce
	deltaRemovedResources  protowire.Number = 6 // DeltaDiscoveryResponse.removed_resources
	resourceVersion        protowire.Number = 1 // Resource.version
	resourceResource       protowire.Number = 2 // Resource.resource
	resourceName           protowire.Number = 3 // Resource.name
	anyTypeURL             protowire.Number = 1 // Any.type_url
	anyValue               protowire.Number = 2 // Any.value
)

// Both responses carry their nonce under the same number, which Parts
// relies on (this fails to compile otherwise).
var _ [0]struct{} = [discoveryNonce - deltaNonce]struct{}{}

// Response is an xDS response encoded once without its nonce: a
// DiscoveryResponse (SotWResponse) or a DeltaDiscoveryResponse
// (DeltaResponse). It is immutable and safe for concurrent use; every
// stream the response goes to adds its own nonce (Parts).
type Response struct {
	// head holds the fields numbered before the nonce (1 to 4), tail those
	// after it (DeltaDiscoveryResponse.removed_resources). Never written
	// after the constructor returns; head's capacity is its length, so an
	// append to it copies.
	head, tail []byte
}

// SotWResponse encodes the DiscoveryResponse
//
//	{version_info: version, type_url: typeURL,
//	 resources: [for each v in values: Any{type_url: typeURL, value: v}]}
//
// in one allocation of the exact size (and the Response). Each value is
// the encoding of one resource of type typeURL, taken as is. It returns nil
// when version or typeURL is not valid UTF-8: proto.Marshal refuses such a
// message.
func SotWResponse(version, typeURL string, values [][]byte) *Response {
	if !utf8.ValidString(version) || !utf8.ValidString(typeURL) {
		return nil
	}
	anyType := stringSize(anyTypeURL, typeURL)
	size := stringSize(discoveryVersionInfo, version) + stringSize(discoveryTypeURL, typeURL)
	for _, v := range values {
		size += messageSize(discoveryResources, anyType+bytesSize(anyValue, v))
	}
	b := make([]byte, 0, size)
	b = appendString(b, discoveryVersionInfo, version)
	for _, v := range values {
		b = appendMessageHeader(b, discoveryResources, anyType+bytesSize(anyValue, v))
		b = appendString(b, anyTypeURL, typeURL)
		b = appendBytes(b, anyValue, v)
	}
	b = appendString(b, discoveryTypeURL, typeURL)
	return &Response{head: b[:len(b):len(b)]}
}

// DeltaResource is one resource of a DeltaResponse.
type DeltaResource struct {
	// Name is the resource's name (Resource.name).
	Name string
	// Version is the resource's version (Resource.version).
	Version string
	// Value is the encoding of the resource (Resource.resource.value),
	// taken as is.
	Value []byte
}

// DeltaResponse encodes the DeltaDiscoveryResponse
//
//	{system_version_info: version, type_url: typeURL,
//	 resources: [for each r in resources: Resource{name: r.Name, version: r.Version,
//	             resource: Any{type_url: typeURL, value: r.Value}}],
//	 removed_resources: removed}
//
// in one allocation of the exact size (and the Response). Every Resource
// has its resource set, even to an empty Any. It returns nil when a string
// it would encode is not valid UTF-8: proto.Marshal refuses such a message.
func DeltaResponse(version, typeURL string, resources []DeltaResource, removed []string) *Response {
	if !utf8.ValidString(version) || !utf8.ValidString(typeURL) {
		return nil
	}
	anyType := stringSize(anyTypeURL, typeURL)
	headSize := stringSize(deltaSystemVersionInfo, version) + stringSize(deltaTypeURL, typeURL)
	for _, r := range resources {
		if !utf8.ValidString(r.Name) || !utf8.ValidString(r.Version) {
			return nil
		}
		n, _ := deltaResourceSize(r, anyType)
		headSize += messageSize(deltaResources, n)
	}
	tailSize := 0
	for _, name := range removed {
		if !utf8.ValidString(name) {
			return nil
		}
		// An element of a repeated string is written even when empty.
		tailSize += protowire.SizeTag(deltaRemovedResources) + protowire.SizeBytes(len(name))
	}
	b := make([]byte, 0, headSize+tailSize)
	b = appendString(b, deltaSystemVersionInfo, version)
	for _, r := range resources {
		n, anyMsg := deltaResourceSize(r, anyType)
		b = appendMessageHeader(b, deltaResources, n)
		b = appendString(b, resourceVersion, r.Version)
		b = appendMessageHeader(b, resourceResource, anyMsg)
		b = appendString(b, anyTypeURL, typeURL)
		b = appendBytes(b, anyValue, r.Value)
		b = appendString(b, resourceName, r.Name)
	}
	b = appendString(b, deltaTypeURL, typeURL)
	for _, name := range removed {
		b = protowire.AppendTag(b, deltaRemovedResources, protowire.BytesType)
		b = protowire.AppendString(b, name)
	}
	return &Response{head: b[:headSize:headSize], tail: b[headSize:]}
}

// deltaResourceSize returns the encoded size of r's Resource and of its
// Any, given the size of the Any's type_url field.
func deltaResourceSize(r DeltaResource, anyType int) (n, anyMsg int) {
	anyMsg = anyType + bytesSize(anyValue, r.Value)
	n = stringSize(resourceVersion, r.Version) + messageSize(resourceResource, anyMsg) + stringSize(resourceName, r.Name)
	return n, anyMsg
}

// bytesSize is the encoded size of a proto3 bytes field: nothing when
// empty.
func bytesSize(num protowire.Number, v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(v))
}

// appendBytes appends a proto3 bytes field, omitted when empty.
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// Size returns the encoded size of the response with nonce, the length of
// Parts' head and rest.
func (r *Response) Size(nonce string) int {
	return len(r.head) + stringSize(discoveryNonce, nonce) + len(r.tail)
}

// Parts returns the response with nonce as two pieces: head, the shared
// fields before the nonce (never write it: every stream sends it), and
// rest, the nonce field followed by the fields after it, freshly allocated
// for this call (nil when empty: no nonce and no removals). head followed
// by rest is exactly proto.Marshal, deterministic or not, of the message
// with that nonce (an empty nonce is left out). nonce must be valid UTF-8
// (proto.Marshal refuses the message otherwise): Parts panics if it is
// not, rather than send bytes a client cannot decode.
func (r *Response) Parts(nonce string) (head, rest []byte) {
	if n := stringSize(discoveryNonce, nonce) + len(r.tail); n > 0 {
		rest = r.AppendRest(make([]byte, 0, n), nonce)
	}
	return r.head, rest
}

// Head returns Parts' head: the shared fields before the nonce (never
// write it).
func (r *Response) Head() []byte { return r.head }

// AppendRest appends Parts' rest for nonce to dst (a caller's buffer,
// which saves Parts' allocation) and returns it; the rules are Parts'.
func (r *Response) AppendRest(dst []byte, nonce string) []byte {
	if !utf8.ValidString(nonce) {
		panic("wire: Response.Parts: nonce is not valid UTF-8")
	}
	dst = appendString(dst, discoveryNonce, nonce)
	return append(dst, r.tail...)
}

// Package wire holds meshbridge's hand-written protobuf and JSON encoders:
// the encodings it computes per instance, where the reflective ones would
// take most of the time and memory of a translation or an EDS push
// (docs/benchmarks.md P1 and P6).
//
//  1. AppendWorkloadEntry: the bytes of proto.MarshalOptions{Deterministic:
//     true} for a WorkloadEntry, the content hash's preimage
//     (translate.ContentSum).
//  2. ServiceEntryJSONSize, WorkloadEntryJSONSize, ObjectJSONSize: the
//     length of an object's JSON as the Kubernetes writer and `meshbridge
//     translate` render it (compact protojson spec inside encoding/json),
//     without encoding it (translate's inline size limit).
//  3. LbEndpoint and LoadAssignment: an EDS LbEndpoint and a
//     ClusterLoadAssignment assembled from LbEndpoint encodings, byte for
//     byte what proto.Marshal gives for the message (xds/gen).
//  4. SotWResponse and DeltaResponse: a DiscoveryResponse or a
//     DeltaDiscoveryResponse encoded once, without its nonce, as a
//     Response every ADS stream it goes to shares; Response.Parts adds a
//     stream's nonce, and the shared head and the stream's rest are byte
//     for byte what proto.Marshal gives for the message with that nonce
//     (xds/ads's Codec sends them).
//
// Rules:
//   - Each encoder equals its reference (proto.Marshal, protojson inside
//     encoding/json) on every input it accepts, and says so (ok false, ""
//     for an LbEndpoint, a nil Response) on an input it does not encode
//     exactly: invalid UTF-8, unknown fields, an unknown enum value. The
//     caller then uses the reference. FuzzEncoders and the tests beside each encoder hold
//     them to it.
//   - Each encoder knows the fields of its messages by name (fields.go).
//     A message whose descriptor has a field the encoder does not know (a
//     field added by a newer istio.io/api or go-control-plane) is never
//     encoded by hand: the encoder declines it, so a new field is never
//     silently left out of a content hash or a size, and
//     TestEncodersKnowEveryField fails until the encoder is taught it.
//
// Not here: what to encode (translate, xds/gen), sending it (xds/ads) and
// the shapes of the messages (istio.io/api, go-control-plane).
package wire

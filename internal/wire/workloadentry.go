package wire

import (
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	networking "istio.io/api/networking/v1"
)

// Field numbers of WorkloadEntry (istio.io/api networking/v1alpha3
// workload_entry.proto).
const (
	weAddress        protowire.Number = 1
	wePorts          protowire.Number = 2
	weLabels         protowire.Number = 3
	weNetwork        protowire.Number = 4
	weLocality       protowire.Number = 5
	weWeight         protowire.Number = 6
	weServiceAccount protowire.Number = 7
	mapKey           protowire.Number = 1 // a map entry's key
	mapValue         protowire.Number = 2 // a map entry's value
)

// AppendWorkloadEntry appends to b the bytes
// proto.MarshalOptions{Deterministic: true} produces for we (fields in
// number order, zero scalars omitted, map entries sorted by key with key
// and value always present), without reflection: a WorkloadEntry is hashed
// per instance, and the reflective marshal would take about half of a
// translation's time (translate's BenchmarkTranslate). It returns b
// unchanged and false for what it does not encode exactly as the marshal
// does: unknown fields, invalid UTF-8 (which the marshal refuses), and a
// WorkloadEntry of an istio.io/api with fields it does not know
// (fields.go).
func AppendWorkloadEntry(b []byte, we *networking.WorkloadEntry) ([]byte, bool) {
	if !workloadEntryKnown || !plainWorkloadEntry(we) {
		return b, false
	}
	b = appendString(b, weAddress, we.Address)
	var keyBuf [8]string
	keys := keyBuf[:0]
	for k := range we.Ports {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := uint64(we.Ports[k])
		b = appendMessageHeader(b, wePorts, 1+protowire.SizeBytes(len(k))+1+protowire.SizeVarint(v))
		b = protowire.AppendTag(b, mapKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, mapValue, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	}
	keys = keys[:0]
	for k := range we.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := we.Labels[k]
		b = appendMessageHeader(b, weLabels, 1+protowire.SizeBytes(len(k))+1+protowire.SizeBytes(len(v)))
		b = protowire.AppendTag(b, mapKey, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, mapValue, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	b = appendString(b, weNetwork, we.Network)
	b = appendString(b, weLocality, we.Locality)
	b = appendVarintField(b, weWeight, uint64(we.Weight))
	return appendString(b, weServiceAccount, we.ServiceAccount), true
}

// plainWorkloadEntry reports whether we has no unknown fields and valid
// UTF-8 everywhere.
func plainWorkloadEntry(we *networking.WorkloadEntry) bool {
	if we == nil || len(we.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(we.Address) || !utf8.ValidString(we.Network) ||
		!utf8.ValidString(we.Locality) || !utf8.ValidString(we.ServiceAccount) {
		return false
	}
	for k := range we.Ports {
		if !utf8.ValidString(k) {
			return false
		}
	}
	for k, v := range we.Labels {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// ContentHash returns the hex SHA-256 of spec, labels and annotations: the
// value of the meshbridge.io/content-hash annotation (docs/design.md §3),
// which the store and the Kubernetes writer compare to skip no-op writes and
// MCP sends as Metadata.Version. annotations are meshbridge's own (e.g.
// meshbridge.io/dubbo-methods), never the content hash itself: an object
// whose annotation changes gets a new hash, so the change is stored,
// written and sent. spec is encoded with proto.MarshalOptions{Deterministic:
// true} (map entries sorted); labels, then annotations, follow, each map
// prefixed with its size and sorted by key, each string length-prefixed, so
// that no two inputs share an encoding. The encoding is stable for one
// build; it is not a cross-version wire format.
//
// The preimage is built in one pooled buffer and hashed with one Sum256 call:
// the hash is computed for every object of every translation (P1 cold sync in
// docs/benchmarks.md), so it avoids a digest, a marshal buffer and a []byte
// per label.
func ContentHash(labels, annotations map[string]string, spec proto.Message) string {
	return ContentSum(labels, annotations, spec).String()
}

// ContentSum is ContentHash's SHA-256 sum, as objects keep it
// (model.Meta.Hash).
func ContentSum(labels, annotations map[string]string, spec proto.Message) model.Hash {
	bp := preimages.Get().(*[]byte)
	b := (*bp)[:0]
	// The spec's length prefix is known only after marshalling: reserve the
	// longest varint and write the prefix right-aligned in it.
	b = append(b, make([]byte, binary.MaxVarintLen64)...)
	if spec != nil {
		// Marshal of an istio.io/api message cannot fail (no required fields,
		// valid UTF-8 ensured by the caller's inputs); an error still hashes
		// deterministically as an empty spec.
		var err error
		if we, ok := spec.(*networking.WorkloadEntry); ok && plainWorkloadEntry(we) {
			b = appendWorkloadEntry(b, we)
		} else if b, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(b, spec); err != nil {
			b = b[:binary.MaxVarintLen64]
		}
	}
	n := len(b) - binary.MaxVarintLen64
	var prefix [binary.MaxVarintLen64]byte
	p := binary.PutUvarint(prefix[:], uint64(n))
	start := binary.MaxVarintLen64 - p
	copy(b[start:], prefix[:p])
	b = appendStringMap(b, labels)
	b = appendStringMap(b, annotations)
	sum := sha256.Sum256(b[start:])
	if cap(b) <= 64<<10 { // keep no huge inline-mode buffer alive
		*bp = b
		preimages.Put(bp)
	}
	return sum
}

// appendStringMap appends m's size, then its entries sorted by key, each
// key and value length-prefixed.
func appendStringMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	var keyBuf [8]string
	keys := keyBuf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendField(b, k)
		b = appendField(b, m[k])
	}
	return b
}

// preimages pools ContentHash's buffers.
var preimages = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendField appends s with its uvarint length prefix.
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// plainWorkloadEntry reports whether appendWorkloadEntry encodes we exactly
// as the deterministic proto marshal does: no unknown fields and valid UTF-8
// everywhere (the marshal fails on invalid UTF-8, which hashes as an empty
// spec).
func plainWorkloadEntry(we *networking.WorkloadEntry) bool {
	if len(we.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(we.Address) || !utf8.ValidString(we.Network) ||
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

// appendWorkloadEntry appends the bytes proto.MarshalOptions{Deterministic:
// true} produces for we (fields in number order, zero scalars omitted, map
// entries sorted by key with key and value always present), without
// reflection: a WorkloadEntry is hashed per instance, and the reflective
// marshal would take about half of Translate's time (BenchmarkTranslate).
// TestAppendWorkloadEntry holds it to the marshal.
func appendWorkloadEntry(b []byte, we *networking.WorkloadEntry) []byte {
	b = appendStringField(b, 1, we.Address)
	var keyBuf [8]string
	keys := keyBuf[:0]
	for k := range we.Ports {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := uint64(we.Ports[k])
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(len(k))+1+protowire.SizeVarint(v)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	}
	keys = keys[:0]
	for k := range we.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := we.Labels[k]
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(len(k))+1+protowire.SizeBytes(len(v))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	b = appendStringField(b, 4, we.Network)
	b = appendStringField(b, 5, we.Locality)
	if we.Weight != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(we.Weight))
	}
	return appendStringField(b, 7, we.ServiceAccount)
}

// appendStringField appends a proto3 string field, omitted when empty.
func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// WorkloadEntryName returns "<seName>-<first 10 hex digits of
// sha256(registry + "/" + instanceID)>" (README "Naming conventions"):
// stable for as long as the registry keeps the instance ID, and distinct per
// registry.
func WorkloadEntryName(seName, registry, instanceID string) string {
	var pre [128]byte // most preimages: on the stack
	sum := sha256.Sum256(append(append(append(pre[:0], registry...), '/'), instanceID...))
	var digits [10]byte
	hex.Encode(digits[:], sum[:5])
	var b strings.Builder
	b.Grow(len(seName) + 1 + len(digits))
	b.WriteString(seName)
	b.WriteByte('-')
	b.Write(digits[:])
	return b.String()
}

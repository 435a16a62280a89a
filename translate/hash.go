package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire"
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
		// A WorkloadEntry, hashed per instance, goes through the
		// hand-written encoder, which gives the marshal's bytes.
		var err error
		encoded := false
		if we, ok := spec.(*networking.WorkloadEntry); ok {
			b, encoded = wire.AppendWorkloadEntry(b, we)
		}
		if !encoded {
			if b, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(b, spec); err != nil {
				b = b[:binary.MaxVarintLen64]
			}
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

// WorkloadEntryName returns "<seName>-<first 10 hex digits of
// sha256(registry + "/" + instanceID)>" (README "Naming conventions"):
// stable for as long as the registry keeps the instance ID, and distinct per
// registry.
func WorkloadEntryName(seName, registry, instanceID string) string {
	id := WorkloadEntryID(registry, instanceID)
	var digits [10]byte
	hex.Encode(digits[:], id[:])
	var b strings.Builder
	b.Grow(len(seName) + 1 + len(digits))
	b.WriteString(seName)
	b.WriteByte('-')
	b.Write(digits[:])
	return b.String()
}

// WorkloadEntryID returns the first 5 bytes of sha256(registry + "/" +
// instanceID), whose hex ends a WorkloadEntry's name (WorkloadEntryName);
// model.WorkloadEntry keeps them instead of the name.
func WorkloadEntryID(registry, instanceID string) [5]byte {
	var pre [128]byte // most preimages: on the stack
	sum := sha256.Sum256(append(append(append(pre[:0], registry...), '/'), instanceID...))
	return [5]byte(sum[:5])
}

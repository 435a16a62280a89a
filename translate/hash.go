package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
)

// ContentHash returns the hex SHA-256 of spec and labels: the value of the
// meshbridge.io/content-hash annotation (DESIGN.md §3), which the store and the
// Kubernetes writer compare to skip no-op writes and MCP sends as
// Metadata.Version. spec is encoded with proto.MarshalOptions{Deterministic:
// true} (map entries sorted); labels are appended sorted by key, each field
// length-prefixed so that no two inputs share an encoding. The encoding is
// stable for one build; it is not a cross-version wire format.
func ContentHash(labels map[string]string, spec proto.Message) string {
	h := sha256.New()
	var b []byte
	if spec != nil {
		// Marshal of an istio.io/api message cannot fail (no required fields,
		// valid UTF-8 ensured by the caller's inputs); an error still hashes
		// deterministically as an empty spec.
		b, _ = proto.MarshalOptions{Deterministic: true}.Marshal(spec)
	}
	writeField(h, b)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		writeField(h, []byte(k))
		writeField(h, []byte(labels[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeField(h interface{ Write([]byte) (int, error) }, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// WorkloadEntryName returns "<seName>-<first 10 hex digits of
// sha256(registry + "/" + instanceID)>" (issue 2): stable for as long as the
// registry keeps the instance ID, and distinct per registry.
func WorkloadEntryName(seName, registry, instanceID string) string {
	sum := sha256.Sum256([]byte(registry + "/" + instanceID))
	return seName + "-" + hex.EncodeToString(sum[:])[:10]
}

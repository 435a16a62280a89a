package model

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
)

// Kind names the type of a config object. meshbridge produces two kinds, both in
// the API group networking.istio.io, version v1.
type Kind string

const (
	// KindServiceEntry is networking.istio.io/v1 ServiceEntry.
	KindServiceEntry Kind = "ServiceEntry"
	// KindWorkloadEntry is networking.istio.io/v1 WorkloadEntry.
	KindWorkloadEntry Kind = "WorkloadEntry"
	// KindDestinationRule is networking.istio.io/v1 DestinationRule: read
	// from policy.files and served in clusters (package policy), never
	// stored nor written.
	KindDestinationRule Kind = "DestinationRule"
)

// Group and Version are the API group and version of every kind meshbridge emits.
const (
	Group      = "networking.istio.io"
	Version    = "v1"
	APIVersion = Group + "/" + Version
)

// Ownership and selection labels and annotations. They are a contract with
// operators and with the Kubernetes writer's garbage collector: an object
// without LabelManagedBy=ManagedByValue is never ours.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "meshbridge"
	LabelRegistry  = "meshbridge.io/registry"
	// LabelInstance is on every object of a bridge whose output.instance is
	// set, with that value: bridges sharing a namespace under different
	// instances own disjoint objects.
	LabelInstance  = "meshbridge.io/instance"
	LabelService   = "meshbridge.io/service"
	LabelRevision  = "istio.io/rev"
	AnnotationHash = "meshbridge.io/content-hash"
	// AnnotationDubboMethods is on the ServiceEntry of a Dubbo service: the
	// sorted, comma-joined union of its providers' methods.
	AnnotationDubboMethods = "meshbridge.io/dubbo-methods"
	// AnnotationDubboDefaults is on the ServiceEntry of a Dubbo service
	// whose providers declare call defaults: RouteDefaults.String.
	AnnotationDubboDefaults = "meshbridge.io/dubbo-defaults"
	ReservedPrefixMB        = "meshbridge.io/"
	ReservedPrefixApp       = "app.kubernetes.io/"
)

// ConfigKey identifies one object in the aggregate store.
type ConfigKey struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String renders the key as "Kind/namespace/name".
func (k ConfigKey) String() string {
	return string(k.Kind) + "/" + k.Namespace + "/" + k.Name
}

// Meta is the Kubernetes-style metadata of a config object.
type Meta struct {
	Kind      Kind
	Name      string
	Namespace string
	Labels    map[string]string
	// Annotations are the object's own annotations, without the content
	// hash (Hash); nil when it has none. OutputAnnotations gives both, as
	// Kubernetes and MCP are sent them.
	Annotations map[string]string
	// Hash is the object's content hash (translate.ContentHash: SHA-256
	// of spec, labels and annotations), sent in hex as the
	// meshbridge.io/content-hash annotation; zero for an object that
	// carries none. Kept out of Annotations, and raw, so an object needs no
	// map and no string for it (32 bytes in the object, not a map or an
	// 80-byte hex string per WorkloadEntry, so per instance).
	Hash Hash
	// ResourceVersion is set by the store on every mutation: its mutation
	// counter, which only grows; 0 on an object never stored. On Update and
	// Delete, a non-zero value must equal the stored one (optimistic
	// concurrency). A number, not a string: 16 bytes less per object, and
	// the store holds one WorkloadEntry per instance.
	ResourceVersion uint64
	// Observed is when the registry observation that caused this write was
	// made (registries.Snapshot.Observed), set by the sync step on the
	// objects it writes while applying a snapshot; nil for a write no
	// observation caused (a hold-down or delete guard ending, a registry
	// added or removed). The objects written for one observation share one
	// value: read-only. The ServiceEntry controller starts the PushRequest
	// of an event at it, so convergence is measured from the registry. It
	// is bookkeeping, not content: no content hash covers it, and neither
	// Kubernetes nor MCP is sent it.
	Observed *time.Time
}

// Config is one object of the aggregate store: metadata plus an istio.io/api
// spec (*networking.ServiceEntry or *networking.WorkloadEntry). Read-only once
// shared; see the package rules.
type Config struct {
	Meta
	Spec proto.Message
}

// Key returns the object's ConfigKey.
func (c *Config) Key() ConfigKey {
	return ConfigKey{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

// Hash is a content hash, a SHA-256 sum; the zero Hash is none.
type Hash [32]byte

// String returns h in hex (64 digits), "" for the zero Hash.
func (h Hash) String() string {
	if h.IsZero() {
		return ""
	}
	return hex.EncodeToString(h[:])
}

// SumHash returns the SHA-256 of b as a Hash.
func SumHash(b []byte) Hash { return sha256.Sum256(b) }

// IsZero reports whether h is the zero Hash (none).
func (h Hash) IsZero() bool { return h == Hash{} }

// ContentHash returns the object's content hash (Meta.Hash) in hex, the
// value of its meshbridge.io/content-hash annotation; "" when it carries
// none. It allocates: compare Meta.Hash where the hex is not needed.
func (c *Config) ContentHash() string {
	return c.Hash.String()
}

// OutputAnnotations returns the annotations the object is written with:
// Annotations plus, when Hash is set, meshbridge.io/content-hash. The map
// is new when Hash is set (the caller may keep it); else it is Annotations
// itself, read-only.
func (m *Meta) OutputAnnotations() map[string]string {
	if m.Hash.IsZero() {
		return m.Annotations
	}
	out := make(map[string]string, len(m.Annotations)+1)
	for k, v := range m.Annotations {
		out[k] = v
	}
	out[AnnotationHash] = m.Hash.String()
	return out
}

// ServiceEntry returns the spec as a ServiceEntry, or nil for another kind.
func (c *Config) ServiceEntry() *networking.ServiceEntry {
	se, _ := c.Spec.(*networking.ServiceEntry)
	return se
}

// WorkloadEntry returns the spec as a WorkloadEntry, or nil for another kind.
func (c *Config) WorkloadEntry() *networking.WorkloadEntry {
	we, _ := c.Spec.(*networking.WorkloadEntry)
	return we
}

// ShallowCopy returns a copy whose metadata maps are fresh and whose Spec is
// shared. Writers use it to change metadata without touching a stored object.
func (c *Config) ShallowCopy() *Config {
	out := *c
	out.Labels = copyMap(c.Labels)
	out.Annotations = copyMap(c.Annotations)
	return &out
}

func copyMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// Event is the kind of change a store handler is told about.
type Event int

const (
	EventAdd Event = iota
	EventUpdate
	EventDelete
)

func (e Event) String() string {
	switch e {
	case EventAdd:
		return "add"
	case EventUpdate:
		return "update"
	case EventDelete:
		return "delete"
	}
	return fmt.Sprintf("event(%d)", int(e))
}

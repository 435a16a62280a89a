package model

import (
	"bytes"
	"encoding/hex"
	"maps"
	"strings"
	"time"
	"unique"

	networking "istio.io/api/networking/v1"
)

// WorkloadEntry is a WorkloadEntry object held compactly, as the aggregate
// store holds every WorkloadEntry: the spec's fields, the content hash and
// the store's bookkeeping, with what the WorkloadEntries of one service from
// one registry share (namespace, name prefix, metadata labels, selection
// label) in one WorkloadGroup. 112 bytes, where a Config with its spec and
// name takes about 300: the store holds one per instance. Immutable once
// made; consumers that need the Kubernetes shape (the Kubernetes writer,
// MCP, /debug/configz) materialise it with AsConfig.
type WorkloadEntry struct {
	Group *WorkloadGroup
	// Address, Weight: the spec's.
	Address  string
	locality unique.Handle[string]
	// Labels are the spec's labels less the group's selection label
	// (WorkloadGroup.Selection), shared: read-only. Spec adds it back.
	Labels map[string]string
	rare   *workloadRare // nil for most
	Weight uint32
	// id names the object with the group: Group.Host + "-" + hex(id)
	// (translate.WorkloadEntryName), unless rare.name is set.
	id   [5]byte
	Hash Hash
	// ResourceVersion and Observed are the store's (Meta's).
	ResourceVersion uint64
	Observed        *time.Time
}

// workloadRare holds the fields few WorkloadEntries have.
type workloadRare struct {
	ports                   map[string]uint32
	network, serviceAccount string
	// name is set when the object's name is not of the group's form (an
	// object not made by translate).
	name        string
	annotations map[string]string
}

// WorkloadGroup is what the WorkloadEntries of one service from one
// registry share. Read-only once shared.
type WorkloadGroup struct {
	Namespace string
	// Host is the ServiceEntry's name: every name of the group is
	// Host + "-" + 10 hex digits.
	Host string
	// Labels are the objects' metadata labels less the selection label:
	// translate's ownership labels, shared by every group of a registry.
	Labels map[string]string
	// Selection is the value of the meshbridge.io/service label the
	// objects' metadata labels and specs carry besides Labels ("" when
	// none does).
	Selection string
}

// MetaLabels returns the metadata labels of the group's objects: Labels
// and the selection label, in a new map when there is one, else Labels.
func (g *WorkloadGroup) MetaLabels() map[string]string {
	if g.Selection == "" {
		return g.Labels
	}
	out := make(map[string]string, len(g.Labels)+1)
	maps.Copy(out, g.Labels)
	out[LabelService] = g.Selection
	return out
}

// MetaLabel returns the metadata label key of the group's objects, without
// building the map.
func (g *WorkloadGroup) MetaLabel(key string) (string, bool) {
	if key == LabelService && g.Selection != "" {
		return g.Selection, true
	}
	v, ok := g.Labels[key]
	return v, ok
}

// NewWorkloadEntry returns the WorkloadEntry of group named with id whose
// spec is spec, hashed as hash. labels must be spec.Labels less the group's
// selection label (spec.Labels itself when the group has none); the record
// keeps them, and spec's maps, as they are: read-only.
func NewWorkloadEntry(group *WorkloadGroup, id [5]byte, spec *networking.WorkloadEntry, labels map[string]string, hash Hash) *WorkloadEntry {
	w := &WorkloadEntry{Group: group, Address: spec.Address, Labels: labels, Weight: spec.Weight, id: id, Hash: hash}
	if spec.Locality != "" {
		w.locality = unique.Make(spec.Locality)
	}
	if len(spec.Ports) > 0 || spec.Network != "" || spec.ServiceAccount != "" {
		w.rare = &workloadRare{ports: spec.Ports, network: spec.Network, serviceAccount: spec.ServiceAccount}
	}
	return w
}

// WorkloadEntryOf returns cfg, a WorkloadEntry Config of any name, as a
// WorkloadEntry; AsConfig gives it back. A name of translate's form
// ("<host>-<10 hex digits>") is kept as its parts, any other whole. Its
// spec's maps are shared.
func WorkloadEntryOf(cfg *Config) *WorkloadEntry {
	spec := cfg.WorkloadEntry()
	if spec == nil {
		spec = &networking.WorkloadEntry{}
	}
	host, id, ok := SplitWorkloadEntryName(cfg.Name)
	w := NewWorkloadEntry(&WorkloadGroup{Namespace: cfg.Namespace, Host: host, Labels: cfg.Labels}, id, spec, spec.Labels, cfg.Hash)
	if !ok || cfg.Annotations != nil {
		if w.rare == nil {
			w.rare = &workloadRare{}
		}
		w.rare.annotations = cfg.Annotations
		if !ok {
			w.rare.name = cfg.Name
		}
	}
	w.ResourceVersion, w.Observed = cfg.ResourceVersion, cfg.Observed
	return w
}

// Name is the object's name: Group.Host + "-" + 10 hex digits. It
// allocates; NameID and CompareName do not.
func (w *WorkloadEntry) Name() string {
	if w.rare != nil && w.rare.name != "" {
		return w.rare.name
	}
	var b strings.Builder
	b.Grow(len(w.Group.Host) + 1 + 2*len(w.id))
	b.WriteString(w.Group.Host)
	b.WriteByte('-')
	var digits [2 * len(w.id)]byte
	hex.Encode(digits[:], w.id[:])
	b.Write(digits[:])
	return b.String()
}

// NameID returns the parts of w's name: the group's host and the id, or
// the name itself and false when it is not of that form.
func (w *WorkloadEntry) NameID() (host string, id [5]byte, ok bool) {
	if w.rare != nil && w.rare.name != "" {
		return w.rare.name, [5]byte{}, false
	}
	return w.Group.Host, w.id, true
}

// SplitWorkloadEntryName returns the parts of a name of the form
// "<host>-<10 lower-case hex digits>", and false for any other name.
func SplitWorkloadEntryName(name string) (host string, id [5]byte, ok bool) {
	n := len(name) - 2*len(id)
	if n < 2 || name[n-1] != '-' {
		return "", id, false
	}
	for _, c := range name[n:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", id, false
		}
	}
	if _, err := hex.Decode(id[:], []byte(name[n:])); err != nil {
		return "", id, false
	}
	return name[:n-1], id, true
}

// CompareName compares the names of a and b, as strings.Compare of Name
// would, without building them.
func CompareName(a, b *WorkloadEntry) int {
	aFull, bFull := a.rare != nil && a.rare.name != "", b.rare != nil && b.rare.name != ""
	if !aFull && !bFull {
		ah, bh := a.Group.Host, b.Group.Host
		switch {
		case ah == bh:
			// Hex keeps the order of the bytes it encodes.
			return bytes.Compare(a.id[:], b.id[:])
		case !strings.HasPrefix(ah, bh) && !strings.HasPrefix(bh, ah):
			// The hosts differ before either ends.
			return strings.Compare(ah, bh)
		}
	}
	ah, as := a.nameParts()
	bh, bs := b.nameParts()
	return compareConcat(ah, as, bh, bs)
}

// CompareNameTo compares w's name with name, as strings.Compare would.
func (w *WorkloadEntry) CompareNameTo(name string) int {
	h, s := w.nameParts()
	return compareConcat(h, s, name, nameSuffix{})
}

// nameSuffix is "-" and the id's 10 hex digits; its zero value is none
// (a name not of the group's form).
type nameSuffix [1 + 2*5]byte

func (s *nameSuffix) len() int {
	if s[0] == 0 {
		return 0
	}
	return len(s)
}

// nameParts returns w's name as a prefix and a suffix: the group's host and
// "-<hex>", or the whole name and no suffix.
func (w *WorkloadEntry) nameParts() (string, nameSuffix) {
	var s nameSuffix
	if w.rare != nil && w.rare.name != "" {
		return w.rare.name, s
	}
	s[0] = '-'
	hex.Encode(s[1:], w.id[:])
	return w.Group.Host, s
}

// compareConcat compares a1+a2 with b1+b2.
func compareConcat(a1 string, a2 nameSuffix, b1 string, b2 nameSuffix) int {
	la, lb := len(a1)+a2.len(), len(b1)+b2.len()
	// The names compared mostly share a long prefix of their hosts.
	i := 0
	for n := min(len(a1), len(b1)); i < n && a1[i] == b1[i]; i++ {
	}
	for ; i < la && i < lb; i++ {
		ca, cb := a2[max(i-len(a1), 0)], b2[max(i-len(b1), 0)]
		if i < len(a1) {
			ca = a1[i]
		}
		if i < len(b1) {
			cb = b1[i]
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	switch {
	case la < lb:
		return -1
	case la > lb:
		return 1
	}
	return 0
}

// Namespace is the object's namespace.
func (w *WorkloadEntry) Namespace() string { return w.Group.Namespace }

// Locality is the spec's locality.
func (w *WorkloadEntry) Locality() string {
	if w.locality == (unique.Handle[string]{}) {
		return ""
	}
	return w.locality.Value()
}

// Ports are the spec's ports (read-only), nil when none.
func (w *WorkloadEntry) Ports() map[string]uint32 {
	if w.rare == nil {
		return nil
	}
	return w.rare.ports
}

// Network is the spec's network.
func (w *WorkloadEntry) Network() string {
	if w.rare == nil {
		return ""
	}
	return w.rare.network
}

// ServiceAccount is the spec's service account.
func (w *WorkloadEntry) ServiceAccount() string {
	if w.rare == nil {
		return ""
	}
	return w.rare.serviceAccount
}

// Spec returns the object's spec, new: its labels are a new map when the
// group's selection label is added, else Labels; its ports are shared.
func (w *WorkloadEntry) Spec() *networking.WorkloadEntry {
	labels := w.Labels
	if w.Group.Selection != "" {
		labels = make(map[string]string, len(w.Labels)+1)
		maps.Copy(labels, w.Labels)
		labels[LabelService] = w.Group.Selection
	}
	return &networking.WorkloadEntry{
		Address:        w.Address,
		Ports:          w.Ports(),
		Labels:         labels,
		Network:        w.Network(),
		Locality:       w.Locality(),
		Weight:         w.Weight,
		ServiceAccount: w.ServiceAccount(),
	}
}

// SameSpec reports whether spec is w's spec: equal in every field.
func (w *WorkloadEntry) SameSpec(spec *networking.WorkloadEntry) bool {
	if spec == nil || spec.Address != w.Address || spec.Weight != w.Weight || spec.Locality != w.Locality() ||
		spec.Network != w.Network() || spec.ServiceAccount != w.ServiceAccount() || !maps.Equal(spec.Ports, w.Ports()) {
		return false
	}
	if w.Group.Selection == "" {
		return maps.Equal(spec.Labels, w.Labels)
	}
	if len(spec.Labels) != len(w.Labels)+1 || spec.Labels[LabelService] != w.Group.Selection {
		return false
	}
	for k, v := range w.Labels {
		if sv, ok := spec.Labels[k]; !ok || sv != v || k == LabelService {
			return false
		}
	}
	return true
}

// Key implements Object; it allocates the name.
func (w *WorkloadEntry) Key() ConfigKey {
	return ConfigKey{Kind: KindWorkloadEntry, Namespace: w.Group.Namespace, Name: w.Name()}
}

// ContentSum implements Object.
func (w *WorkloadEntry) ContentSum() Hash { return w.Hash }

// Version implements Object.
func (w *WorkloadEntry) Version() uint64 { return w.ResourceVersion }

// ObservedAt implements Object.
func (w *WorkloadEntry) ObservedAt() *time.Time { return w.Observed }

// Stamped implements Object.
func (w *WorkloadEntry) Stamped(version uint64, observed *time.Time) Object {
	out := *w
	out.ResourceVersion, out.Observed = version, observed
	return &out
}

// AsConfig implements Object: the WorkloadEntry as a Config, new per call.
func (w *WorkloadEntry) AsConfig() *Config {
	var annotations map[string]string
	if w.rare != nil {
		annotations = w.rare.annotations
	}
	return &Config{
		Meta: Meta{
			Kind:            KindWorkloadEntry,
			Name:            w.Name(),
			Namespace:       w.Group.Namespace,
			Labels:          w.Group.MetaLabels(),
			Annotations:     annotations,
			Hash:            w.Hash,
			ResourceVersion: w.ResourceVersion,
			Observed:        w.Observed,
		},
		Spec: w.Spec(),
	}
}

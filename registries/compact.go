package registries

import (
	"encoding/binary"
	"maps"
	"reflect"
	"slices"
	"sync"
	"unique"
)

// Compact returns instances with equal label maps sharing one map, within
// the service and across services (sharedLabels), and the strings many
// instances repeat (Locality, Protocol) interned (unique.Make), for holders
// that keep a listing for as long as the service lives (the sync step keeps
// each service's last listing). Instances of one service mostly carry equal
// labels, and many services carry the same ones (a version, an environment,
// a framework's metadata), so this keeps about one map per distinct label
// set instead of one per instance.
//
// When every label map is already the shared one (a watcher that compacts
// its own listing), instances itself is returned and nothing is allocated;
// otherwise a new slice, as instances is the registry's and may be read
// while it is in use. Label maps are read-only once delivered, so sharing
// them is safe.
func Compact(instances []Instance) []Instance {
	var out []Instance                 // nil until a map is replaced
	var last, shared map[string]string // the last distinct map and the one shared for it
	var locality, protocol string
	for i, inst := range instances {
		labels := inst.Labels
		if len(labels) > 0 {
			if !SameLabels(labels, last) && !maps.Equal(labels, last) {
				last, shared = labels, sharedLabels.of(labels)
			}
			labels = shared
		}
		if out == nil {
			if SameLabels(labels, inst.Labels) {
				continue
			}
			out = make([]Instance, len(instances))
			for j := range i {
				out[j] = instances[j]
				out[j].Locality = intern(out[j].Locality, &locality)
				out[j].Protocol = intern(out[j].Protocol, &protocol)
			}
		}
		inst.Labels = labels
		inst.Locality = intern(inst.Locality, &locality)
		inst.Protocol = intern(inst.Protocol, &protocol)
		out[i] = inst
	}
	if out == nil {
		return instances
	}
	return out
}

// sharedLabels holds one map per distinct label set, for Compact. It is
// bounded: when it holds maxSharedLabelSets sets it starts over, so that a
// registry whose label values churn (an instance ID in a label) costs at
// most that many maps here; the maps already shared stay with their
// holders.
var sharedLabels = labelTable{sets: map[string]map[string]string{}}

const maxSharedLabelSets = 4096

type labelTable struct {
	mu   sync.Mutex
	sets map[string]map[string]string // by canonical form (labelKey)
}

// of returns the table's map equal to m, m itself when it holds none yet.
func (t *labelTable) of(m map[string]string) map[string]string {
	key := labelKey(m)
	t.mu.Lock()
	defer t.mu.Unlock()
	if shared, ok := t.sets[key]; ok {
		return shared
	}
	if len(t.sets) >= maxSharedLabelSets {
		clear(t.sets)
	}
	t.sets[key] = m
	return m
}

// labelKey is m's canonical form: its keys sorted, each pair
// length-prefixed, so that no two maps share one.
func labelKey(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b []byte
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return string(b)
}

// intern returns s's canonical copy; last is the previous answer, returned
// again without a lookup when equal.
func intern(s string, last *string) string {
	if s == *last {
		return *last
	}
	*last = unique.Make(s).Value()
	return *last
}

// SameLabels reports whether a and b are one map (not merely equal ones):
// after Compact, instances whose labels are equal mostly hold one map, so
// a consumer can reuse what it derived from the previous instance's.
func SameLabels(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

package registries

import (
	"maps"
	"reflect"
	"unique"
)

// Compact returns instances with equal label maps sharing one map and the
// strings many instances repeat (Locality, Protocol) interned
// (unique.Make), for holders that keep a listing for as long as the
// service lives (the sync step keeps each service's last listing).
// Instances of one service mostly carry equal labels, so this keeps about
// one map per service instead of one per instance.
//
// When the labels already share their maps (a watcher that compacts its own
// listing) or no two are equal, instances itself is returned and nothing is
// allocated; otherwise a new slice, as instances is the registry's and may
// be read while it is in use. Label maps are read-only once delivered, so
// sharing them is safe.
func Compact(instances []Instance) []Instance {
	if !compactable(instances) {
		return instances
	}
	out := make([]Instance, len(instances))
	var shared map[string]string
	var locality, protocol string
	for i, inst := range instances {
		if len(inst.Labels) > 0 {
			if maps.Equal(inst.Labels, shared) {
				inst.Labels = shared
			} else {
				shared = inst.Labels
			}
		}
		inst.Locality = intern(inst.Locality, &locality)
		inst.Protocol = intern(inst.Protocol, &protocol)
		out[i] = inst
	}
	return out
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

// compactable reports whether Compact would share some label map: whether
// an instance's non-empty labels equal the last distinct map before it
// without being that map.
func compactable(instances []Instance) bool {
	var shared map[string]string
	for _, inst := range instances {
		if len(inst.Labels) == 0 {
			continue
		}
		if maps.Equal(inst.Labels, shared) {
			if !SameLabels(inst.Labels, shared) {
				return true
			}
			continue
		}
		shared = inst.Labels
	}
	return false
}

// SameLabels reports whether a and b are one map (not merely equal ones):
// after Compact, instances whose labels are equal mostly hold one map, so
// a consumer can reuse what it derived from the previous instance's.
func SameLabels(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

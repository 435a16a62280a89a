package kube

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/meshbridge/meshbridge/model"
)

// Operations plan decides on, in the order plan sorts them.
const (
	OpCreate   = "create"
	OpUpdate   = "update"
	OpDelete   = "delete"
	OpConflict = "conflict" // the name is held by an object without our labels; left alone
)

var opOrder = map[string]int{OpCreate: 0, OpUpdate: 1, OpDelete: 2, OpConflict: 3}

// liveState is what is known of the apiserver's object under one name: its
// ownership labels and content hash, and which resourceVersion that
// knowledge is about.
type liveState struct {
	managedBy string // its app.kubernetes.io/managed-by label
	registry  string // its meshbridge.io/registry label
	instance  string // its meshbridge.io/instance label
	hash      string // its meshbridge.io/content-hash annotation
	uid       types.UID
	// rv is the resourceVersion of the newest copy seen, owned what that
	// copy holds of the fields meshbridge owns.
	rv    string
	owned owned
	// applied is the resourceVersion known to hold the content hash names:
	// the response of meshbridge's own last write, a list's copy, or a
	// newer copy of one of those whose .status alone changed (see merge).
	// When rv differs, someone else changed the object since (spec, labels
	// or annotations), and the desired object is applied again. "" is
	// unknown.
	applied string
	// gone: the object was deleted; uid and rv are the deleted object's.
	gone bool
	// seq orders what the writer learns against resync lists (see resync).
	seq uint64
}

// planRules are what plan consults besides the desired and the live
// objects: where it writes, which objects are its own, and which registries
// may have objects deleted.
type planRules struct {
	// namespace is output.namespace: nothing elsewhere is created, updated
	// or deleted.
	namespace string
	// instance is output.instance: an object is ours only when its
	// meshbridge.io/instance label equals it ("": only when it carries none,
	// or an empty one).
	instance string
	// known reports whether the writer knows a registry: an object is ours
	// only with app.kubernetes.io/managed-by=meshbridge and a
	// meshbridge.io/registry label naming a known registry. nil knows none.
	known func(registry string) bool
	// synced reports whether a registry delivered its first listing; nil
	// means every registry has. An object of a registry that has not is not
	// known yet, not gone, and is never deleted (docs/design.md §8).
	synced func(registry string) bool
}

// ours reports whether the object st describes carries our ownership
// labels: managed-by=meshbridge, our instance label (or none when we have
// no instance) and a known registry.
func (r planRules) ours(st liveState) bool {
	return st.managedBy == model.ManagedByValue && st.instance == r.instance && r.known != nil && r.known(st.registry)
}

// ownsLabels reports whether an object with these labels would be ours
// once written.
func (r planRules) ownsLabels(labels map[string]string) bool {
	return r.ours(liveState{
		managedBy: labels[model.LabelManagedBy], registry: labels[model.LabelRegistry], instance: labels[model.LabelInstance],
	})
}

// selector is the label selector of the objects that may be ours, for the
// resync's list and the watch: managed-by=meshbridge and, when the writer
// has an instance, its instance label. Registries are not named: the set of
// known registries grows while the writer runs. Without an instance it
// also selects other instances' objects (a selector cannot say "absent or
// empty"); ours filters on both.
func (r planRules) selector() string {
	sel := model.LabelManagedBy + "=" + model.ManagedByValue
	if r.instance == "" {
		return sel
	}
	return sel + "," + model.LabelInstance + "=" + r.instance
}

// action is one operation plan decided on.
type action struct {
	op      string
	key     model.ConfigKey
	desired *model.Config // OpCreate, OpUpdate: what to apply
	uid     types.UID     // OpDelete: the precondition
}

// plan returns what makes the live objects match the desired ones, sorted
// by op, kind and name: the decision of decide for every name either side
// holds. live maps a name to what the apiserver holds under it; refused
// maps a name to a content hash the apiserver refused (not sent again).
func plan(r planRules, desired []*model.Config, live map[model.ConfigKey]liveState, refused map[model.ConfigKey]string) []action {
	want := make(map[model.ConfigKey]*model.Config, len(desired))
	for _, c := range desired {
		want[c.Key()] = c
	}
	keys := slices.Collect(maps.Keys(want))
	for key := range live {
		if _, ok := want[key]; !ok {
			keys = append(keys, key)
		}
	}
	var out []action
	for _, key := range keys {
		var lp *liveState
		if st, ok := live[key]; ok {
			lp = &st
		}
		if a, ok := r.decide(key, want[key], lp, refused[key]); ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b action) int {
		return cmp.Or(cmp.Compare(opOrder[a.op], opOrder[b.op]), strings.Compare(string(a.key.Kind), string(b.key.Kind)),
			strings.Compare(a.key.Name, b.key.Name))
	})
	return out
}

// decide is plan for one name: desired is the store's object (nil: none),
// live what the apiserver holds (nil or gone: nothing), refused a content
// hash the apiserver refused ("" none). It reports false when nothing is to
// be done.
//
//   - Outside the namespace, nothing.
//   - A desired object that would not be ours once written (its labels lack
//     managed-by=meshbridge, carry another instance, or name a registry not
//     known), nothing: what is written must be collectable.
//   - A foreign object (without our ownership labels) is never written nor
//     deleted: OpConflict when its name is desired, else nothing.
//   - Desired and absent: OpCreate. Desired and ours: OpUpdate when the
//     content hash differs (or is empty), or when someone else changed the
//     object since meshbridge last knew it (rv ≠ applied); else nothing.
//     Content the apiserver refused is not sent again.
//   - Not desired and ours: OpDelete with the object's UID as precondition,
//     unless its registry has not synced.
func (r planRules) decide(key model.ConfigKey, desired *model.Config, live *liveState, refused string) (action, bool) {
	if key.Namespace != r.namespace {
		return action{}, false
	}
	if desired != nil && !r.ownsLabels(desired.Labels) {
		return action{}, false
	}
	if live != nil && live.gone {
		live = nil
	}
	switch {
	case live != nil && !r.ours(*live):
		if desired == nil {
			return action{}, false
		}
		return action{op: OpConflict, key: key}, true
	case desired == nil:
		if live == nil || (r.synced != nil && !r.synced(live.registry)) {
			return action{}, false
		}
		return action{op: OpDelete, key: key, uid: live.uid}, true
	}
	hash := desired.ContentHash()
	if live != nil && hash != "" && live.hash == hash && live.rv == live.applied {
		return action{}, false
	}
	if refused != "" && refused == hash {
		return action{}, false
	}
	op := OpCreate
	if live != nil {
		op = OpUpdate
	}
	return action{op: op, key: key, desired: desired}, true
}

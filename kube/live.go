package kube

import (
	"hash/maphash"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/meshbridge/meshbridge/model"
)

// source is how the writer learnt of an object's copy; see merge.
type source int

const (
	// fromList is a list or a get: the object is trusted to hold the
	// content its hash names, unless it changed since the writer last knew
	// it in sync.
	fromList source = iota
	// fromWrite is the response to meshbridge's own write.
	fromWrite
	// fromWatch is a watch event: a change by someone else, unless it is
	// no newer than what the writer knows (its own write coming back, or a
	// stale event).
	fromWatch
)

// owned identifies, without reading the spec, what a copy of an object
// holds of the fields meshbridge owns (its labels, annotations and spec):
// metadata.generation, which the apiserver increments on every change to a
// custom resource except to its metadata and, with the status subresource
// that Istio's CRDs enable, its .status (Kubernetes API conventions,
// "metadata.generation"); and a digest of every label and annotation. Two
// copies of one object (one UID) with equal owned hold the same labels,
// annotations and spec: what changed between them is .status (istiod's
// status.addresses and WaypointBound conditions), managedFields or other
// metadata meshbridge never writes.
type owned struct {
	generation int64
	metadata   uint64
}

// metadataSeed keys metadataSum; digests are compared within one process
// only.
var metadataSeed = maphash.MakeSeed()

// metadataSum is the digest of owned: independent of map order (the sum of
// one 64-bit hash per entry), labels and annotations told apart.
func metadataSum(labels, annotations map[string]string) uint64 {
	var sum uint64
	var h maphash.Hash
	h.SetSeed(metadataSeed)
	add := func(kind byte, m map[string]string) {
		for k, v := range m {
			h.Reset()
			_ = h.WriteByte(kind)
			_, _ = h.WriteString(k)
			_ = h.WriteByte(0)
			_, _ = h.WriteString(v)
			sum += h.Sum64()
		}
	}
	add('l', labels)
	add('a', annotations)
	return sum
}

// stateOf is what o tells of the object it was read from, as a list's copy.
func stateOf(o *liveObject) liveState {
	return liveState{
		managedBy: o.Labels[model.LabelManagedBy], registry: o.Labels[model.LabelRegistry],
		instance: o.Labels[model.LabelInstance], hash: o.Hash, uid: o.UID, rv: o.ResourceVersion, owned: o.Owned,
		applied: o.ResourceVersion,
	}
}

// merge returns what is known of an object after observing obs from src,
// given what was known (old, when had), and whether that is news: a copy
// newer than old.
//
// Knowledge only moves forward in resourceVersion, so a stale event (an
// earlier write of meshbridge's coming back late) changes nothing. A newer
// copy from a watch or a list keeps old's applied resourceVersion: the
// object changed since meshbridge knew it in sync, and plan applies the
// desired object again, unless only its .status changed (owned equal to
// that of a copy in sync): then the newer copy is in sync too, so istiod's
// status writes (VIP allocation, conditions) cost no write. A write's
// response is in sync by definition; a newer copy seen before it is in sync
// when it differs from the response in .status alone.
func merge(old liveState, had bool, obs liveState, src source) (liveState, bool) {
	if src == fromWrite {
		obs.applied = obs.rv
		if had && !old.gone && old.uid == obs.uid && newer(old.rv, obs.rv) {
			old.applied = obs.rv
			if old.owned == obs.owned {
				old.applied = old.rv
			}
			return old, true
		}
		return obs, true
	}
	if had && !newer(obs.rv, old.rv) {
		return old, false
	}
	switch {
	case had && !old.gone && old.uid == obs.uid:
		obs.applied = old.applied
		if old.applied != "" && old.applied == old.rv && obs.owned == old.owned {
			obs.applied = obs.rv // .status alone changed
		}
	case src == fromList && (!had || old.gone):
		obs.applied = obs.rv
	default:
		// Created by someone else, or replaced behind meshbridge's back.
		obs.applied = ""
	}
	return obs, true
}

// newer reports whether resourceVersion a is newer than b. Resource versions
// of one resource are comparable integers (apimachinery's resourceversion);
// when one is not, a differing a counts as newer, so that a change is never
// missed (at worst, an unchanged object is applied once more).
func newer(a, b string) bool {
	switch {
	case a == b || a == "":
		return false
	case b == "":
		return true
	}
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || c > 0
}

// learn records obs, observed from src, as what the apiserver holds under
// key, and reports whether it is news (see merge).
func (w *Writer) learn(key model.ConfigKey, obs liveState, src source) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.live[key]
	st, news := merge(old, had, obs, src)
	if news {
		w.seq++
		st.seq = w.seq
		w.live[key] = st
	}
	return news
}

// forget records that the object uid under key was deleted, and reports
// whether that is news. own is meshbridge's own delete; a watch's delete
// event is news only for the object the writer knows there (or when it knows
// none), not for one it already deleted or an older one.
func (w *Writer) forget(key model.ConfigKey, uid types.UID, own bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.live[key]
	if !own && had && (old.gone || old.uid != uid) {
		return false
	}
	w.seq++
	w.live[key] = liveState{gone: true, uid: uid, rv: old.rv, seq: w.seq}
	return true
}

// state returns what the apiserver holds under key, if known.
func (w *Writer) state(key model.ConfigKey) (liveState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.live[key]
	return st, ok && !st.gone
}

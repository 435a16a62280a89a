package kube

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/meshbridge/meshbridge/model"
)

// resources are the networking.istio.io/v1 resources the writer watches,
// by kind.
var resources = map[model.Kind]schema.GroupVersionResource{
	model.KindServiceEntry:  {Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"},
	model.KindWorkloadEntry: {Group: "networking.istio.io", Version: "v1", Resource: "workloadentries"},
}

// watch runs, until ctx is done, one metadata-only informer per kind
// (client-go metadatainformer) on the objects in output.namespace that may
// be ours (managed-by=meshbridge and our instance label; any registry, as
// the known ones grow), and queues the key of every object whose copy
// is news (merge): deleted, created, or changed by someone else. The cache
// keeps, per object, its name, UID, resourceVersion, ownership labels and
// content hash; never a spec.
//
// A watch event no newer than what the writer knows (meshbridge's own write
// coming back, whose response was recorded) queues nothing. One that is
// newer (a hand edit of the spec, labels or annotations: a new
// resourceVersion) makes plan apply the desired object again; a hand delete
// makes it create it again. The first list of each informer is a list like
// resync's (trusted content hashes); later relists after a broken watch
// report what changed meanwhile as events.
func (w *Writer) watch(ctx context.Context, running *sync.WaitGroup) {
	for kind, gvr := range resources {
		inf := metadatainformer.NewFilteredMetadataInformer(w.opts.Metadata, gvr, w.opts.Namespace, 0, cache.Indexers{},
			func(o *metav1.ListOptions) { o.LabelSelector = w.ours }).Informer()
		// These fail only once the informer runs.
		_ = inf.SetTransform(trimMetadata)
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
			w.watchFailed(ctx, kind, err)
		})
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { w.onWatch(kind, nil, obj, initial) },
			UpdateFunc: func(old, cur any) { w.onWatch(kind, old, cur, false) },
			DeleteFunc: func(obj any) { w.onWatchDelete(kind, obj) },
		})
		running.Go(func() { inf.RunWithContext(ctx) })
	}
}

// watchFailed logs why a watch ended before the informer lists and
// watches again (with backoff): as client-go's default handler does, an
// expired resourceVersion or a closed stream is routine.
func (w *Writer) watchFailed(ctx context.Context, kind model.Kind, err error) {
	switch {
	case ctx.Err() != nil, errors.Is(err, io.EOF):
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err), errors.Is(err, io.ErrUnexpectedEOF):
		w.log.Debug("Watch closed; watching again", "kind", kind, "err", err)
	default:
		w.log.Warn("Watching objects failed; retrying", "kind", kind, "err", err)
	}
}

// onWatch records an added or updated object of ours and queues its key
// when that is news. initial marks an object of the informer's first list.
func (w *Writer) onWatch(kind model.Kind, old, cur any, initial bool) {
	m, ok := cur.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	if o, ok := old.(*metav1.PartialObjectMetadata); ok && o.ResourceVersion == m.ResourceVersion {
		return // a relist that found no change
	}
	src := fromWatch
	if initial {
		src = fromList
	}
	key := model.ConfigKey{Kind: kind, Namespace: m.Namespace, Name: m.Name}
	if w.learn(key, stateOf(liveFromTrimmed(m)), src) && w.leading() {
		w.enqueue(key, false)
	}
}

// onWatchDelete records a deleted object of ours (or one whose labels no
// longer mark it ours) and queues its key when that is news.
func (w *Writer) onWatchDelete(kind model.Kind, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key := model.ConfigKey{Kind: kind, Namespace: m.Namespace, Name: m.Name}
	if w.forget(key, m.UID, false) && w.leading() {
		w.enqueue(key, false)
	}
}

// trimmedMetadataKey is the annotation under which trimMetadata keeps the
// digest of the labels and annotations it drops (metadataSum, in hex), in
// the informer's copies only. Its space makes it an invalid annotation key,
// so no object's own annotation can be mistaken for it.
const trimmedMetadataKey = "meshbridge.io/metadata sum"

// trimMetadata keeps of an object's metadata what the writer reads: name,
// namespace, UID, resourceVersion, generation, ownership labels, content
// hash, and the digest of every label and annotation (trimmedMetadataKey).
// The informer's cache then holds a few hundred bytes per object, whatever
// else the object carries (managed fields, a kubectl last-applied
// annotation).
func trimMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	keep := func(from map[string]string, keys ...string) map[string]string {
		out := make(map[string]string, len(keys)+1)
		for _, k := range keys {
			if v, ok := from[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	annotations := keep(m.Annotations, model.AnnotationHash)
	annotations[trimmedMetadataKey] = strconv.FormatUint(metadataSum(m.Labels, m.Annotations), 16)
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		Labels:      keep(m.Labels, model.LabelManagedBy, model.LabelRegistry, model.LabelInstance),
		Annotations: annotations,
	}}, nil
}

// liveFromTrimmed is liveFrom for a copy trimMetadata made: the digest of
// the object's labels and annotations is the one trimMetadata kept, not
// that of the trimmed maps.
func liveFromTrimmed(m *metav1.PartialObjectMetadata) *liveObject {
	o := liveFrom(m)
	o.Owned.metadata, _ = strconv.ParseUint(m.Annotations[trimmedMetadataKey], 16, 64)
	return o
}

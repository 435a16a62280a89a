package kube

import (
	"context"
	"encoding/json"
	"fmt"

	networkingv1 "istio.io/api/networking/v1"
	applynetworking "istio.io/client-go/pkg/applyconfiguration/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshbridge/meshbridge/model"
)

// FieldManager is the server-side apply field manager of every write.
const FieldManager = "meshbridge"

// liveObject is what the writer needs to know of an object the apiserver
// holds: its identity and ownership labels, and the content hash it carries.
type liveObject struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	Labels          map[string]string
	Hash            string
}

func liveFrom(m *metav1.ObjectMeta) *liveObject {
	return &liveObject{
		Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, Hash: m.Annotations[model.AnnotationHash],
	}
}

// kindClient is the handful of calls the writer makes for one kind, over the
// typed istio.io/client-go clients (networking.istio.io/v1).
type kindClient interface {
	get(ctx context.Context, ns, name string) (*liveObject, error)
	list(ctx context.Context, ns, selector string) ([]*liveObject, error)
	// apply sends cfg with server-side apply (FieldManager, force) and
	// returns the stored object.
	apply(ctx context.Context, cfg *model.Config) (*liveObject, error)
	delete(ctx context.Context, ns, name string, uid types.UID) error
}

func kindClients(c versioned.Interface) map[model.Kind]kindClient {
	return map[model.Kind]kindClient{
		model.KindServiceEntry:  serviceEntries{c},
		model.KindWorkloadEntry: workloadEntries{c},
	}
}

func deleteOptions(uid types.UID) metav1.DeleteOptions {
	// The UID precondition makes the delete miss an object recreated under
	// the same name since it was listed (perhaps by someone else).
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

func applyOptions() metav1.ApplyOptions {
	// Force: meshbridge is the only intended owner of these fields; a
	// kubectl edit of an object of ours is drift, and drift is corrected.
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}

type serviceEntries struct{ c versioned.Interface }

func (s serviceEntries) get(ctx context.Context, ns, name string) (*liveObject, error) {
	o, err := s.c.NetworkingV1().ServiceEntries(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return liveFrom(&o.ObjectMeta), nil
}

func (s serviceEntries) list(ctx context.Context, ns, selector string) ([]*liveObject, error) {
	l, err := s.c.NetworkingV1().ServiceEntries(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]*liveObject, 0, len(l.Items))
	for _, o := range l.Items {
		out = append(out, liveFrom(&o.ObjectMeta))
	}
	return out, nil
}

func (s serviceEntries) apply(ctx context.Context, cfg *model.Config) (*liveObject, error) {
	o, err := s.c.NetworkingV1().ServiceEntries(cfg.Namespace).Apply(ctx, ServiceEntryApply(cfg), applyOptions())
	if err != nil {
		return nil, err
	}
	return liveFrom(&o.ObjectMeta), nil
}

func (s serviceEntries) delete(ctx context.Context, ns, name string, uid types.UID) error {
	return s.c.NetworkingV1().ServiceEntries(ns).Delete(ctx, name, deleteOptions(uid))
}

type workloadEntries struct{ c versioned.Interface }

func (w workloadEntries) get(ctx context.Context, ns, name string) (*liveObject, error) {
	o, err := w.c.NetworkingV1().WorkloadEntries(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return liveFrom(&o.ObjectMeta), nil
}

func (w workloadEntries) list(ctx context.Context, ns, selector string) ([]*liveObject, error) {
	l, err := w.c.NetworkingV1().WorkloadEntries(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]*liveObject, 0, len(l.Items))
	for _, o := range l.Items {
		out = append(out, liveFrom(&o.ObjectMeta))
	}
	return out, nil
}

func (w workloadEntries) apply(ctx context.Context, cfg *model.Config) (*liveObject, error) {
	o, err := w.c.NetworkingV1().WorkloadEntries(cfg.Namespace).Apply(ctx, WorkloadEntryApply(cfg), applyOptions())
	if err != nil {
		return nil, err
	}
	return liveFrom(&o.ObjectMeta), nil
}

func (w workloadEntries) delete(ctx context.Context, ns, name string, uid types.UID) error {
	return w.c.NetworkingV1().WorkloadEntries(ns).Delete(ctx, name, deleteOptions(uid))
}

// ServiceEntryApply is the server-side apply request for a ServiceEntry of
// the aggregate store: name, namespace, labels, annotations and spec, which
// are exactly the fields meshbridge owns. It panics if cfg is another kind.
func ServiceEntryApply(cfg *model.Config) *applynetworking.ServiceEntryApplyConfiguration {
	a := applynetworking.ServiceEntry(cfg.Name, cfg.Namespace).
		WithLabels(cfg.Labels).WithAnnotations(cfg.Annotations)
	a.Spec = mustSpec[*networkingv1.ServiceEntry](cfg)
	return a
}

// WorkloadEntryApply is ServiceEntryApply for a WorkloadEntry.
func WorkloadEntryApply(cfg *model.Config) *applynetworking.WorkloadEntryApplyConfiguration {
	a := applynetworking.WorkloadEntry(cfg.Name, cfg.Namespace).
		WithLabels(cfg.Labels).WithAnnotations(cfg.Annotations)
	a.Spec = mustSpec[*networkingv1.WorkloadEntry](cfg)
	return a
}

func mustSpec[T any](cfg *model.Config) T {
	spec, ok := cfg.Spec.(T)
	if !ok {
		panic(fmt.Sprintf("kube: %s has spec %T", cfg.Key(), cfg.Spec))
	}
	return spec
}

// requestBody is the JSON body of cfg's apply request, as sent.
func requestBody(cfg *model.Config) ([]byte, error) {
	switch cfg.Kind {
	case model.KindServiceEntry:
		return json.Marshal(ServiceEntryApply(cfg))
	case model.KindWorkloadEntry:
		return json.Marshal(WorkloadEntryApply(cfg))
	}
	return nil, fmt.Errorf("kube: unsupported kind %q", cfg.Kind)
}

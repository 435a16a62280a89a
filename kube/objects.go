package kube

import (
	"context"
	"encoding/json"
	"fmt"

	networkingv1 "istio.io/api/networking/v1"
	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	applynetworking "istio.io/client-go/pkg/applyconfiguration/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshbridge/meshbridge/model"
)

// FieldManager is the server-side apply field manager of every write.
const FieldManager = "meshbridge"

// liveObject is what the writer needs to know of an object the apiserver
// holds: its identity and ownership labels, the content hash it carries, and
// what tells a change to the fields meshbridge owns from one to .status
// alone (see owned).
type liveObject struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	Labels          map[string]string
	Hash            string
	Owned           owned
}

// liveFrom reads o's metadata: the whole object's, with every label and
// annotation (for the informer's trimmed copies, see liveFromTrimmed).
func liveFrom(m metav1.Object) *liveObject {
	return &liveObject{
		Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		Labels: m.GetLabels(), Hash: m.GetAnnotations()[model.AnnotationHash],
		Owned: owned{generation: m.GetGeneration(), metadata: metadataSum(m.GetLabels(), m.GetAnnotations())},
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

// typedClient is the part of a generated istio.io/client-go client (e.g.
// ServiceEntryInterface) the writer uses: O is the object, L its list, A
// its apply configuration.
type typedClient[O metav1.Object, L any, A any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Apply(ctx context.Context, a A, opts metav1.ApplyOptions) (O, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// typedKind adapts one generated client to kindClient.
type typedKind[O metav1.Object, L any, A any] struct {
	client func(ns string) typedClient[O, L, A]
	items  func(L) []O
	body   func(*model.Config) A
}

func (k typedKind[O, L, A]) get(ctx context.Context, ns, name string) (*liveObject, error) {
	o, err := k.client(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return liveFrom(o), nil
}

func (k typedKind[O, L, A]) list(ctx context.Context, ns, selector string) ([]*liveObject, error) {
	l, err := k.client(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	items := k.items(l)
	out := make([]*liveObject, 0, len(items))
	for _, o := range items {
		out = append(out, liveFrom(o))
	}
	return out, nil
}

func (k typedKind[O, L, A]) apply(ctx context.Context, cfg *model.Config) (*liveObject, error) {
	// Force: meshbridge is the only intended owner of these fields; a
	// kubectl edit of an object of ours is drift, and drift is corrected.
	o, err := k.client(cfg.Namespace).Apply(ctx, k.body(cfg), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return nil, err
	}
	return liveFrom(o), nil
}

func (k typedKind[O, L, A]) delete(ctx context.Context, ns, name string, uid types.UID) error {
	// The UID precondition makes the delete miss an object recreated under
	// the same name since it was listed (perhaps by someone else).
	return k.client(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

func kindClients(c versioned.Interface) map[model.Kind]kindClient {
	type (
		se  = *clientnetworking.ServiceEntry
		sel = *clientnetworking.ServiceEntryList
		sea = *applynetworking.ServiceEntryApplyConfiguration
		we  = *clientnetworking.WorkloadEntry
		wel = *clientnetworking.WorkloadEntryList
		wea = *applynetworking.WorkloadEntryApplyConfiguration
	)
	return map[model.Kind]kindClient{
		model.KindServiceEntry: typedKind[se, sel, sea]{
			client: func(ns string) typedClient[se, sel, sea] { return c.NetworkingV1().ServiceEntries(ns) },
			items:  func(l sel) []se { return l.Items },
			body:   ServiceEntryApply,
		},
		model.KindWorkloadEntry: typedKind[we, wel, wea]{
			client: func(ns string) typedClient[we, wel, wea] { return c.NetworkingV1().WorkloadEntries(ns) },
			items:  func(l wel) []we { return l.Items },
			body:   WorkloadEntryApply,
		},
	}
}

// ServiceEntryApply is the server-side apply request for a ServiceEntry of
// the aggregate store: name, namespace, labels, annotations and spec, which
// are exactly the fields meshbridge owns. It panics if cfg is another kind.
func ServiceEntryApply(cfg *model.Config) *applynetworking.ServiceEntryApplyConfiguration {
	a := applynetworking.ServiceEntry(cfg.Name, cfg.Namespace).
		WithLabels(cfg.Labels).WithAnnotations(cfg.OutputAnnotations())
	a.Spec = mustSpec[*networkingv1.ServiceEntry](cfg)
	return a
}

// WorkloadEntryApply is ServiceEntryApply for a WorkloadEntry.
func WorkloadEntryApply(cfg *model.Config) *applynetworking.WorkloadEntryApplyConfiguration {
	a := applynetworking.WorkloadEntry(cfg.Name, cfg.Namespace).
		WithLabels(cfg.Labels).WithAnnotations(cfg.OutputAnnotations())
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

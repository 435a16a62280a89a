package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	istioinformers "istio.io/client-go/pkg/informers/externalversions"
	listersv1 "istio.io/client-go/pkg/listers/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// KubernetesConfig is where a Source reads DestinationRules and
// VirtualServices from a cluster (config key policy.kubernetes).
type KubernetesConfig struct {
	// Client reads networking.istio.io/v1 objects; it needs get, list and
	// watch on destinationrules and virtualservices in Namespaces.
	Client versioned.Interface
	// Namespaces are the namespaces read; empty reads every namespace.
	Namespaces []string
}

// KubernetesStatus is the cluster's part of a Status.
type KubernetesStatus struct {
	// Synced: every informer has listed; no rule is served before
	// (rule 10).
	Synced bool `json:"synced"`
	// LastError is the last error listing or watching (kind: error),
	// retried; "" when there was none.
	LastError string `json:"lastError,omitempty"`
}

// SourceKubernetes is the Source of an object read from Kubernetes, in
// Object.Source and RuleStatus.Source: "kubernetes".
const SourceKubernetes = "kubernetes"

// kubernetes follows the cluster's objects with informers (rule 10).
type kubernetes struct {
	destinations []listersv1.DestinationRuleLister
	routing      []listersv1.VirtualServiceLister
	synced       []cache.InformerSynced
	start        func(stop <-chan struct{})
}

// newKubernetes sets up one informer per kind and namespace (one for all
// namespaces when none is named); kick is called on every event and on
// every watch error, after onError.
func newKubernetes(cfg *KubernetesConfig, kick func(), onError func(kind string, err error)) *kubernetes {
	namespaces := cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	k := &kubernetes{}
	var factories []istioinformers.SharedInformerFactory
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}
	for _, ns := range namespaces {
		f := istioinformers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, istioinformers.WithNamespace(ns))
		factories = append(factories, f)
		dr, vs := f.Networking().V1().DestinationRules(), f.Networking().V1().VirtualServices()
		for kind, inf := range map[string]cache.SharedIndexInformer{KindDestinationRule: dr.Informer(), KindVirtualService: vs.Informer()} {
			_, _ = inf.AddEventHandler(handler)
			// Fails only once the informer runs.
			_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { onError(kind, err) })
			k.synced = append(k.synced, inf.HasSynced)
		}
		k.destinations = append(k.destinations, dr.Lister())
		k.routing = append(k.routing, vs.Lister())
	}
	k.start = func(stop <-chan struct{}) {
		for _, f := range factories {
			f.Start(stop)
		}
	}
	return k
}

// objects returns the cluster's objects as the informers hold them, in
// the order rule 3 gives them: oldest first (creation time), then by
// namespace and name, DestinationRules and VirtualServices each in that
// order, as istiod resolves two rules for one host.
func (k *kubernetes) objects() []Object {
	type item struct {
		obj   Object
		since time.Time
	}
	var items []item
	for _, l := range k.destinations {
		drs, _ := l.List(labels.Everything()) // the informer's cache: no error
		for _, dr := range drs {
			items = append(items, item{objectOfRule(dr), dr.CreationTimestamp.Time})
		}
	}
	for _, l := range k.routing {
		vss, _ := l.List(labels.Everything())
		for _, vs := range vss {
			items = append(items, item{objectOfVirtualService(vs), vs.CreationTimestamp.Time})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(a.since.Compare(b.since), strings.Compare(a.obj.Kind, b.obj.Kind),
			strings.Compare(a.obj.Namespace, b.obj.Namespace), strings.Compare(a.obj.Name, b.obj.Name))
	})
	out := make([]Object, len(items))
	for i, it := range items {
		out[i] = it.obj
	}
	return out
}

// objectOfRule is dr as read from a file: its spec copied (the informer's
// is shared), normalised and validated (checkRule).
func objectOfRule(dr *networkingv1.DestinationRule) Object {
	o := Object{Kind: KindDestinationRule, Namespace: dr.Namespace, Name: dr.Name, Source: SourceKubernetes}
	o.Rule, o.Err = checkRule(proto.Clone(&dr.Spec).(*networking.DestinationRule))
	return o
}

// objectOfVirtualService is vs as read from a file (checkVirtualService).
func objectOfVirtualService(vs *networkingv1.VirtualService) Object {
	o := Object{Kind: KindVirtualService, Namespace: vs.Namespace, Name: vs.Name, Source: SourceKubernetes}
	o.Routing, o.Err = checkVirtualService(proto.Clone(&vs.Spec).(*networking.VirtualService))
	return o
}

// followKubernetes runs the informers until ctx is done: once every one
// has listed, it marks the cluster read and reads the rules, then reads
// them again after each burst of events (Settle after the first).
func (f *Source) followKubernetes(ctx context.Context) {
	f.kube.start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), f.kube.synced...) {
		return
	}
	f.kubeSynced.Store(true)
	f.log.Info("Read the cluster's DestinationRules and VirtualServices", "namespaces", f.namespacesShown())
	f.Read()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.cfg.Settle):
		}
		f.Read()
	}
}

// namespacesShown names the namespaces read, for logs.
func (f *Source) namespacesShown() string {
	if len(f.cfg.Kubernetes.Namespaces) == 0 {
		return "all"
	}
	return strings.Join(f.cfg.Kubernetes.Namespaces, ",")
}

// kubeError records and logs why the cluster's objects cannot be listed
// or watched (RBAC, a missing CRD, a connection), which the informers
// retry: until they have listed, no rule is served (rule 10).
func (f *Source) kubeError(kind string, err error) {
	msg := fmt.Sprintf("%s: %v", kind, err)
	f.mu.Lock()
	changed := f.kubeErr != msg
	f.kubeErr = msg
	f.mu.Unlock()
	if changed {
		f.log.Warn("Cannot list or watch the cluster's traffic policy; retrying", "kind", kind, "err", err,
			"namespaces", f.namespacesShown(), "synced", f.kubeSynced.Load())
	}
}

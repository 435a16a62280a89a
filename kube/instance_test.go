package kube

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	networkingv1 "istio.io/api/networking/v1"
	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
)

// versions are the resourceVersions of the objects a namespace holds, by
// "Kind/name", with their instance label.
type versions map[string]string

func (p *pipeline) versions(instance string) versions {
	p.t.Helper()
	c := p.read()
	out := versions{}
	for name, o := range c.ses {
		if o.Labels[model.LabelInstance] == instance {
			out["ServiceEntry/"+name] = o.ResourceVersion
		}
	}
	for name, o := range c.wes {
		if o.Labels[model.LabelInstance] == instance {
			out["WorkloadEntry/"+name] = o.ResourceVersion
		}
	}
	return out
}

// TestInstancesShareANamespace: bridges of instances a and b write the
// same registry name into one namespace. Each deletes only its own objects,
// at a removal and at the garbage collection of a restart, never writes
// the other's (a name the other holds is a conflict), and a bridge without
// an instance touches neither.
func TestInstancesShareANamespace(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	a := newPipeline(t, k, ns, pipelineOptions{instance: "a"})
	b := newPipeline(t, k, ns, pipelineOptions{instance: "b"})
	a.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	a.put("users", inst("n1/users-1", "10.0.1.1", 8080, nil))
	b.put("billing", inst("n2/billing-1", "10.0.2.1", 8080, nil))
	b.put("payments", inst("n2/payments-1", "10.0.3.1", 8080, nil))
	stopA := a.start()
	b.start()
	a.settle()
	b.settle()
	a.checkMatchesStore()
	b.checkMatchesStore()
	if got := a.versions("a"); len(got) != 4 {
		t.Fatalf("instance a's objects: %v, want 2 ServiceEntries and 2 WorkloadEntries", got)
	}
	bBefore := b.versions("b")
	if len(bBefore) != 4 {
		t.Fatalf("instance b's objects: %v, want 2 ServiceEntries and 2 WorkloadEntries", bBefore)
	}

	// a's service leaves its registry: a deletes its objects, b's stay.
	a.remove("users")
	a.settle()
	a.checkMatchesStore()
	if got := b.versions("b"); !maps.Equal(got, bBefore) {
		t.Fatalf("instance b's objects changed when a removed a service:\n got  %v\n want %v", got, bBefore)
	}

	// a restarts with only "orders" and, under b's name, "billing": its
	// garbage collection sees b's objects of the same registry and leaves
	// them; billing is a conflict.
	stopA()
	aAfter := a.versions("a")
	conflictsBefore := counterDelta(conflicts)
	a2 := newPipeline(t, k, ns, pipelineOptions{instance: "a"})
	a2.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	a2.put("billing", inst("n9/billing-9", "10.0.9.1", 8080, nil))
	a2.start()
	a2.settle()
	if got := b.versions("b"); !maps.Equal(got, bBefore) {
		t.Fatalf("instance b's objects changed when a restarted:\n got  %v\n want %v", got, bBefore)
	}
	if d := conflictsBefore(); d != 1 {
		t.Errorf("meshbridge_kube_conflicts_total grew by %v, want 1 (billing's ServiceEntry, b's)", d)
	}
	if got := a2.requests.Count(http.MethodDelete); got != 0 {
		t.Errorf("the restarted a deleted %d objects, want none", got)
	}
	// Its one new object is billing's WorkloadEntry (another instance ID,
	// so another name).
	aNew := a2.versions("a")
	added := slices.Sorted(maps.Keys(aNew))
	added = slices.DeleteFunc(added, func(k string) bool { _, ok := aAfter[k]; return ok })
	if len(added) != 1 || len(aNew) != len(aAfter)+1 {
		t.Errorf("the restarted a's objects: %v; before: %v; want billing's WorkloadEntry added", aNew, aAfter)
	}

	// b's service leaves its registry: b deletes its objects, a's stay.
	b.remove("payments")
	b.settle()
	b.checkMatchesStore()
	if got := a2.versions("a"); !maps.Equal(got, aNew) {
		t.Fatalf("instance a's objects changed when b removed a service:\n got  %v\n want %v", got, aNew)
	}

	// A bridge without an instance, of the same registry and with nothing
	// to write, lists both instances' objects and deletes none.
	aNow, bNow := a2.versions("a"), b.versions("b")
	none := newPipeline(t, k, ns, pipelineOptions{})
	none.start()
	none.settle()
	if got := none.requests.Writes(); got != 0 {
		t.Errorf("a bridge without an instance wrote %d times (requests by method: %v), want 0", got, none.requests)
	}
	if got := a2.versions("a"); !maps.Equal(got, aNow) {
		t.Errorf("instance a's objects changed under a bridge without an instance:\n got  %v\n want %v", got, aNow)
	}
	if got := b.versions("b"); !maps.Equal(got, bNow) {
		t.Errorf("instance b's objects changed under a bridge without an instance:\n got  %v\n want %v", got, bNow)
	}
}

// TestAddRegistryCollectsItsObjects: an object labelled for a registry the
// writer does not know is left alone; once AddRegistry makes the registry
// known (it has synced, and the store holds none of its objects), the
// leader deletes it without waiting for a resync.
func TestAddRegistryCollectsItsObjects(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	p := newPipeline(t, k, ns, pipelineOptions{synced: func(string) bool { return true }})
	ctx := context.Background()
	se := &clientnetworking.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "left.example.com", Namespace: ns,
		Labels: map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: "dc3"}}}
	se.Spec.Hosts = []string{se.Name}
	se.Spec.Ports = []*networkingv1.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}
	se.Spec.Resolution = networkingv1.ServiceEntry_DNS
	created, err := p.client.NetworkingV1().ServiceEntries(ns).Create(ctx, se, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	p.start()
	p.settle()
	p.checkMatchesStore()
	got, err := p.client.NetworkingV1().ServiceEntries(ns).Get(ctx, se.Name, metav1.GetOptions{})
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("the object of registry dc3, not known: %v (resourceVersion %s → %v)", err, created.ResourceVersion, got)
	}
	resynced := p.writer.LastResync()

	p.writer.AddRegistry("dc3")
	p.writer.AddRegistry("dc3")
	harness.Eventually(t, 30*time.Second, "the object of the added registry dc3 to be deleted", func() error {
		_, err := p.client.NetworkingV1().ServiceEntries(ns).Get(ctx, se.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
	if !p.writer.LastResync().Equal(resynced) {
		t.Error("the delete waited for a resync")
	}
	p.settle()
	p.checkMatchesStore()
}

package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	networkingv1 "istio.io/api/networking/v1"
	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
)

// restoreDeadline bounds how long a repair by watch may take in these tests;
// it is typically tens of milliseconds, and must not wait for a resync.
const restoreDeadline = 5 * time.Second

// totalWrites sums meshbridge_kube_writes_total over ops and results.
func totalWrites() float64 {
	var sum float64
	for _, op := range []string{OpCreate, OpUpdate, OpDelete} {
		for _, result := range []string{"ok", "error", "invalid", "too_large"} {
			sum += testutil.ToFloat64(writes.WithLabelValues(op, result))
		}
	}
	return sum
}

// drift is a pipeline whose writer owns dc1 (which runs) and dc2 (which
// never syncs), for the tests of repairs by watch.
type drift struct {
	*pipeline
	sentinels int
}

// watchSettled waits until the writer's watch has delivered every event
// that precedes now, and the writer is idle: it creates one object of ours
// of the unsynced registry dc2 per kind (never written nor deleted, so it
// adds no write) and waits until the writer has seen both. A watch delivers
// the events of one kind in order, so every earlier event has been handled.
func (d *drift) watchSettled() {
	d.t.Helper()
	d.sentinels++
	name := fmt.Sprintf("sentinel-%d", d.sentinels)
	labels := map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: "dc2"}
	ctx := context.Background()
	se := &clientnetworking.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: name + ".example.com", Namespace: d.ns, Labels: labels}}
	se.Spec.Hosts = []string{name + ".example.com"}
	se.Spec.Ports = []*networkingv1.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}
	se.Spec.Resolution = networkingv1.ServiceEntry_DNS
	if _, err := d.client.NetworkingV1().ServiceEntries(d.ns).Create(ctx, se, metav1.CreateOptions{}); err != nil {
		d.t.Fatal(err)
	}
	we := &clientnetworking.WorkloadEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns, Labels: labels}}
	we.Spec.Address = "10.99.0.1"
	if _, err := d.client.NetworkingV1().WorkloadEntries(d.ns).Create(ctx, we, metav1.CreateOptions{}); err != nil {
		d.t.Fatal(err)
	}
	harness.EventuallyTrue(d.t, 30*time.Second, "the writer to see "+name+" through its watch, and be idle", func() bool {
		_, seSeen := d.writer.state(model.ConfigKey{Kind: model.KindServiceEntry, Namespace: d.ns, Name: se.Name})
		_, weSeen := d.writer.state(model.ConfigKey{Kind: model.KindWorkloadEntry, Namespace: d.ns, Name: we.Name})
		return seSeen && weSeen && d.writer.Pending() == 0
	})
}

// writeCounts are the writes so far: requests that change something, and
// meshbridge_kube_writes_total.
func (d *drift) writeCounts() (requests int, metric float64) {
	return d.requests.Writes(), totalWrites()
}

// TestWatchRepairsDrift: the writer watches its own objects. A WorkloadEntry
// deleted by hand, a ServiceEntry whose spec is edited by hand (content hash
// untouched) and one whose content hash is edited are restored at once, not
// at the next resync (ResyncPeriod is 5 minutes here), with one write each;
// meshbridge's own writes coming back through the watch cost no write; an
// object of ours of a registry that has not synced is not deleted.
func TestWatchRepairsDrift(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	d := &drift{pipeline: newPipeline(t, k, ns, pipelineOptions{owned: []string{"dc1", "dc2"}})}
	d.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil), inst("n2/orders-2", "10.0.0.2", 8080, nil))
	d.put("users", inst("n1/users-1", "10.0.1.1", 9090, nil))
	d.start()
	d.settle()
	d.checkMatchesStore()
	if d.writer.opts.ResyncPeriod != DefaultResyncPeriod {
		t.Fatalf("ResyncPeriod %s: the repairs below must not be a resync's", d.writer.opts.ResyncPeriod)
	}

	// Own writes come back through the watch and add none.
	requests, metric := d.writeCounts()
	d.watchSettled()
	if r, m := d.writeCounts(); r != requests || m != metric {
		t.Fatalf("the watch returning meshbridge's own writes added writes: %d requests (was %d), writes_total %v (was %v)",
			r, requests, m, metric)
	}
	sentinel := d.read().ses["sentinel-1.example.com"]

	ctx := context.Background()
	weName := d.store.List(model.KindWorkloadEntry, ns)[0].Name
	const seName = "orders.service.consul"
	repairs := []struct {
		name     string
		tamper   func() error
		restored func(c cluster) error
	}{
		{
			name: "WorkloadEntry deleted by hand",
			tamper: func() error {
				return d.client.NetworkingV1().WorkloadEntries(ns).Delete(ctx, weName, metav1.DeleteOptions{})
			},
			restored: func(c cluster) error {
				if c.wes[weName] == nil {
					return fmt.Errorf("%s is still missing", weName)
				}
				return nil
			},
		},
		{
			name: "ServiceEntry spec edited by hand",
			tamper: func() error {
				se, err := d.client.NetworkingV1().ServiceEntries(ns).Get(ctx, seName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				se.Spec.Ports[0].Number = 9999
				_, err = d.client.NetworkingV1().ServiceEntries(ns).Update(ctx, se, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
				return err
			},
			restored: func(c cluster) error {
				if got := c.ses[seName].Spec.Ports[0].Number; got != 8080 {
					return fmt.Errorf("%s port is %d", seName, got)
				}
				return nil
			},
		},
		{
			name: "ServiceEntry content hash edited by hand",
			tamper: func() error {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"edited"}}}`, model.AnnotationHash)
				_, err := d.client.NetworkingV1().ServiceEntries(ns).Patch(ctx, seName, types.MergePatchType, []byte(patch),
					metav1.PatchOptions{FieldManager: "kubectl-annotate"})
				return err
			},
			restored: func(c cluster) error {
				if got := c.ses[seName].Annotations[model.AnnotationHash]; got == "edited" {
					return fmt.Errorf("%s content hash is %q", seName, got)
				}
				return nil
			},
		},
	}
	for _, r := range repairs {
		t.Run(r.name, func(t *testing.T) {
			d.t = t
			requests, metric := d.writeCounts()
			if err := r.tamper(); err != nil {
				t.Fatal(err)
			}
			tampered := time.Now()
			harness.Eventually(t, restoreDeadline, "the object restored", func() error { return r.restored(d.read()) })
			t.Logf("restored %s after the edit", time.Since(tampered).Round(time.Millisecond))
			d.watchSettled()
			d.checkMatchesStore()
			// One write repairs it: an apply (after a lookup, for the
			// deleted one); the repair's own event adds none.
			if r, m := d.writeCounts(); r != requests+1 || m != metric+1 {
				t.Errorf("%d write requests and %v writes_total for the repair, want 1 and 1", r-requests, m-metric)
			}
		})
	}
	d.t = t

	// The objects of dc2, which has not synced, were seen and kept.
	got, err := d.client.NetworkingV1().ServiceEntries(ns).Get(ctx, sentinel.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("%s, of the unsynced registry dc2, was deleted", sentinel.Name)
	case err != nil:
		t.Fatal(err)
	case got.ResourceVersion != sentinel.ResourceVersion:
		t.Errorf("%s, of the unsynced registry dc2, was modified", sentinel.Name)
	}
}

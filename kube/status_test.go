package kube

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// TestStatusChangeWritesNothing: istiod writes the .status of meshbridge's
// ServiceEntries (its VIP allocator's status.addresses, WaypointBound
// conditions, each a patch of the status subresource). Such a change alone
// costs no write, in both endpoint modes; a later registry change is
// applied in place (same UID) and leaves .status as istiod wrote it; and a
// status write after that costs none either.
func TestStatusChangeWritesNothing(t *testing.T) {
	for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
		t.Run(string(mode), func(t *testing.T) {
			k := harness.SharedKube(t)
			ns := k.Namespace(t)
			d := &drift{pipeline: newPipeline(t, k, ns, pipelineOptions{endpoints: mode, owned: []string{"dc1", "dc2"}})}
			d.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil), inst("n2/orders-2", "10.0.0.2", 8080, nil))
			d.put("users", inst("n1/users-1", "10.0.1.1", 9090, nil))
			d.start()
			d.settle()
			d.watchSettled()
			before := d.read()

			ctx := context.Background()
			vip := 0
			patchStatus := func(condition string) {
				t.Helper()
				for name := range before.ses {
					vip++
					patch := fmt.Sprintf(`{"status":{"addresses":[{"host":%q,"value":"240.240.0.%d"}],`+
						`"conditions":[{"type":%q,"status":"False","reason":"NotBound"}]}}`, name, vip, condition)
					if _, err := d.client.NetworkingV1().ServiceEntries(ns).Patch(ctx, name, types.MergePatchType, []byte(patch),
						metav1.PatchOptions{FieldManager: "pilot-discovery"}, "status"); err != nil {
						t.Fatal(err)
					}
				}
			}
			requests, metric := d.writeCounts()
			patchStatus("istio.io/WaypointBound")
			d.watchSettled()
			if r, m := d.writeCounts(); r != requests || m != metric {
				t.Fatalf("status writes to %d ServiceEntries cost %d write requests and %v writes_total, want 0",
					len(before.ses), r-requests, m-metric)
			}
			patched := d.read()

			// A registry change that changes the ServiceEntry in inline
			// mode and a WorkloadEntry in the other.
			d.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil), inst("n2/orders-2", "10.0.0.2", 8080, nil),
				inst("n3/orders-3", "10.0.0.3", 8080, nil))
			d.settle()
			d.watchSettled()
			d.checkMatchesStore()
			after := d.read()
			for name, se := range after.ses {
				old := before.ses[name]
				if old == nil {
					continue // a sentinel
				}
				if se.UID != old.UID || !se.CreationTimestamp.Equal(&old.CreationTimestamp) {
					t.Errorf("%s was recreated: UID %s → %s", name, old.UID, se.UID)
				}
				want := patched.ses[name].Status.GetAddresses()
				if got := se.Status.GetAddresses(); len(got) != 1 || got[0].GetValue() != want[0].GetValue() {
					t.Errorf("%s status.addresses %v after meshbridge's write, want %v as istiod wrote it", name, got, want)
				}
				if len(se.Status.GetConditions()) != 1 {
					t.Errorf("%s status.conditions %v after meshbridge's write, want istiod's one", name, se.Status.GetConditions())
				}
			}

			requests, metric = d.writeCounts()
			patchStatus("istio.io/Reconciled")
			d.watchSettled()
			if r, m := d.writeCounts(); r != requests || m != metric {
				t.Errorf("status writes after a registry change cost %d write requests and %v writes_total, want 0",
					r-requests, m-metric)
			}
		})
	}
}

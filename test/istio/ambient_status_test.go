package istio

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// allocationServices is how many ServiceEntries istiod allocates VIPs to in
// TestAmbientVIPAllocationWritesNothing.
const allocationServices = 1000

// TestAmbientVIPAllocationWritesNothing: istiod writes the VIPs it allocates
// into each ServiceEntry's status (one status patch per ServiceEntry); that
// change to .status alone costs meshbridge no write. With 1,000
// ServiceEntries, in both endpoint modes, meshbridge's writes are exactly
// its objects' creates, plus the one repair of the hand edit the test makes
// last: the watch delivers that edit after every status change before it,
// so once it is repaired and the writer is idle, every status change has
// been seen.
func TestAmbientVIPAllocationWritesNothing(t *testing.T) {
	a := startAmbient(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		s := a.scenario(t)
		reg := fileServices{}
		for i := range allocationServices {
			h := s.host(fmt.Sprintf("svc-%04d", i))
			reg[h] = svc(h, 8080, "tcp", instance(fmt.Sprintf("10.2.%d.%d", i/256, i%256), 8080, nil))
		}
		writeServices(t, s.path, reg)
		start := time.Now()
		b := s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
		creates := allocationServices
		if mode == translate.EndpointsWorkloadEntry {
			creates += allocationServices // a WorkloadEntry per instance
		}

		ctx := context.Background()
		harness.Eventually(t, 5*time.Minute, "istiod allocates every VIP", func() error {
			l, err := s.client.NetworkingV1().ServiceEntries(s.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			n := 0
			for _, se := range l.Items {
				if len(vips(se)) > 0 {
					n++
				}
			}
			if n != allocationServices {
				return fmt.Errorf("%d of %d ServiceEntries have VIPs", n, allocationServices)
			}
			return nil
		})
		allocated := time.Since(start)
		first := s.host(fmt.Sprintf("svc-%04d", 0))
		t.Logf("VIPs of %s: %v; of the last: %v", first, vips(s.serviceEntry(t, first)),
			vips(s.serviceEntry(t, s.host(fmt.Sprintf("svc-%04d", allocationServices-1)))))

		last := s.host(fmt.Sprintf("svc-%04d", allocationServices-1))
		se := s.serviceEntry(t, last)
		se.Spec.Ports[0].Number = 7777
		if _, err := s.client.NetworkingV1().ServiceEntries(s.ns).Update(ctx, se,
			metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		harness.EventuallyTrue(t, ambientWait, last+" repaired", func() bool {
			cur := s.serviceEntry(t, last)
			return cur != nil && cur.Spec.GetPorts()[0].GetNumber() == 8080
		})
		b.idle(t)
		extra := b.writes.Writes() - creates - 1
		t.Logf("%d ServiceEntries (%s mode): VIPs allocated %s after meshbridge started; meshbridge's writes: %d creates, "+
			"%d for istiod's status writes, 1 repair (requests by method: %v)", allocationServices, mode,
			allocated.Round(time.Millisecond), creates, extra, b.writes)
		if extra != 0 {
			t.Errorf("meshbridge wrote %d times while istiod allocated VIPs, want 0", extra)
		}
	})
}

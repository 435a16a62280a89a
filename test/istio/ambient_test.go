package istio

import (
	"context"
	"slices"
	"testing"
	"time"

	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	"istio.io/istio/pkg/workloadapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// endpointModes are output.endpoints' values: every ambient check runs in
// both.
var endpointModes = []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline}

// forEachMode runs f as a subtest per endpoint mode.
func forEachMode(t *testing.T, f func(t *testing.T, mode translate.EndpointMode)) {
	for _, mode := range endpointModes {
		t.Run(string(mode), func(t *testing.T) { f(t, mode) })
	}
}

// twoServices is the registry of the ambient tests: orders (gRPC, port
// 8080, one instance on 8081) and users (TCP, port 9090).
func (s *scenario) twoServices() fileServices {
	return fileServices{
		s.host("orders"): svc(s.host("orders"), 8080, "grpc",
			instance("10.1.0.1", 8080, map[string]string{"version": "v1"}), instance("10.1.0.2", 8081, nil)),
		s.host("users"): svc(s.host("users"), 9090, "tcp", instance("10.1.1.1", 9090, nil)),
	}
}

// ordersEndpoints are orders' instances in twoServices, as ztunnel sees
// them on port 8080.
var ordersEndpoints = plain("10.1.0.1:8080", "10.1.0.2:8081")

// startOrders writes twoServices, starts meshbridge in mode, and waits
// until istiod allocated orders' VIPs and ztunnel sees it; it returns the
// registry, meshbridge, orders' host and its ServiceEntry.
func (s *scenario) startOrders(t *testing.T, z *ztunnel, mode translate.EndpointMode) (
	reg fileServices, b *bridge, orders string, se *clientnetworking.ServiceEntry,
) {
	t.Helper()
	reg = s.twoServices()
	writeServices(t, s.path, reg)
	b = s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
	orders = s.host("orders")
	se = s.allocated(t, orders)[orders]
	z.awaitService(t, s.ns, orders, vips(se), 8080, ordersEndpoints)
	return reg, b, orders, se
}

// TestAmbientServiceEntriesGetVIPsAndWorkloads: istiod allocates a VIP to
// each ServiceEntry meshbridge writes (one IPv4 in 240.240.0.0/16, one IPv6
// in 2001:2::/48, in status.addresses), and ztunnel's WDS view holds each
// service with those VIPs and its ports, and each instance as a healthy
// plain-TCP workload at its address and port (an instance on another port
// than the service's too).
func TestAmbientServiceEntriesGetVIPsAndWorkloads(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		s := a.scenario(t)
		writeServices(t, s.path, s.twoServices())
		start := time.Now()
		s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
		orders, users := s.host("orders"), s.host("users")
		ses := s.allocated(t, orders, users)
		t.Logf("VIPs in status.addresses %s after meshbridge started: %s %v, %s %v", time.Since(start).Round(time.Millisecond),
			orders, vips(ses[orders]), users, vips(ses[users]))
		for _, se := range ses {
			checkVIPs(t, se)
		}

		z.awaitService(t, s.ns, orders, vips(ses[orders]), 8080, ordersEndpoints)
		seen := z.awaitService(t, s.ns, users, vips(ses[users]), 9090, plain("10.1.1.1:9090"))
		t.Logf("WDS view complete %s after meshbridge started", seen.Sub(start).Round(time.Millisecond))
		v, err := z.view(s.ns)
		if err != nil {
			t.Fatal(err)
		}
		wantPorts := map[string]*workloadapi.Port{
			orders: {ServicePort: 8080, TargetPort: 8080, AppProtocol: workloadapi.AppProtocol_GRPC},
			users:  {ServicePort: 9090, TargetPort: 9090, AppProtocol: workloadapi.AppProtocol_TCP},
		}
		for host, want := range wantPorts {
			ports := v.services[host].GetPorts()
			if len(ports) != 1 || ports[0].GetServicePort() != want.GetServicePort() ||
				ports[0].GetTargetPort() != want.GetTargetPort() || ports[0].GetAppProtocol() != want.GetAppProtocol() {
				t.Errorf("WDS service %s ports %v, want [%v]", host, ports, want)
			}
			t.Logf("WDS service %s: VIPs %v, ports %v, endpoints %v", host, v.serviceVIPs(host), ports,
				v.endpoints(s.ns, host, want.GetServicePort()))
		}
	})
}

// TestAmbientChangesKeepTheVIP: registry changes (an instance added, one
// removed, a label changed, the service at zero instances and back), a
// hand edit of a ServiceEntry's spec that meshbridge repairs, and a restart
// of meshbridge each update the ServiceEntry in place: its UID,
// creationTimestamp and VIP stay, meshbridge never clears its .status, and
// ztunnel's view follows with the same VIP.
func TestAmbientChangesKeepTheVIP(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		s := a.scenario(t)
		reg, b, orders, se := s.startOrders(t, z, mode)
		want := identityOf(se)
		t.Logf("%s: VIPs %s, UID %s", orders, want.vips, want.uid)

		ctx := context.Background()
		steps := []struct {
			name string
			// change makes the change and returns when it was made.
			change func(t *testing.T) time.Time
			// kube are orders' endpoints in the apiserver afterwards
			// (address:port → version label), wds in ztunnel's view.
			kube map[string]string
			wds  []wdsEndpoint
		}{
			{"instance added", func(t *testing.T) time.Time {
				o := reg[orders]
				o.Instances = append(slices.Clone(o.Instances), instance("10.1.0.3", 8080, nil))
				reg[orders] = o
				return writeServices(t, s.path, reg)
			}, map[string]string{"10.1.0.1:8080": "v1", "10.1.0.2:8081": "", "10.1.0.3:8080": ""},
				plain("10.1.0.1:8080", "10.1.0.2:8081", "10.1.0.3:8080")},
			{"instance removed", func(t *testing.T) time.Time {
				o := reg[orders]
				o.Instances = slices.Delete(slices.Clone(o.Instances), 1, 2)
				reg[orders] = o
				return writeServices(t, s.path, reg)
			}, map[string]string{"10.1.0.1:8080": "v1", "10.1.0.3:8080": ""}, plain("10.1.0.1:8080", "10.1.0.3:8080")},
			{"instance label changed", func(t *testing.T) time.Time {
				o := reg[orders]
				o.Instances = slices.Clone(o.Instances)
				o.Instances[0].Labels = map[string]string{"version": "v2"}
				reg[orders] = o
				return writeServices(t, s.path, reg)
			}, map[string]string{"10.1.0.1:8080": "v2", "10.1.0.3:8080": ""}, plain("10.1.0.1:8080", "10.1.0.3:8080")},
			{"spec edited by hand, repaired", func(t *testing.T) time.Time {
				cur := s.serviceEntry(t, orders)
				cur.Spec.Ports[0].Number = 7777
				if _, err := s.client.NetworkingV1().ServiceEntries(s.ns).Update(ctx, cur,
					metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
					t.Fatal(err)
				}
				return time.Now()
			}, map[string]string{"10.1.0.1:8080": "v2", "10.1.0.3:8080": ""}, plain("10.1.0.1:8080", "10.1.0.3:8080")},
			{"zero instances", func(t *testing.T) time.Time {
				o := reg[orders]
				o.Instances = nil
				reg[orders] = o
				return writeServices(t, s.path, reg)
			}, map[string]string{}, nil},
			{"instances back", func(t *testing.T) time.Time {
				o := reg[orders]
				o.Instances = []file.InstanceSpec{instance("10.1.0.1", 8080, nil), instance("10.1.0.4", 8081, nil)}
				reg[orders] = o
				return writeServices(t, s.path, reg)
			}, map[string]string{"10.1.0.1:8080": "", "10.1.0.4:8081": ""}, plain("10.1.0.1:8080", "10.1.0.4:8081")},
			{"meshbridge restarted", func(t *testing.T) time.Time {
				b.stop()
				at := time.Now()
				b = s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
				if n := b.writes.Writes(); n != 0 {
					t.Errorf("the restarted meshbridge wrote %d times (%v), want 0", n, b.writes)
				}
				return at
			}, map[string]string{"10.1.0.1:8080": "", "10.1.0.4:8081": ""}, plain("10.1.0.1:8080", "10.1.0.4:8081")},
		}
		for _, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				at := step.change(t)
				s.awaitKube(t, orders, step.kube)
				written := time.Now()
				seen := z.awaitService(t, s.ns, orders, vips(se), 8080, step.wds)
				b.idle(t)
				cur := s.serviceEntry(t, orders)
				if cur == nil {
					t.Fatalf("%s is gone", orders)
				}
				if got := identityOf(cur); got != want {
					t.Errorf("%s identity %+v, want %+v (updated in place)", orders, got, want)
				}
				t.Logf("VIPs %s kept; the apiserver held the change %s after it, ztunnel's view %v %s after it",
					identityOf(cur).vips, written.Sub(at).Round(time.Millisecond), step.wds, seen.Sub(at).Round(time.Millisecond))
			})
		}
	})
}

// TestAmbientEndpointModeSwitchKeepsTheVIP: switching output.endpoints
// (a restart with the other mode) updates each ServiceEntry in place,
// inline → workloadentry and back: UID, creationTimestamp and VIP stay,
// and ztunnel's view keeps the workloads.
func TestAmbientEndpointModeSwitchKeepsTheVIP(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	s := a.scenario(t)
	_, b, orders, se := s.startOrders(t, z, translate.EndpointsInline)
	want := identityOf(se)
	for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
		t.Run("to "+string(mode), func(t *testing.T) {
			b.stop()
			at := time.Now()
			b = s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
			seen := z.awaitService(t, s.ns, orders, vips(se), 8080, ordersEndpoints)
			b.idle(t)
			if got := identityOf(s.serviceEntry(t, orders)); got != want {
				t.Errorf("%s identity %+v, want %+v (updated in place)", orders, got, want)
			}
			wes, err := s.client.NetworkingV1().WorkloadEntries(s.ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantWEs := 0 // inline: the WorkloadEntries of the other mode are collected
			if mode == translate.EndpointsWorkloadEntry {
				wantWEs = 3
			}
			if len(wes.Items) != wantWEs {
				t.Errorf("%d WorkloadEntries in %s mode, want %d", len(wes.Items), mode, wantWEs)
			}
			t.Logf("VIPs %s kept; WDS view complete %s after the restart in %s mode", want.vips,
				seen.Sub(at).Round(time.Millisecond), mode)
		})
	}
}

// TestAmbientRecreatedServiceEntryGetsANewVIP pins what the README's
// Ambient section says of the paths that recreate a ServiceEntry: one
// deleted by hand is created again by meshbridge, and one whose service
// leaves the registry and returns is deleted and created again; either way
// it is a new object (UID, creationTimestamp), istiod allocates it a new
// VIP, and ztunnel's view moves to it.
func TestAmbientRecreatedServiceEntryGetsANewVIP(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		s := a.scenario(t)
		reg, _, orders, se := s.startOrders(t, z, mode)

		steps := []struct {
			name     string
			recreate func(t *testing.T)
		}{
			{"deleted by hand", func(t *testing.T) {
				if err := s.client.NetworkingV1().ServiceEntries(s.ns).Delete(context.Background(), orders,
					metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
			{"left the registry and returned", func(t *testing.T) {
				gone := fileServices{s.host("users"): reg[s.host("users")]}
				writeServices(t, s.path, gone)
				harness.EventuallyTrue(t, ambientWait, orders+" deleted", func() bool { return s.serviceEntry(t, orders) == nil })
				writeServices(t, s.path, reg)
			}},
		}
		for _, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				old := identityOf(se)
				step.recreate(t)
				harness.EventuallyTrue(t, ambientWait, orders+" created again", func() bool {
					cur := s.serviceEntry(t, orders)
					return cur != nil && string(cur.UID) != old.uid
				})
				se = s.allocated(t, orders)[orders]
				checkVIPs(t, se)
				cur := identityOf(se)
				if cur.vips == old.vips {
					t.Errorf("%s kept VIPs %s across its recreation", orders, cur.vips)
				}
				z.awaitService(t, s.ns, orders, vips(se), 8080, ordersEndpoints)
				t.Logf("%s recreated: UID %s → %s, VIPs %s → %s; ztunnel sees the new VIPs", orders, old.uid, cur.uid,
					old.vips, cur.vips)
			})
		}
	})
}

package istio

import (
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// TestAmbientUnhealthyInstanceLeavesZtunnelsView: ztunnel's view marks
// every WorkloadEntry and inline endpoint healthy (istiod reads no health
// from them), so meshbridge removes an unhealthy instance rather than mark
// it. A real Consul instance whose check turns critical leaves ztunnel's
// view, and comes back once passing again, while the ServiceEntry keeps
// its VIP. In both endpoint modes.
func TestAmbientUnhealthyInstanceLeavesZtunnelsView(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		c := harness.StartConsul(t)
		name := "payments-" + string(mode)
		c.RegisterInstance(t, name, name+"-1", "10.6.0.1", 8080, nil, nil, api.HealthPassing)
		c.RegisterInstance(t, name, name+"-2", "10.6.0.2", 8080, nil, nil, api.HealthPassing)
		s := a.scenario(t)
		s.startBridge(t, s.ns, "", bridgeOptions{endpoints: mode, consul: c})
		host := name + ".service.consul"
		se := s.allocated(t, host)[host]
		want := identityOf(se)
		both := plain("10.6.0.1:8080", "10.6.0.2:8080")
		z.awaitService(t, s.ns, host, vips(se), 8080, both)

		c.SetCheck(t, harness.CheckID(name+"-2"), api.HealthCritical)
		z.awaitService(t, s.ns, host, vips(se), 8080, plain("10.6.0.1:8080"))
		t.Logf("VIPs %s; %s-2 critical: ztunnel's view %v", want.vips, name, plain("10.6.0.1:8080"))
		c.SetCheck(t, harness.CheckID(name+"-2"), api.HealthPassing)
		z.awaitService(t, s.ns, host, vips(se), 8080, both)
		if got := identityOf(s.serviceEntry(t, host)); got != want {
			t.Errorf("%s identity %+v, want %+v (updated in place)", host, got, want)
		}
		t.Logf("VIPs %s kept; %s-2 passing again: ztunnel's view %v", want.vips, name, both)
	})
}

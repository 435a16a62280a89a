package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestProxylessHostnameEndpoint: under `resolution: DNS` an instance whose
// address is a DNS name (Spring Cloud Consul's default) is served to every
// proxyless client beside one at an IP; it receives calls, and when it is
// deregistered the calls go to the other alone.
func TestProxylessHostnameEndpoint(t *testing.T) {
	consul := harness.StartConsul(t)
	// The service port is the first instance's and then sticks (translate's
	// rule 3): register the instance on the lower port first, so the
	// target's port is known whatever meshbridge reads at once.
	ports := map[string]int{"backend-host": startBackend(t, "backend-host"), "backend-ip": startBackend(t, "backend-ip")}
	addresses := map[string]string{"backend-host": "localhost", "backend-ip": "127.0.0.1"}
	first, second := "backend-host", "backend-ip"
	if ports[second] < ports[first] {
		first, second = second, first
	}
	b := startBridge(t, consulRegistry(consul)+"  resolution: DNS\n")
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "hostname-" + pc.name
			target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, ports[first])
			boot := renderBootstrap(t, "--node-id", "e2e-dns-"+pc.name, "--xds-address", b.xdsAddr)
			for _, backend := range []string{first, second} {
				consul.RegisterInstance(t, svc, svc+"-"+backend, addresses[backend], ports[backend], nil, grpcMeta, api.HealthPassing)
			}
			c := runProxyless(t, pc.name, pc.command(t, target, callOpts{}), boot)
			c.waitSettled(0, 60*time.Second, "backend-host", "backend-ip")
			m := c.mark()
			consul.Deregister(t, svc+"-backend-host")
			c.waitSettled(m, 15*time.Second, "backend-ip")
		})
	}
}

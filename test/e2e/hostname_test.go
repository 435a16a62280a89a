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
	pa, pb := startBackend(t, "backend-host"), startBackend(t, "backend-ip")
	low := min(pa, pb) // the service port is the lowest instance port seen
	b := startBridge(t, consulRegistry(consul)+"  resolution: DNS\n")
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			svc := "hostname-" + pc.name
			target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, low)
			boot := renderBootstrap(t, "--node-id", "e2e-dns-"+pc.name, "--xds-address", b.xdsAddr)
			consul.RegisterInstance(t, svc, svc+"-host", "localhost", pa, nil, grpcMeta, api.HealthPassing)
			consul.RegisterInstance(t, svc, svc+"-ip", "127.0.0.1", pb, nil, grpcMeta, api.HealthPassing)
			c := runProxyless(t, pc.name, pc.command(t, target, 0), boot)
			c.waitSettled(0, 60*time.Second, "backend-host", "backend-ip")
			m := c.mark()
			consul.Deregister(t, svc+"-host")
			c.waitSettled(m, 15*time.Second, "backend-ip")
		})
	}
}

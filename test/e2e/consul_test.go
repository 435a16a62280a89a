package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// grpcMeta declares the instances' protocol, so the port is grpc-<n>.
var grpcMeta = map[string]string{"protocol": "grpc"}

// TestClientFollowsConsul pins what a client sees as Consul changes (README
// "Behaviour operators rely on"): register → call succeeds; add an instance →
// traffic reaches it; its check fails → it leaves; check passes → it is back;
// deregister → it stops. In both endpoint modes: WorkloadEntries selected by
// the ServiceEntry, and endpoints inline in it.
func TestClientFollowsConsul(t *testing.T) {
	for _, mode := range []string{"workloadentry", "inline"} {
		t.Run(mode, func(t *testing.T) { testClientFollowsConsul(t, "output: {endpoints: "+mode+"}\n") })
	}
}

func testClientFollowsConsul(t *testing.T, extraConfig string) {
	consul := harness.StartConsul(t)
	p1, p2 := startBackend(t, "backend-1"), startBackend(t, "backend-2")
	consul.RegisterInstance(t, "echo", "echo-1", "127.0.0.1", p1, []string{"version=v1"}, grpcMeta, api.HealthPassing)
	b := startBridge(t, consulRegistry(consul)+extraConfig)
	// The service port is the lowest instance port seen: backend-1's.
	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///echo.service.consul:%d", p1))

	m := c.mark()
	c.waitSettled(m, 30*time.Second, "backend-1")

	m = c.mark()
	consul.RegisterInstance(t, "echo", "echo-2", "127.0.0.1", p2, nil, grpcMeta, api.HealthPassing)
	c.waitReached(m, "backend-2", 15*time.Second)
	c.waitSettled(m, 15*time.Second, "backend-1", "backend-2")

	m = c.mark()
	consul.SetCheck(t, harness.CheckID("echo-1"), api.HealthCritical)
	c.waitSettled(m, 15*time.Second, "backend-2")

	m = c.mark()
	consul.SetCheck(t, harness.CheckID("echo-1"), api.HealthPassing)
	c.waitSettled(m, 15*time.Second, "backend-1", "backend-2")

	m = c.mark()
	consul.Deregister(t, "echo-2")
	c.waitSettled(m, 15*time.Second, "backend-1")
}

package harness

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartNacos: the server serves the v1 API on 127.0.0.1, its JRaft port
// is the only one on every interface and lies in the test binary's own
// network namespace, an ephemeral instance registered healthy stays listed
// past the 15 s heartbeat timeout (the harness beats it), weight, metadata
// and enabled are kept, a deregistered instance leaves, and a group other
// than DEFAULT_GROUP lists its own services.
func TestStartNacos(t *testing.T) {
	n := StartNacos(t)
	l, err := tcpListeners(n.Pid())
	if err != nil {
		t.Fatal(err)
	}
	raft := net.JoinHostPort("0.0.0.0", strconv.Itoa(n.HTTPPort()+NacosRaftOffset))
	for _, a := range l {
		if !strings.HasPrefix(a, "127.0.0.1:") && a != raft {
			t.Errorf("nacos listens on %s (all: %v): want 127.0.0.1 but for JRaft's %s", a, l, raft)
		}
	}
	if ok, why := InNetNS(); !ok {
		t.Fatalf("nacos ran outside the test binary's network namespace: %s", why)
	}

	n.RegisterInstance(t, "", "", "orders", "10.0.0.1", 8080, 2, map[string]string{"version": "v1"}, true, true, true)
	n.RegisterInstance(t, "", "", "orders", "10.0.0.3", 8080, 1, nil, true, true, false)
	n.RegisterInstance(t, "", "blue", "invoices", "10.0.1.1", 9090, 1, nil, true, true, true)
	if got := n.ListServices(t, "", "blue"); !slices.Equal(got, []string{"invoices"}) {
		t.Errorf("services of group blue = %v, want [invoices]", got)
	}
	start := time.Now()
	EventuallyTrue(t, 40*time.Second, "orders past the heartbeat timeout", func() bool {
		in := n.ListInstances(t, "", "", "orders")
		return time.Since(start) > 20*time.Second && len(in) == 1 && in[0].IP == "10.0.0.1" && in[0].Healthy &&
			in[0].Weight == 2 && in[0].Metadata["version"] == "v1"
	})
	n.DeregisterInstance(t, "", "", "orders", "10.0.0.1", 8080, true)
	EventuallyTrue(t, 10*time.Second, "orders empty after the deregister", func() bool {
		return len(n.ListInstances(t, "", "", "orders")) == 0
	})
}

// TestStartNacosWithAuth: with auth on, the admin logs in with its password
// and a wrong password is refused (3.1.0's v1 login answers it with a 500,
// "Handle API Compatibility failed").
func TestStartNacosWithAuth(t *testing.T) {
	n := StartNacos(t, WithNacosAuth())
	if _, err := n.Login(NacosAdmin, n.AdminPassword()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Login(NacosAdmin, n.AdminPassword()+"x"); err == nil {
		t.Error("login with a wrong password succeeded")
	}
	n.RegisterInstance(t, "", "", "orders", "10.0.0.1", 8080, 1, nil, true, true, true)
	if in := n.ListInstances(t, "", "", "orders"); len(in) != 1 {
		t.Errorf("orders = %+v, want one instance", in)
	}
}

package harness

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStartEurekaPeers: two peers replicate to each other: an instance
// registered on the first is listed by the second, and so are its status
// override (OUT_OF_SERVICE), the override's removal and its deregistration;
// /eureka/apps and /eureka/apps/delta answer Eureka's JSON ("application"
// and "instance" arrays whatever their length, ports as {"$", "@enabled"},
// "overriddenStatus", apps__hashcode "STATUS_COUNT_" pairs). The test logs
// the JSON verbatim: what a Go client of Eureka must parse.
func TestStartEurekaPeers(t *testing.T) {
	p := StartEurekaPeers(t, 2)
	for i, e := range p {
		if l, err := tcpListeners(e.PID()); err != nil {
			t.Fatal(err)
		} else {
			for _, a := range l {
				if !strings.HasPrefix(a, "127.0.0.1:") {
					t.Errorf("peer %d listens on %s (all: %v): want 127.0.0.1 only", i, a, l)
				}
			}
		}
	}
	logJSON := func(what string, e *Eureka, path string) {
		t.Logf("%s: GET %s%s:\n%s", what, e.URL(), path, e.GetJSON(t, path))
	}
	logJSON("no app", p[0], "apps")

	one := EurekaInstance{App: "orders", IPAddr: "10.0.0.1", Port: 8080, Metadata: map[string]string{"version": "v1"}, DurationInSecs: 600}
	two := EurekaInstance{App: "orders", IPAddr: "10.0.0.2", Port: 8081, DurationInSecs: 600}
	p[0].Register(t, one)
	for i, e := range p {
		Eventually(t, 20*time.Second, fmt.Sprintf("orders on peer %d", i), func() error {
			in, ok := e.Instances(t, "orders")[one.ID()]
			if !ok || in.Status != "UP" || in.Port.N != 8080 || in.Metadata["version"] != "v1" {
				return fmt.Errorf("orders: %+v", e.Instances(t, "orders"))
			}
			return nil
		})
	}
	logJSON("one app, one instance", p[0], "apps")
	logJSON("one app, one instance", p[0], "apps/delta")
	logJSON("one app, one instance, on the other peer", p[1], "apps")

	p[0].Register(t, two)
	Eventually(t, 20*time.Second, "two instances on peer 1", func() error {
		if got := p[1].Instances(t, "orders"); len(got) != 2 {
			return fmt.Errorf("orders: %+v", got)
		}
		return nil
	})
	logJSON("one app, two instances (the second without metadata)", p[0], "apps")
	logJSON("one app, two instances (the second without metadata)", p[0], "apps/delta")
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(p[0].GetJSON(t, "apps"), &raw); err != nil {
		t.Fatal(err)
	}
	if h := string(raw["applications"]["apps__hashcode"]); h != `"UP_2_"` {
		t.Errorf("apps__hashcode = %s, want \"UP_2_\"", h)
	}

	p[0].SetStatus(t, "orders", one.ID(), "OUT_OF_SERVICE")
	for i, e := range p {
		Eventually(t, 20*time.Second, fmt.Sprintf("orders OUT_OF_SERVICE on peer %d", i), func() error {
			if in := e.Instances(t, "orders")[one.ID()]; in.Status != "OUT_OF_SERVICE" || in.OverriddenStatus != "OUT_OF_SERVICE" {
				return fmt.Errorf("%s: %+v", one.ID(), in)
			}
			return nil
		})
	}
	d := p[0].Apps(t, "apps/delta")
	if got := d.Applications.AppsHashcode; got != "OUT_OF_SERVICE_1_UP_1_" {
		t.Errorf("delta apps__hashcode = %q, want OUT_OF_SERVICE_1_UP_1_", got)
	}
	if a := d.Applications.Application; len(a) != 1 || !hasEurekaAction(a[0].Instance, one.ID(), "OUT_OF_SERVICE", "MODIFIED") {
		t.Errorf("delta after OUT_OF_SERVICE: %+v", d)
	}
	logJSON("OUT_OF_SERVICE", p[0], "apps")
	logJSON("OUT_OF_SERVICE", p[0], "apps/delta")

	p[0].ClearStatus(t, "orders", one.ID())
	for i, e := range p {
		Eventually(t, 20*time.Second, fmt.Sprintf("orders UP again on peer %d", i), func() error {
			if in := e.Instances(t, "orders")[one.ID()]; in.Status != "UP" {
				return fmt.Errorf("%s: %+v", one.ID(), in)
			}
			return nil
		})
	}
	logJSON("status override cleared", p[0], "apps")

	p[0].Heartbeat(t, "orders", one.ID())
	if _, err := p[0].do("PUT", eurekaInstancePath("orders", "nope"), nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("heartbeat of an unknown instance: %v, want 404", err)
	}

	p[0].Deregister(t, "orders", one.ID())
	Eventually(t, 20*time.Second, "orders deregistered on peer 1", func() error {
		if got := p[1].Instances(t, "orders"); len(got) != 1 {
			return fmt.Errorf("orders: %+v", got)
		}
		return nil
	})
	d = p[0].Apps(t, "apps/delta")
	if a := d.Applications.Application; len(a) != 1 || !hasEurekaAction(a[0].Instance, one.ID(), "", "DELETED") {
		t.Errorf("delta after the deregistration: %+v", d)
	}
	logJSON("deregistered", p[0], "apps/delta")

	// A restarted peer copies the other's registry at start.
	p[1].Restart(t)
	if got := p[1].Instances(t, "orders"); len(got) != 1 || got[two.ID()].Status != "UP" {
		t.Errorf("orders on the restarted peer: %+v", got)
	}
}

// TestStartEurekaEviction: one peer evicts an instance whose lease expired
// (no heartbeat) within seconds, and its change leaves the delta after
// EurekaOptions.DeltaRetention.
func TestStartEurekaEviction(t *testing.T) {
	e := StartEureka(t, EurekaOptions{DeltaRetention: 3 * time.Second})
	in := EurekaInstance{App: "short", IPAddr: "10.0.0.9", Port: 80, RenewalIntervalInSecs: 1, DurationInSecs: 1}
	e.Register(t, in)
	if got := e.Instances(t, "short"); len(got) != 1 {
		t.Fatalf("short: %+v", got)
	}
	Eventually(t, 20*time.Second, "short evicted", func() error {
		if got := e.Instances(t, "short"); len(got) != 0 {
			return fmt.Errorf("short: %+v", got)
		}
		return nil
	})
	Eventually(t, 20*time.Second, "the delta empty", func() error {
		if d := e.Apps(t, "apps/delta"); len(d.Applications.Application) != 0 {
			return fmt.Errorf("delta: %+v", d)
		}
		return nil
	})
}

// hasEurekaAction tells whether ins has instance id with actionType action
// (and status, unless "").
func hasEurekaAction(ins []EurekaInstanceState, id, status, action string) bool {
	for _, in := range ins {
		if in.InstanceID == id && in.ActionType == action && (status == "" || in.Status == status) {
			return true
		}
	}
	return false
}

package nacos

import (
	"slices"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestRegisterDeregister: ephemeral instances an application registers with
// nacos-sdk-go reach the Sink as authoritative snapshots (doc.go rules 4, 6,
// 7), and a deregistration removes the instance; Synced comes once.
func TestRegisterDeregister(t *testing.T) {
	p := harness.StartPolaris(t)
	app := newApp(t, p, "")
	web1 := instance{service: "web", ip: "10.0.0.1", port: 8080, metadata: map[string]string{"protocol": "grpc", "version": "v1"}}
	app.register(web1)
	harness.EventuallyTrue(t, waitTimeout, "Polaris lists web", func() bool {
		return slices.Contains(p.ListServices(t, "", ""), "web")
	})
	reg, rec := runRegistry(t, Config{Addresses: []string{p.NacosAddress()}}, nil)
	k := key("public", "DEFAULT_GROUP", "web")
	rec.eventually(t, "Synced with web's instance", func() bool {
		return rec.synced == 1 && slices.Equal(rec.addrs(k), []string{"10.0.0.1:8080"})
	})
	rec.mu.Lock()
	got := rec.good[k][0]
	rec.mu.Unlock()
	want := registries.Instance{
		ID: "public/DEFAULT_GROUP/web//10.0.0.1:8080", Address: "10.0.0.1", Port: 8080, Protocol: "grpc",
		Labels: map[string]string{"protocol": "grpc", "version": "v1"}, Weight: 100,
	}
	if !sameInstances([]registries.Instance{got}, []registries.Instance{want}) {
		t.Errorf("instance = %+v, want %+v", got, want)
	}

	web2 := instance{service: "web", ip: "10.0.0.2", port: 8080}
	start := time.Now()
	app.register(web2)
	rec.eventually(t, "web has both instances", func() bool {
		return slices.Equal(rec.addrs(k), []string{"10.0.0.1:8080", "10.0.0.2:8080"})
	})
	t.Logf("register → snapshot: %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	app.deregister(web1)
	rec.eventually(t, "web lost 10.0.0.1", func() bool {
		return slices.Equal(rec.addrs(k), []string{"10.0.0.2:8080"})
	})
	t.Logf("deregister → snapshot: %s", time.Since(start).Round(time.Millisecond))

	for _, s := range rec.snapshots() {
		if s.Err != nil || s.Removed {
			t.Errorf("unexpected snapshot %+v", s)
		}
		if s.Service.Namespace != "public" || s.Service.Group != "DEFAULT_GROUP" {
			t.Errorf("snapshot scope %q/%q, want public/DEFAULT_GROUP", s.Service.Namespace, s.Service.Group)
		}
	}
	if st := reg.Status(); !st.Synced || st.Services != 1 || st.Instances != 1 || st.Subscribed != 1 || !st.Up {
		t.Errorf("Status = %+v, want synced, 1 service, 1 instance, 1 subscribed, up", st)
	}
}

package zookeeper

import (
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

const demoIface = "com.foo.DemoService"

// TestInterfaceProviders: providers appear, merge, leave; a malformed URL
// is passed on as an Invalid instance and a consumer URL is ignored; the
// last provider's departure removes the service.
func TestInterfaceProviders(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	_, rec := runRegistry(t, z, dubbo.Config{})
	rec.Eventually(t, "synced on an empty ensemble", func(s registrytest.State) bool { return s.Synced == 1 })

	params := func(methods string) url.Values {
		return url.Values{"methods": {methods}, "version": {"1.0.0"}, "group": {"g1"}, "application": {"demo"},
			"pid": {"4242"}, "timestamp": {"1700000000000"}, "token": {"s3cret"}, "weight": {"0"}}
	}
	key := "providers:" + demoIface + ":1.0.0:g1"
	p1 := register(t, app, demoIface, providerURL("dubbo", "10.0.0.1:20880", demoIface, params("sayHello,greet")))
	rec.Eventually(t, "the first provider", func(s registrytest.State) bool { return len(s.Good[key]) == 1 })
	st := rec.State()
	svc := st.Last[key].Service
	want := dubbotest.IdentityHost(dubbo.Identity{Interface: demoIface, Group: "g1", Version: "1.0.0", Application: "demo"}, "")
	if svc.Host != want || !svc.PortPerProtocol {
		t.Fatalf("service %+v, want the Dubbo service named %q", svc, want)
	}
	inst := st.Good[key][0]
	if inst.ID != "10.0.0.1:20880" || inst.Protocol != "dubbo" || inst.Weight != 0 ||
		!slices.Equal(inst.Methods(), []string{"greet", "sayHello"}) {
		t.Errorf("instance %+v", inst)
	}
	// registries/dubbo rule 5: what users select by, not Dubbo's own.
	for _, k := range []string{"pid", "timestamp", "token", "methods", "interface", "side"} {
		if _, ok := inst.Labels[k]; ok {
			t.Errorf("label %s kept: %v", k, inst.Labels)
		}
	}
	if inst.Labels["version"] != "1.0.0" || inst.Labels["application"] != "demo" {
		t.Errorf("labels %v: want version and application", inst.Labels)
	}

	// The same process over tri: one instance with two ports. Another
	// process: a second instance.
	register(t, app, demoIface, providerURL("tri", "10.0.0.1:50051", demoIface, params("sayHello,greet")))
	register(t, app, demoIface, providerURL("tri", "10.0.0.2:50051", demoIface, params("greet")))
	rec.Eventually(t, "two instances, one with both protocols", func(s registrytest.State) bool {
		by := s.ByAddr(key)
		both := by["10.0.0.1:20880"]
		return len(s.Good[key]) == 2 && len(both.Ports()) == 2 && by["10.0.0.2:50051"].Protocol == "tri"
	})

	// A malformed URL and a consumer URL.
	register(t, app, demoIface, url.QueryEscape("dubbo://10.0.0.3:notaport/"+demoIface+"?version=1.0.0&group=g1"))
	register(t, app, demoIface, providerURL("consumer", "10.0.0.4:0", demoIface, url.Values{"side": {"consumer"}}))
	rec.Eventually(t, "the malformed URL passed on as Invalid", func(s registrytest.State) bool {
		n := 0
		for _, i := range s.Good[key] {
			if i.Invalid() != "" {
				n++
			}
		}
		return n == 1 && len(s.Good[key]) == 3
	})

	// Providers leave.
	if err := app.Delete(p1, -1); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "the dubbo URL gone: 10.0.0.1 serves tri only", func(s registrytest.State) bool {
		i, ok := s.ByAddr(key)["10.0.0.1:50051"]
		return ok && i.Protocol == "tri" && len(i.Ports()) == 0
	})
	children, _, err := app.Children("/dubbo/" + demoIface + "/providers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if err := app.Delete("/dubbo/"+demoIface+"/providers/"+c, -1); err != nil {
			t.Fatal(err)
		}
	}
	// While they leave one by one, the malformed URL alone may make a
	// service of its own for a moment (no version nor group to read).
	rec.Eventually(t, "every service removed with the last provider", func(s registrytest.State) bool {
		return len(s.Last) == 0
	})
	if last := rec.Snapshots(); !last[len(last)-1].Removed {
		t.Errorf("last snapshot %+v, want Removed", last[len(last)-1])
	}
}

// TestApplicationInstances: Dubbo 3 instances under /services make the
// application's service, with one port per dubbo.endpoints entry.
func TestApplicationInstances(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	_, rec := runRegistry(t, z, dubbo.Config{})
	path := harness.CreatePath(t, app, "/services/demo-app/10.0.0.1:20880",
		serviceInstance("demo-app", "10.0.0.1", 20880, `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`), zk.FlagEphemeral)
	rec.Eventually(t, "the application-level instance", func(s registrytest.State) bool {
		i, ok := s.ByAddr("demo-app")["10.0.0.1:20880"]
		return ok && len(i.Ports()) == 2
	})
	svc := rec.State().Last["demo-app"].Service
	if want := dubbotest.IdentityHost(dubbo.Identity{Application: "demo-app"}, ""); svc.Host != want || !svc.PortPerProtocol {
		t.Fatalf("service %+v, want the Dubbo service named %q", svc, want)
	}
	if l := svc.Instances[0].Labels; len(l) != 0 {
		t.Errorf("labels %v: want none (Dubbo's own metadata only, registries/dubbo rule 5)", l)
	}
	// A data change (the process's ports) is seen through the data watch.
	if _, err := app.Set(path, serviceInstance("demo-app", "10.0.0.1", 20880, `[{"port":50051,"protocol":"tri"}]`), -1); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "the new endpoints", func(s registrytest.State) bool {
		i, ok := s.ByAddr("demo-app")["10.0.0.1:50051"]
		return ok && i.Protocol == "tri" && len(i.Ports()) == 0
	})
	// Malformed JSON is passed on as Invalid; the good instance stays.
	harness.CreatePath(t, app, "/services/demo-app/10.0.0.2:20880", []byte("{not json"), zk.FlagEphemeral)
	rec.Eventually(t, "the malformed instance", func(s registrytest.State) bool {
		return len(s.Good["demo-app"]) == 2 && slices.ContainsFunc(s.Good["demo-app"], func(i registries.Instance) bool { return i.Invalid() != "" })
	})
	for _, p := range []string{path, "/services/demo-app/10.0.0.2:20880"} {
		if err := app.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	rec.Eventually(t, "the application removed", func(s registrytest.State) bool {
		_, ok := s.Last["demo-app"]
		return !ok
	})
}

// TestMode: mode selects which services are emitted.
func TestMode(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	register(t, app, demoIface, providerURL("tri", "10.0.0.1:50051", demoIface, nil))
	harness.CreatePath(t, app, "/services/demo-app/10.0.0.1:50051",
		serviceInstance("demo-app", "10.0.0.1", 50051, `[{"port":50051,"protocol":"tri"}]`), zk.FlagEphemeral)
	// The mapping is not an interface.
	harness.CreatePath(t, app, "/dubbo/mapping/"+demoIface, []byte("demo-app"), zk.FlagPersistent)
	for _, tc := range []struct {
		mode dubbo.Mode
		want []string
	}{
		{dubbo.ModeBoth, []string{"demo-app", "providers:" + demoIface + "::"}},
		{dubbo.ModeInterface, []string{"providers:" + demoIface + "::"}},
		{dubbo.ModeApplication, []string{"demo-app"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			_, rec := runRegistry(t, z, dubbo.Config{Mode: tc.mode})
			rec.Eventually(t, "synced", func(s registrytest.State) bool { return s.Synced == 1 })
			var got []string
			for k := range rec.State().Good {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("services %v, want %v", got, tc.want)
			}
		})
	}
}

// TestZooKeeperRestartKeepsEndpoints: while ZooKeeper is down the registry
// reports errors and removes nothing; once it is back, the state is
// re-listed and the watches work again.
func TestZooKeeperRestartKeepsEndpoints(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	key := "providers:" + demoIface + "::"
	register(t, app, demoIface, providerURL("tri", "10.0.0.1:50051", demoIface, nil))
	reg, rec := runRegistry(t, z, dubbo.Config{})
	rec.Eventually(t, "the provider", func(s registrytest.State) bool { return len(s.Good[key]) == 1 })

	if n := countErrors(rec.Snapshots()); n != 0 {
		t.Fatalf("%d error snapshots before the outage", n)
	}
	z.Stop()
	rec.Eventually(t, "an error snapshot", func(s registrytest.State) bool { return countErrors(s.All) > 0 })
	if reg.Health().Up {
		t.Errorf("registry up while ZooKeeper is down")
	}
	z.Restart(t)
	// The test's client kept its session: its provider node is still there.
	register(t, app, demoIface, providerURL("tri", "10.0.0.2:50051", demoIface, nil))
	rec.Eventually(t, "a provider registered after the restart", func(s registrytest.State) bool { return len(s.Good[key]) == 2 })
	if !reg.Health().Up {
		t.Errorf("registry not up after the restart")
	}
	for _, sn := range rec.Snapshots() {
		if sn.Removed || (sn.Err == nil && sn.Service.Name == key && len(sn.Service.Instances) == 0) {
			t.Errorf("snapshot %+v during the outage: endpoints must be kept", sn)
		}
	}
	if st := reg.WatcherStatus().(Status); st.Relists < 2 {
		t.Errorf("status %+v: want a re-list after the restart", st)
	}
}

// TestSessionExpiryRelists: ZooKeeper restarted empty expires every
// session; the registry gets a new one, re-lists (the old providers are
// gone: removed) and sets its watches again.
func TestSessionExpiryRelists(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	key := "providers:" + demoIface + "::"
	register(t, app, demoIface, providerURL("tri", "10.0.0.1:50051", demoIface, nil))
	reg, rec := runRegistry(t, z, dubbo.Config{})
	rec.Eventually(t, "the provider", func(s registrytest.State) bool { return len(s.Good[key]) == 1 })

	z.Stop()
	if err := os.RemoveAll(filepath.Join(z.Dir(), "data")); err != nil {
		t.Fatal(err)
	}
	z.Restart(t)
	rec.Eventually(t, "the provider removed: ZooKeeper came back empty", func(s registrytest.State) bool {
		_, ok := s.Last[key]
		return !ok
	})
	harness.EventuallyTrue(t, registrytest.DefaultTimeout, "a second session", func() bool {
		return reg.WatcherStatus().(Status).Sessions >= 2
	})
	// What a new client registers is seen: the old one is refused by the
	// emptied server, as the registry's first client was.
	register(t, z.Client(t), demoIface, providerURL("tri", "10.0.0.3:50051", demoIface, nil))
	rec.Eventually(t, "a provider registered in the new session", func(s registrytest.State) bool {
		_, ok := s.ByAddr(key)["10.0.0.3:50051"]
		return ok
	})
}

func countErrors(all []registries.Snapshot) int {
	n := 0
	for _, sn := range all {
		if sn.Err != nil {
			n++
		}
	}
	return n
}

// TestNothingListeningIsAnOutageAtOnce: with no server listening, the
// first refused connection is an outage at once, naming the address
// (Health's last error, a Snapshot error), not after the client's
// reconnect delay (twice the session timeout).
func TestNothingListeningIsAnOutageAtOnce(t *testing.T) {
	addr := "127.0.0.1:" + itoa(harness.FreePort(t))
	b := &Block{Servers: []string{addr}, SessionTimeout: duration("30s")}
	b.Default()
	reg, err := b.New("zk-down", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rec := registrytest.Run(t, reg, 10*time.Second)
	rec.Eventually(t, "an error snapshot naming the address", func(st registrytest.State) bool {
		for _, s := range st.All {
			if s.Err != nil && strings.Contains(s.Err.Error(), addr) && strings.Contains(s.Err.Error(), "connection refused") {
				return true
			}
		}
		return false
	})
	if h := reg.(*Registry).Health(); h.Up || !strings.Contains(h.LastError, addr) {
		t.Errorf("Health = %+v, want down with the refused connection as its last error", h)
	}
}

// TestApplicationMethodsFromRemoteMetadata: an application-level service
// whose instances keep their MetadataInfo remote gets the methods it lists,
// at Dubbo Java's layout (/dubbo/metadata/<app>/<revision>) and at
// dubbo-go's (/dubbo/<app>/<revision>); a new revision's methods replace the
// old ones (doc.go rule 9).
func TestApplicationMethodsFromRemoteMetadata(t *testing.T) {
	z := harness.StartZooKeeper(t)
	conn := z.Client(t)
	_, rec := runRegistry(t, z, dubbo.Config{})
	instance := func(app, ip, rev string) []byte {
		return []byte(`{"name":"` + app + `","id":"` + ip + `:20880","address":"` + ip + `","port":20880,"payload":{"metadata":{` +
			`"dubbo.endpoints":"[{\"port\":20880,\"protocol\":\"dubbo\"}]","dubbo.metadata.revision":"` + rev +
			`","dubbo.metadata.storage-type":"remote"}}}`)
	}
	info := func(app, rev, methods string) []byte {
		return []byte(`{"app":"` + app + `","revision":"` + rev + `","services":{"com.foo.S::dubbo":{"name":"com.foo.S","params":{"methods":"` +
			methods + `"}}}}`)
	}
	for _, tc := range []struct{ layout, app, metaPath string }{
		{"Dubbo Java", "java-app", "/dubbo/metadata/java-app/r1"},
		{"dubbo-go", "go-app", "/dubbo/go-app/r1"},
	} {
		harness.CreatePath(t, conn, tc.metaPath, info(tc.app, "r1", "b,a"), 0)
		harness.CreatePath(t, conn, "/services/"+tc.app+"/10.0.0.1:20880", instance(tc.app, "10.0.0.1", "r1"), zk.FlagEphemeral)
		rec.Eventually(t, tc.layout+": the application's methods from its remote MetadataInfo", func(s registrytest.State) bool {
			in, ok := s.ByAddr(tc.app)["10.0.0.1:20880"]
			return ok && slices.Equal(in.Methods(), []string{"a", "b"})
		})
	}
	// A redeploy: a new revision, its MetadataInfo written first.
	harness.CreatePath(t, conn, "/dubbo/metadata/java-app/r2", info("java-app", "r2", "c"), 0)
	if _, err := conn.Set("/services/java-app/10.0.0.1:20880", instance("java-app", "10.0.0.1", "r2"), -1); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "the new revision's methods", func(s registrytest.State) bool {
		in, ok := s.ByAddr("java-app")["10.0.0.1:20880"]
		return ok && slices.Equal(in.Methods(), []string{"c"})
	})
}

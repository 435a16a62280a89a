package zookeeper

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// springJSON is a ServiceInstance as Spring Cloud Zookeeper writes it
// (Curator's JsonInstanceSerializer of a ZookeeperInstance payload); port
// and sslPort nil are Curator's null.
func springJSON(app, id, address string, port, sslPort *int, meta map[string]string) []byte {
	type zookeeperInstance struct {
		Class    string            `json:"@class"`
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		Metadata map[string]string `json:"metadata"`
	}
	b, err := json.Marshal(struct {
		Name                string            `json:"name"`
		ID                  string            `json:"id"`
		Address             string            `json:"address"`
		Port                *int              `json:"port"`
		SSLPort             *int              `json:"sslPort"`
		Payload             zookeeperInstance `json:"payload"`
		RegistrationTimeUTC int64             `json:"registrationTimeUTC"`
		ServiceType         string            `json:"serviceType"`
		URISpec             json.RawMessage   `json:"uriSpec"`
	}{
		Name: app, ID: id, Address: address, Port: port, SSLPort: sslPort,
		Payload: zookeeperInstance{Class: "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
			ID: app + "-1", Name: app, Metadata: meta},
		RegistrationTimeUTC: 1700000000000, ServiceType: "DYNAMIC",
		URISpec: json.RawMessage(`{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},` +
			`{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true}]}`),
	})
	if err != nil {
		panic(err)
	}
	return b
}

func intp(n int) *int { return &n }

func TestSpringInstance(t *testing.T) {
	const app, child = "orders", "6b1c0d2e-0000-4000-8000-000000000001"
	id := app + "/" + child
	up := map[string]string{"instance_status": "UP", "zone": "z1"}
	for _, tc := range []struct {
		name string
		data []byte
		want registries.Instance // zero with skip or invalid
		skip string              // substring of the skip reason
		bad  string              // substring of Invalid
	}{
		{name: "spring", data: springJSON(app, child, "10.0.0.5", intp(8080), nil, up),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http", Locality: "/z1/", Labels: up}},
		{name: "status absent is up", data: springJSON(app, child, "10.0.0.5", intp(8080), nil, nil),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http"}},
		{name: "status in lower case", data: springJSON(app, child, "10.0.0.5", intp(8080), nil, map[string]string{"instance_status": "up"}),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http", Labels: map[string]string{"instance_status": "up"}}},
		{name: "out of service", data: springJSON(app, child, "10.0.0.5", intp(8080), nil, map[string]string{"instance_status": "OUT_OF_SERVICE"}),
			skip: "instance_status is OUT_OF_SERVICE"},
		{name: "down", data: springJSON(app, child, "10.0.0.5", intp(8080), nil, map[string]string{"instance_status": "DOWN"}), skip: "DOWN"},
		{name: "disabled", data: []byte(`{"name":"orders","id":"x","address":"10.0.0.5","port":8080,"enabled":false}`), skip: "enabled is false"},
		{name: "enabled", data: []byte(`{"name":"orders","id":"x","address":"10.0.0.5","port":8080,"enabled":true,"payload":null}`),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http"}},
		{name: "hostname", data: springJSON(app, child, "orders-3.example.internal", intp(8080), nil, nil),
			want: registries.Instance{ID: id, Address: "orders-3.example.internal", Port: 8080, Protocol: "http"}},
		{name: "port and sslPort", data: springJSON(app, child, "10.0.0.6", intp(8080), intp(8443), nil),
			want: registries.Instance{ID: id, Address: "10.0.0.6", Port: 8080, Protocol: "http"}},
		{name: "sslPort only", data: springJSON(app, child, "10.0.0.6", nil, intp(8443), nil),
			want: registries.Instance{ID: id, Address: "10.0.0.6", Port: 8443, Protocol: "https"}},
		{name: "sslPort is port", data: springJSON(app, child, "10.0.0.6", intp(8443), intp(8443), nil),
			want: registries.Instance{ID: id, Address: "10.0.0.6", Port: 8443, Protocol: "http"}},
		{name: "declared protocol", data: springJSON(app, child, "10.0.0.6", intp(9090), intp(8443), map[string]string{"protocol": "grpc"}),
			want: registries.Instance{ID: id, Address: "10.0.0.6", Port: 9090, Protocol: "grpc", Labels: map[string]string{"protocol": "grpc"}}},
		{name: "full locality", data: springJSON(app, child, "10.0.0.5", intp(8080), nil, map[string]string{"region": "r", "zone": "z", "subzone": "s"}),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http", Locality: "r/z/s",
				Labels: map[string]string{"region": "r", "zone": "z", "subzone": "s"}}},
		{name: "payload not Spring's", data: []byte(`{"name":"orders","id":"x","address":"10.0.0.5","port":8080,"payload":"From Test"}`),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http"}},
		{name: "metadata not strings", data: []byte(`{"name":"orders","id":"x","address":"10.0.0.5","port":8080,"payload":{"metadata":{"n":1,"b":true,"z":null}}}`),
			want: registries.Instance{ID: id, Address: "10.0.0.5", Port: 8080, Protocol: "http", Labels: map[string]string{"n": "1", "b": "true"}}},
		{name: "not JSON", data: []byte("{not json"), bad: "ServiceInstance JSON"},
		{name: "empty node", data: nil, bad: "empty node"},
		{name: "port a string", data: []byte(`{"name":"orders","address":"10.0.0.5","port":"8080"}`), bad: "ServiceInstance JSON"},
		{name: "no address", data: springJSON(app, child, "", intp(8080), nil, nil), bad: "no address"},
		{name: "no port", data: springJSON(app, child, "10.0.0.5", nil, nil, nil), bad: "neither port nor sslPort"},
		{name: "port zero", data: springJSON(app, child, "10.0.0.5", intp(0), nil, nil), bad: "port 0 is not in 1-65535"},
		{name: "port too big", data: springJSON(app, child, "10.0.0.5", intp(8080), intp(70000), nil), bad: "port 70000"},
		{name: "another application", data: springJSON("payments", child, "10.0.0.5", intp(8080), nil, nil), bad: `name "payments" is not its application "orders"`},
		// A malformed node is reported even when its status says down:
		// it cannot be read, so its status cannot be trusted either.
		{name: "no address, out of service", data: springJSON(app, child, "", intp(8080), nil, map[string]string{"instance_status": "OUT_OF_SERVICE"}), bad: "no address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := springInstance(app, child, tc.data)
			switch {
			case tc.skip != "":
				if !strings.Contains(got.skip, tc.skip) {
					t.Errorf("got %+v, want skipped: %q", got, tc.skip)
				}
			case tc.bad != "":
				if got.skip != "" || got.inst.ID != id || !strings.Contains(got.inst.Invalid(), tc.bad) {
					t.Errorf("got %+v (invalid %q), want Invalid with %q", got, got.inst.Invalid(), tc.bad)
				}
			default:
				if got.skip != "" || !registries.SameInstances([]registries.Instance{got.inst}, []registries.Instance{tc.want}) ||
					!slices.Equal(got.inst.Ports(), tc.want.Ports()) || got.inst.Invalid() != "" {
					t.Errorf("got %+v (skip %q, ports %v)\nwant %+v (ports %v)", got.inst, got.skip, got.inst.Ports(), tc.want, tc.want.Ports())
				}
			}
		})
	}
}

// TestSpringInstanceLabelsAreRaw: the labels are the metadata as written,
// keys and values unsanitised (translate sanitises them).
func TestSpringInstanceLabelsAreRaw(t *testing.T) {
	meta := map[string]string{"instance_status": "UP", "zone": "z1", "Weird Key": "a value/with stuff"}
	got := springInstance("orders", "x", springJSON("orders", "x", "10.0.0.5", intp(8080), nil, meta))
	if !maps.Equal(got.inst.Labels, meta) {
		t.Errorf("labels %v, want the metadata as written %v (translate sanitises)", got.inst.Labels, meta)
	}
}

func TestSpringService(t *testing.T) {
	nodes := map[string]springResult{
		"b": springInstance("orders", "b", springJSON("orders", "b", "10.0.0.2", intp(8080), nil, nil)),
		"a": springInstance("orders", "a", springJSON("orders", "a", "10.0.0.1", intp(8080), nil, nil)),
		"c": springInstance("orders", "c", springJSON("orders", "c", "10.0.0.3", intp(8080), nil, map[string]string{"instance_status": "OUT_OF_SERVICE"})),
		"d": springInstance("orders", "d", []byte("{")),
	}
	svc := springService("orders", nodes)
	var ids []string
	for _, i := range svc.Instances {
		ids = append(ids, i.ID)
	}
	if svc.Name != "orders" || svc.Host != "" || svc.PortPerProtocol || !slices.Equal(ids, []string{"orders/a", "orders/b", "orders/d"}) {
		t.Errorf("service %+v (ids %v): want orders, named by the host template, one port per instance, a, b and the malformed d", svc, ids)
	}
	if svc := springService("orders", map[string]springResult{"c": nodes["c"]}); len(svc.Instances) != 0 {
		t.Errorf("service %+v: want no instance served", svc)
	}
}

// runSpringRegistry runs a zookeeper registry of layout spring-cloud on z,
// root "" being the default, until the test ends.
func runSpringRegistry(t *testing.T, z *harness.ZooKeeper, root string) (*Registry, *registrytest.Recorder) {
	t.Helper()
	b := &Block{Servers: z.Servers(), SessionTimeout: duration("2s"), Layout: LayoutSpringCloud, Root: root}
	b.Default()
	if errs := b.Validate(); len(errs) > 0 {
		t.Fatalf("Validate: %v", errs)
	}
	reg, err := b.New("zk-spring", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return reg.(*Registry), registrytest.Run(t, reg, 20*time.Second)
}

// springRegister registers an instance as Spring Cloud Zookeeper does
// (Curator ServiceDiscovery.registerService): its parents are container
// nodes, created as needed, and the instance node, <root>/<app>/<id>, is
// ephemeral, owned by conn's session. It returns the node's path.
func springRegister(t *testing.T, conn *zk.Conn, root, app, id string, data []byte) string {
	t.Helper()
	p := path.Join(root, app, id)
	acl := zk.WorldACL(zk.PermAll)
	for i := 1; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		if _, err := conn.CreateContainer(p[:i], nil, zk.FlagContainer, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create container %s: %v", p[:i], err)
		}
	}
	if _, err := conn.Create(p, data, zk.FlagEphemeral, acl); err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	return p
}

// TestSpringCloudInstances: Spring Cloud Zookeeper instances under
// /services: several per machine on their own ports, a hostname, an
// sslPort, OUT_OF_SERVICE and back, a malformed node; a closed session
// (the process gone) removes its instances, and an application without
// instances is removed.
func TestSpringCloudInstances(t *testing.T) {
	z := harness.StartZooKeeper(t)
	orders := z.Client(t) // the orders processes' session
	reg, rec := runSpringRegistry(t, z, "")
	rec.Eventually(t, "synced on an empty ensemble", func(s registrytest.State) bool { return s.Synced == 1 })

	const root = DefaultSpringCloudRoot
	up := map[string]string{"instance_status": "UP", "zone": "z1"}
	springRegister(t, orders, root, "orders", "a", springJSON("orders", "a", "10.0.0.5", intp(8080), nil, up))
	springRegister(t, orders, root, "orders", "b", springJSON("orders", "b", "10.0.0.5", intp(8081), nil, up))
	springRegister(t, orders, root, "orders", "c", springJSON("orders", "c", "orders-3.example.internal", intp(8080), nil, nil))
	springRegister(t, orders, root, "orders", "d", springJSON("orders", "d", "10.0.0.6", intp(8080), intp(8443), nil))
	e := springRegister(t, orders, root, "orders", "e", springJSON("orders", "e", "10.0.0.7", intp(8080), nil,
		map[string]string{"instance_status": "OUT_OF_SERVICE"}))
	springRegister(t, orders, root, "orders", "f", []byte("{not json"))
	rec.Eventually(t, "five instances, one malformed, the one out of service left out", func(s registrytest.State) bool {
		return slices.Equal(s.IDs("orders"), []string{"orders/a", "orders/b", "orders/c", "orders/d", "orders/f"})
	})
	st := rec.State()
	svc := st.Last["orders"].Service
	if svc.Host != "" || svc.PortPerProtocol {
		t.Errorf("service %+v: want it named by the host template, one port per instance", svc)
	}
	by := map[string]registries.Instance{}
	for _, i := range st.Good["orders"] {
		by[i.ID] = i
	}
	if a := by["orders/a"]; a.Address != "10.0.0.5" || a.Port != 8080 || a.Protocol != "http" || a.Locality != "/z1/" || !maps.Equal(a.Labels, up) {
		t.Errorf("instance a %+v", a)
	}
	if b := by["orders/b"]; b.Address != "10.0.0.5" || b.Port != 8081 {
		t.Errorf("instance b %+v: want the same machine on its own port", b)
	}
	if c := by["orders/c"]; c.Address != "orders-3.example.internal" {
		t.Errorf("instance c %+v: want its hostname", c)
	}
	if d := by["orders/d"]; d.Port != 8080 || d.Protocol != "http" || d.Ports() != nil {
		t.Errorf("instance d %+v: want its port (not its sslPort)", d)
	}
	if f := by["orders/f"]; !strings.Contains(f.Invalid(), "ServiceInstance JSON") {
		t.Errorf("instance f %+v: want Invalid", f)
	}

	// Spring's status endpoint rewrites the node's metadata: seen through
	// the data watch, both ways.
	if _, err := orders.Set(e, springJSON("orders", "e", "10.0.0.7", intp(8080), nil, map[string]string{"instance_status": "UP"}), -1); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "e back in service", func(s registrytest.State) bool { return slices.Contains(s.IDs("orders"), "orders/e") })
	if _, err := orders.Set(e, springJSON("orders", "e", "10.0.0.7", intp(8080), nil, map[string]string{"instance_status": "OUT_OF_SERVICE"}), -1); err != nil {
		t.Fatal(err)
	}
	rec.Eventually(t, "e out of service again", func(s registrytest.State) bool {
		return len(s.Good["orders"]) == 5 && !slices.Contains(s.IDs("orders"), "orders/e")
	})

	// Another application in a session of its own: a process that stops
	// closes its session, and ZooKeeper deletes its ephemeral node.
	payments := z.Client(t)
	springRegister(t, payments, root, "payments", "p1", springJSON("payments", "p1", "10.0.1.1", intp(9000), nil, nil))
	rec.Eventually(t, "payments", func(s registrytest.State) bool { return len(s.Good["payments"]) == 1 })
	payments.Close()
	rec.Eventually(t, "payments removed with its session", func(s registrytest.State) bool {
		_, ok := s.Last["payments"]
		return !ok && len(s.Good["orders"]) == 5
	})

	// An application whose every node is out of service stays listed,
	// with nothing served; deleting its nodes (an orderly deregistration)
	// and its container node removes it.
	children, _, err := orders.Children(root + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if c != "e" {
			if err := orders.Delete(root+"/orders/"+c, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec.Eventually(t, "orders listed with no instance served", func(s registrytest.State) bool {
		last, ok := s.Last["orders"]
		return ok && !last.Removed && last.Err == nil && len(last.Service.Instances) == 0
	})
	if err := orders.Delete(e, -1); err != nil {
		t.Fatal(err)
	}
	if err := orders.Delete(root+"/orders", -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	rec.Eventually(t, "orders removed", func(s registrytest.State) bool {
		_, ok := s.Last["orders"]
		return !ok
	})
	if n := countErrors(rec.Snapshots()); n != 0 {
		t.Errorf("%d error snapshots", n)
	}
	if st := reg.WatcherStatus().(Status); st.Layout != LayoutSpringCloud || st.Root != root || st.Mode != "" {
		t.Errorf("status %+v", st)
	}
}

// TestSpringCloudRoot: a configured root (spring.cloud.zookeeper.discovery.root)
// is read, created after the registry starts; Dubbo's nodes and another
// root's instances are not.
func TestSpringCloudRoot(t *testing.T) {
	z := harness.StartZooKeeper(t)
	conn := z.Client(t)
	register(t, conn, demoIface, providerURL("tri", "10.0.0.1:50051", demoIface, nil))
	springRegister(t, conn, "/services", "other", "o1", springJSON("other", "o1", "10.0.0.9", intp(8080), nil, nil))
	_, rec := runSpringRegistry(t, z, "/apps/discovery")
	rec.Eventually(t, "synced with the root missing", func(s registrytest.State) bool { return s.Synced == 1 })
	springRegister(t, conn, "/apps/discovery", "orders", "a", springJSON("orders", "a", "10.0.0.5", intp(8080), nil, nil))
	rec.Eventually(t, "orders under the configured root", func(s registrytest.State) bool {
		return slices.Equal(s.IDs("orders"), []string{"orders/a"})
	})
	if got := slices.Sorted(maps.Keys(rec.State().Last)); !slices.Equal(got, []string{"orders"}) {
		t.Errorf("services %v, want orders alone", got)
	}
}

// TestSpringCloudOutageKeepsEndpoints: while ZooKeeper is down the
// registry reports errors and removes nothing (the instances' session
// outlives the restart); once it is back, new instances are seen.
func TestSpringCloudOutageKeepsEndpoints(t *testing.T) {
	z := harness.StartZooKeeper(t)
	app := z.Client(t)
	springRegister(t, app, DefaultSpringCloudRoot, "orders", "a", springJSON("orders", "a", "10.0.0.5", intp(8080), nil, nil))
	reg, rec := runSpringRegistry(t, z, "")
	rec.Eventually(t, "the instance", func(s registrytest.State) bool { return len(s.Good["orders"]) == 1 })
	z.Stop()
	rec.Eventually(t, "an error snapshot", func(s registrytest.State) bool { return countErrors(s.All) > 0 })
	z.Restart(t)
	springRegister(t, app, DefaultSpringCloudRoot, "orders", "b", springJSON("orders", "b", "10.0.0.5", intp(8081), nil, nil))
	rec.Eventually(t, "an instance registered after the restart", func(s registrytest.State) bool { return len(s.Good["orders"]) == 2 })
	for _, sn := range rec.Snapshots() {
		if sn.Removed || (sn.Err == nil && sn.Service.Name == "orders" && len(sn.Service.Instances) == 0) {
			t.Errorf("snapshot %+v during the outage: endpoints must be kept", sn)
		}
	}
	harness.EventuallyTrue(t, registrytest.DefaultTimeout, "the registry up", func() bool { return reg.Health().Up })
}

// TestSpringCloudRealApp: a real Spring Cloud Zookeeper application
// (tools/spring-cloud, harness.StartSpringApp) is served as Spring
// registers it, and SIGTERM (Spring deregisters, its session closes)
// removes it.
func TestSpringCloudRealApp(t *testing.T) {
	z := harness.StartZooKeeper(t)
	_, rec := runSpringRegistry(t, z, "")
	app := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "zookeeper", Address: z.Address(), Name: "orders",
		Metadata: map[string]string{"version": "v1", "zone": "z1"}})
	rec.Eventually(t, "the Spring application served", func(s registrytest.State) bool {
		i, ok := s.ByAddr("orders")["127.0.0.1:"+itoa(app.Port())]
		return ok && len(s.Good["orders"]) == 1 && i.Invalid() == ""
	})
	i := rec.State().Good["orders"][0]
	if !strings.HasPrefix(i.ID, "orders/") || i.Protocol != "http" || i.Locality != "/z1/" ||
		i.Labels["version"] != "v1" || i.Labels["instance_status"] != "UP" {
		t.Errorf("instance %+v", i)
	}
	app.Stop()
	rec.Eventually(t, "the application removed on SIGTERM", func(s registrytest.State) bool {
		_, ok := s.Last["orders"]
		return !ok
	})
	if n := countErrors(rec.Snapshots()); n != 0 {
		t.Errorf("%d error snapshots", n)
	}
}

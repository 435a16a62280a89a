package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/test/harness"
)

// registryzOf returns the bridge's /debug/registryz entry of registry name.
func registryzOf(t testing.TB, b *bridge, name string) map[string]any {
	t.Helper()
	var entries []map[string]any
	if err := json.Unmarshal([]byte(b.get("/debug/registryz")), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e["name"] == name {
			return e
		}
	}
	t.Fatalf("no registry %s on /debug/registryz", name)
	return nil
}

// consulMeshOf registers n services svc-<i>, one passing instance each on
// port, and returns the mesh xDS should serve.
func consulMeshOf(t *testing.T, consul *harness.Consul, n, port int) map[string][]string {
	t.Helper()
	want := map[string][]string{}
	for i := range n {
		name := fmt.Sprintf("svc-%02d", i)
		consul.RegisterInstance(t, name, name+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
		want[name+".service.consul"] = []string{"127.0.0.1:" + strconv.Itoa(port)}
	}
	return want
}

// TestDeleteGuardHoldsAnEmptiedConsul: a Consul agent restarted with an
// empty catalog would remove every service at once; the delete guard holds
// that (xDS keeps serving everything, /readyz and /debug/registryz say so)
// until it is confirmed through the debug endpoint.
func TestDeleteGuardHoldsAnEmptiedConsul(t *testing.T) {
	consul := harness.StartConsul(t)
	want := consulMeshOf(t, consul, 12, 7070)
	b := startBridge(t, consulRegistry(consul))
	w := watchXDS(t, b.xdsAddr)
	w.waitFor(30*time.Second, "every service", want)

	consul.Restart(t) // a dev agent: the catalog comes back empty
	eventually(t, 60*time.Second, "the delete guard engaged", func() error {
		if g := registryzOf(t, b, "consul-e2e")["deleteGuard"]; g == nil {
			return fmt.Errorf("no deleteGuard on /debug/registryz")
		}
		return nil
	})
	if got := w.hosts(); !equalMesh(got, want) {
		t.Fatalf("xDS while the guard holds: %v, want every service", got)
	}
	if body := b.get("/readyz"); !strings.Contains(body, "delete guard holds the removal of 12 services") {
		t.Errorf("/readyz says %q", body)
	}
	if v, ok := mustScrape(t, b).get(`meshbridge_delete_guard_held{registry="consul-e2e"}`); !ok || v != 1 {
		t.Errorf("meshbridge_delete_guard_held = %v", v)
	}

	resp, err := http.Post("http://"+b.debugAddr+"/debug/registryz/consul-e2e/confirm", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %s", resp.Status)
	}
	w.waitFor(30*time.Second, "an empty mesh after the confirmation", map[string][]string{})
	resp, err = http.Post("http://"+b.debugAddr+"/debug/registryz/consul-e2e/confirm", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("a second confirm: %s, want 409", resp.Status)
	}
	resp, err = http.Post("http://"+b.debugAddr+"/debug/registryz/no-such-registry/confirm", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("confirming an unknown registry: %s, want 404", resp.Status)
	}
}

// TestPersistedStateServedWhileConsulIsDown: a bridge restarted while
// Consul is down serves the listing it persisted (state.dir) once
// sync.timeout passes, says so on /readyz, and converges when Consul is
// back. Without state.dir it serves nothing of that registry meanwhile.
func TestPersistedStateServedWhileConsulIsDown(t *testing.T) {
	consul := harness.StartConsul(t)
	want := consulMeshOf(t, consul, 3, 7070)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	regs := consulRegistry(consul) + fmt.Sprintf("state: {dir: %q}\n", state)
	b := startBridgeSync(t, regs, 3*time.Second)
	w := watchXDS(t, b.xdsAddr)
	w.waitFor(30*time.Second, "every service", want)
	eventually(t, 15*time.Second, "the listing persisted", func() error {
		data, err := os.ReadFile(filepath.Join(state, "consul-e2e.json"))
		if err != nil {
			return err
		}
		if n := strings.Count(string(data), `"Name":"svc-`); n != 3 {
			return fmt.Errorf("%d services persisted", n)
		}
		return nil
	})

	b.proc.stop()
	consul.Stop()
	b.start() // returns once /readyz is 200: after sync.timeout
	w = watchXDS(t, b.xdsAddr)
	w.waitFor(30*time.Second, "the persisted mesh", want)
	if body := b.get("/readyz"); !strings.Contains(body, "served from its persisted listing") {
		t.Errorf("/readyz says %q", body)
	}
	if e := registryzOf(t, b, "consul-e2e"); e["fromDisk"] != true || e["stale"] != true {
		t.Errorf("/debug/registryz: fromDisk %v, stale %v", e["fromDisk"], e["stale"])
	}

	// Consul is back (a dev agent: empty) with one of the services again.
	consul.Restart(t)
	consul.RegisterInstance(t, "svc-00", "svc-00-1", "127.0.0.1", 7070, nil, grpcMeta, api.HealthPassing)
	w.waitFor(60*time.Second, "the mesh Consul serves", map[string][]string{"svc-00.service.consul": {"127.0.0.1:7070"}})
	if e := registryzOf(t, b, "consul-e2e"); e["fromDisk"] == true {
		t.Errorf("still served from disk after Consul answered")
	}

	// Without state.dir: nothing of the registry while Consul is down.
	consul.Stop()
	nb := startBridgeSync(t, consulRegistry(consul), 3*time.Second)
	nw := watchXDS(t, nb.xdsAddr)
	nw.waitFor(15*time.Second, "an empty mesh", map[string][]string{})
	if body := nb.get("/readyz"); !strings.Contains(body, "no complete listing yet") {
		t.Errorf("/readyz without state.dir says %q", body)
	}
}

// TestSameHostFromTwoRegistriesMerges: a service in Consul and the same host
// in the file registry are one ServiceEntry with the endpoints of both;
// Consul going down leaves both registries' endpoints.
func TestSameHostFromTwoRegistriesMerges(t *testing.T) {
	consul := harness.StartConsul(t)
	consul.RegisterInstance(t, "web", "web-1", "127.0.0.1", 7070, nil, grpcMeta, api.HealthPassing)
	file := filepath.Join(t.TempDir(), "services.yaml")
	writeFileAtomic(t, file, `services:
- host: web.service.consul
  ports: [{number: 7070, protocol: grpc}]
  instances:
  - {address: 127.0.0.2, port: 7070}
`)
	regs := consulRegistry(consul) + fmt.Sprintf("- name: files\n  type: file\n  file: {path: %q}\n", file)
	b := startBridge(t, regs)
	w := watchXDS(t, b.xdsAddr)
	both := map[string][]string{"web.service.consul": {"127.0.0.1:7070", "127.0.0.2:7070"}}
	w.waitFor(30*time.Second, "both registries' endpoints", both)
	objs, err := servedObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	if se := objs["ServiceEntry/web.service.consul"]; se.Labels["meshbridge.io/registry"] != "consul-e2e" {
		t.Errorf("ServiceEntry labels %v: want the first registry's", se.Labels)
	}
	consul.Stop()
	eventually(t, 30*time.Second, "Consul seen down", func() error {
		if registryzOf(t, b, "consul-e2e")["up"] == true {
			return fmt.Errorf("still up")
		}
		return nil
	})
	if got := w.hosts(); !equalMesh(got, both) {
		t.Errorf("with Consul down: %v, want both endpoints", got)
	}
}

// faultMesh starts a persistent Consul server with n services of two
// instances each, a bridge on it, and watchers xDS clients that have the
// whole mesh.
func faultMesh(t *testing.T, n, watchers int) (*harness.Consul, *bridge, []*xdsWatch, map[string][]string) {
	t.Helper()
	consul := harness.StartConsulServer(t, t.TempDir(), harness.FreeConsulPorts(t))
	want := map[string][]string{}
	for i := range n {
		name := fmt.Sprintf("svc-%02d", i)
		for k := 1; k <= 2; k++ {
			consul.RegisterInstance(t, name, fmt.Sprintf("%s-%d", name, k), fmt.Sprintf("127.0.0.%d", k), 7070, nil, grpcMeta, api.HealthPassing)
		}
		want[name+".service.consul"] = []string{"127.0.0.1:7070", "127.0.0.2:7070"}
	}
	b := startBridge(t, consulRegistry(consul))
	ws := make([]*xdsWatch, watchers)
	for i := range ws {
		ws[i] = watchXDS(t, b.xdsAddr)
	}
	for i, w := range ws {
		w.waitFor(60*time.Second, fmt.Sprintf("watcher %d: the mesh", i), want)
	}
	return consul, b, ws, want
}

// checkNothingRemoved fails t for every watcher that saw an endpoint leave.
func checkNothingRemoved(t *testing.T, ws []*xdsWatch, when string) {
	t.Helper()
	for i, w := range ws {
		if n := w.losses(); n != 0 {
			t.Errorf("%s: watcher %d saw %d endpoints removed", when, i, n)
		}
	}
}

// seenDown waits, up to 15 s, until every signal an operator has says
// registry is down: meshbridge_registry_up 0, /readyz degraded, /debug/registryz
// and `meshbridge status` (UP no).
func seenDown(t *testing.T, b *bridge, registry string) {
	t.Helper()
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(registry) + `\s+consul\s+no\s+yes\s`)
	eventually(t, 15*time.Second, "the registry seen down", func() error {
		if v, ok := mustScrape(t, b).get(`meshbridge_registry_up{registry="` + registry + `"}`); !ok || v != 0 {
			return fmt.Errorf("meshbridge_registry_up = %v (exposed %v)", v, ok)
		}
		if body := b.get("/readyz"); !strings.Contains(body, "registry "+registry+": serving last-known-good state (up: false") {
			return fmt.Errorf("/readyz says %q", body)
		}
		if e := registryzOf(t, b, registry); e["up"] != false {
			return fmt.Errorf("/debug/registryz: up %v", e["up"])
		}
		out, err := exec.Command(bins.meshbridge, "status", "--address", b.debugAddr).CombinedOutput()
		if err != nil || !row.Match(out) {
			return fmt.Errorf("meshbridge status (%v):\n%s", err, out)
		}
		return nil
	})
}

// consulOutageScenario holds an outage of Consul (down, then up after
// outage) while 50 xDS clients watch: the registry is seen down within
// 15 s (metric, /readyz, status) and no endpoint leaves; after Consul is
// back, the registry is up within 2 s, and a change reaches every client
// (within 5 s plus the Consul watcher's retry backoff, at most 10 s).
func consulOutageScenario(t *testing.T, down, up func(*harness.Consul), outage time.Duration) {
	consul, b, ws, want := faultMesh(t, 5, 50)
	began := time.Now()
	down(consul)
	seenDown(t, b, "consul-e2e")
	t.Logf("the registry was seen down %s after the outage began", time.Since(began).Round(time.Millisecond))
	<-time.After(outage - time.Since(began)) // the outage's length: a scenario parameter, not a wait for a condition
	checkNothingRemoved(t, ws, "during the outage")
	up(consul)
	eventually(t, 2*time.Second, "the registry up again", func() error {
		if e := registryzOf(t, b, "consul-e2e"); e["up"] != true {
			return fmt.Errorf("/debug/registryz: up %v, failing readers %v, last error %v", e["up"], e["failing"], e["lastError"])
		}
		return nil
	})
	consul.RegisterInstance(t, "after", "after-1", "127.0.0.3", 7070, nil, grpcMeta, api.HealthPassing)
	want["after.service.consul"] = []string{"127.0.0.3:7070"}
	back := time.Now()
	for i, w := range ws {
		w.waitFor(20*time.Second, fmt.Sprintf("watcher %d: the change after the outage", i), want)
	}
	t.Logf("every watcher had the change %s after Consul was back", time.Since(back).Round(time.Millisecond))
	checkNothingRemoved(t, ws, "after the outage")
	// Every per-service read recovers within its retry backoff (at most
	// 10 s) of Consul's return.
	eventually(t, 20*time.Second, "every read of the registry recovered", func() error {
		if e := registryzOf(t, b, "consul-e2e"); e["up"] != true || e["stale"] == true {
			return fmt.Errorf("up %v, stale %v, staleServices %v", e["up"], e["stale"], e["staleServices"])
		}
		return nil
	})
	t.Logf("the registry was up and fresh %s after Consul was back", time.Since(back).Round(time.Millisecond))
}

// TestConsulKilledRemovesNothing: Consul stopped for 30 s, then started
// again with its data.
func TestConsulKilledRemovesNothing(t *testing.T) {
	t.Parallel()
	consulOutageScenario(t, func(c *harness.Consul) { c.Stop() }, func(c *harness.Consul) { c.Restart(t) }, 30*time.Second)
}

// TestConsulHungRemovesNothing: Consul stopped with SIGSTOP for 30 s (a
// hung server: reads time out, connections stay), then continued.
func TestConsulHungRemovesNothing(t *testing.T) {
	t.Parallel()
	consulOutageScenario(t, func(c *harness.Consul) {
		c.Pause(t)
		t.Cleanup(func() { c.Resume(t) })
	}, func(c *harness.Consul) { c.Resume(t) }, 30*time.Second)
}

// TestConsulFlappingRemovesNothing: Consul hung and continued every second
// for 30 s: endpoints never leave, and the pushes stay bounded.
func TestConsulFlappingRemovesNothing(t *testing.T) {
	t.Parallel()
	consul, b, ws, want := faultMesh(t, 5, 10)
	before := mustScrape(t, b).sum("meshbridge_pushes_total")
	t.Cleanup(func() { consul.Resume(t) })
	for range 15 {
		consul.Pause(t)
		<-time.After(time.Second) // the flapping's period: a scenario parameter
		consul.Resume(t)
		<-time.After(time.Second)
	}
	checkNothingRemoved(t, ws, "while Consul flapped")
	pushes := mustScrape(t, b).sum("meshbridge_pushes_total") - before
	t.Logf("%v pushes while Consul flapped for 30 s", pushes)
	if pushes > 30 {
		t.Errorf("%v pushes while nothing changed, want at most 30", pushes)
	}
	for i, w := range ws {
		w.waitFor(20*time.Second, fmt.Sprintf("watcher %d: the mesh", i), want)
	}
}

// TestServiceFlappingIsBounded: an instance registered and deregistered
// every 500 ms for 30 s: each flip is at most one push; the bridge's
// goroutines do not grow.
func TestServiceFlappingIsBounded(t *testing.T) {
	t.Parallel()
	consul := harness.StartConsul(t)
	consul.RegisterInstance(t, "steady", "steady-1", "127.0.0.1", 7070, nil, grpcMeta, api.HealthPassing)
	b := startBridge(t, consulRegistry(consul))
	w := watchXDS(t, b.xdsAddr)
	w.waitFor(30*time.Second, "the steady service", map[string][]string{"steady.service.consul": {"127.0.0.1:7070"}})
	m := mustScrape(t, b)
	pushes, goroutines := m.sum("meshbridge_pushes_total"), m.sum("go_goroutines")
	flips := 0
	for range 30 {
		consul.RegisterInstance(t, "flap", "flap-1", "127.0.0.2", 7070, nil, grpcMeta, api.HealthPassing)
		<-time.After(500 * time.Millisecond) // the flapping's period: a scenario parameter
		if err := consul.Client().Agent().ServiceDeregister("flap-1"); err != nil {
			t.Fatal(err)
		}
		<-time.After(500 * time.Millisecond)
		flips += 2
	}
	w.waitFor(30*time.Second, "the steady service only", map[string][]string{"steady.service.consul": {"127.0.0.1:7070"}})
	m = mustScrape(t, b)
	dp, dg := m.sum("meshbridge_pushes_total")-pushes, m.sum("go_goroutines")-goroutines
	t.Logf("%d flips: %v pushes, goroutines %+v", flips, dp, dg)
	if dp > float64(flips)+2 {
		t.Errorf("%v pushes for %d flips, want at most one per flip", dp, flips)
	}
	if dg > goroutines/10+5 {
		t.Errorf("goroutines grew by %v (from %v)", dg, goroutines)
	}
}

// TestBridgeKilledServesNoPartialMesh: the bridge SIGKILLed and started
// again: clients reconnect, and the first state they get is the whole mesh.
func TestBridgeKilledServesNoPartialMesh(t *testing.T) {
	consul, b, _, want := faultMesh(t, 20, 1)
	_ = consul
	if err := b.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.proc.done
	b.start()
	w := watchXDS(t, b.xdsAddr)
	w.waitFor(30*time.Second, "the mesh after the restart", want)
	w.mu.Lock()
	first := w.firstCDS
	w.mu.Unlock()
	if first != len(want) {
		t.Errorf("the first CDS response after the restart held %d clusters, want all %d", first, len(want))
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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

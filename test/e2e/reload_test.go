package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/test/harness"
)

// rewriteConfig replaces the bridge's configuration file (by a rename, as a
// ConfigMap update or an editor does) with body and the bridge's own
// listener and sync keys, as startBridge wrote them.
func (b *bridge) rewriteConfig(body string) {
	b.t.Helper()
	cfg := fmt.Sprintf("%s\nxds: {address: %q}\nhttp: {address: %q, debugAddress: %q}\nsync: {timeout: 20s}\n",
		body, b.xdsAddr, b.httpAddr, b.debugAddr)
	writeFileAtomic(b.t, b.cfgPath, cfg)
}

// reloads returns meshbridge_config_reloads_total{result}.
func (b *bridge) reloads(result string) float64 {
	v, _ := mustScrape(b.t, b).get(`meshbridge_config_reloads_total{result="` + result + `"}`)
	return v
}

// waitReload waits until the reloads with result reach n, and returns the
// last reload as /debug/config shows it.
func (b *bridge) waitReload(result string, n float64) lastReload {
	b.t.Helper()
	eventually(b.t, 15*time.Second, fmt.Sprintf("reload %s #%v", result, n), func() error {
		if got := b.reloads(result); got < n {
			return fmt.Errorf("meshbridge_config_reloads_total{result=%q} = %v", result, got)
		}
		return nil
	})
	var page struct {
		LastReload lastReload `json:"lastReload"`
	}
	if err := json.Unmarshal([]byte(b.get("/debug/config")), &page); err != nil {
		b.t.Fatal(err)
	}
	return page.LastReload
}

type lastReload struct {
	Result    string   `json:"result"`
	Error     string   `json:"error"`
	Trigger   string   `json:"trigger"`
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Restarted []string `json:"restarted"`
}

// TestConfigReload pins README "Reloading the configuration" with a real
// Consul and the file registry: a registry added by a file change starts
// and serves; an unchanged registry keeps running and causes no push; a
// changed one restarts; a removed one's services leave xDS; debounce and
// log level apply live; a key that cannot change, invalid YAML and a
// missing file fail the reload, keep the running configuration and show
// the error; SIGHUP reloads too.
func TestConfigReload(t *testing.T) {
	consul := harness.StartConsul(t)
	consul.RegisterInstance(t, "web", "web-1", "10.50.0.1", 8080, nil, map[string]string{"protocol": "grpc"}, "passing")
	dir := t.TempDir()
	static := filepath.Join(dir, "services.yaml")
	writeFileAtomic(t, static, `services:
- host: static.local
  ports: [{number: 9090, protocol: grpc}]
  instances: [{address: 10.60.0.1, port: 9090}]
`)
	consulOnly := consulRegistry(consul)
	both := consulOnly + fmt.Sprintf("- name: static\n  type: file\n  file: {path: %q}\n", static)
	b := startBridge(t, consulOnly)
	w := watchXDS(t, b.xdsAddr)
	web := map[string][]string{"web.service.consul": {"10.50.0.1:8080"}}
	w.waitFor(15*time.Second, "Consul's service", web)

	// Added: the file registry starts.
	b.rewriteConfig(both)
	lr := b.waitReload("success", 1)
	if strings.Join(lr.Added, ",") != "static" || len(lr.Restarted)+len(lr.Removed) != 0 || lr.Trigger != "file change" {
		t.Fatalf("reload adding static: %+v", lr)
	}
	withStatic := map[string][]string{"web.service.consul": {"10.50.0.1:8080"}, "static.local": {"10.60.0.1:9090"}}
	w.waitFor(15*time.Second, "the added file registry's service", withStatic)

	// Unchanged configuration, rewritten: no registry restarts, no push.
	pushes := mustScrape(t, b).sum("meshbridge_pushes_total")
	b.rewriteConfig(both)
	lr = b.waitReload("success", 2)
	if len(lr.Added)+len(lr.Removed)+len(lr.Restarted) != 0 {
		t.Errorf("an unchanged configuration changed registries: %+v", lr)
	}
	// A later change proves the bridge still follows Consul; only then the
	// push count is read, so no push of the reload can be still on its way.
	consul.RegisterInstance(t, "web", "web-2", "10.50.0.2", 8080, nil, map[string]string{"protocol": "grpc"}, "passing")
	withStatic["web.service.consul"] = []string{"10.50.0.1:8080", "10.50.0.2:8080"}
	w.waitFor(15*time.Second, "a Consul change after the reload", withStatic)
	if got := mustScrape(t, b).sum("meshbridge_pushes_total") - pushes; got != 1 {
		t.Errorf("an unchanged reload and one Consul change made %v pushes, want 1", got)
	}

	// Changed: Consul's block changes (a new key), it restarts and keeps
	// serving its instances throughout.
	losses := w.losses()
	changed := strings.Replace(both, "type: consul\n", "type: consul\n  servicePort: 8080\n", 1)
	b.rewriteConfig(changed)
	lr = b.waitReload("success", 3)
	if strings.Join(lr.Restarted, ",") != "consul-e2e" || len(lr.Added)+len(lr.Removed) != 0 {
		t.Fatalf("reload changing consul-e2e: %+v", lr)
	}
	eventually(t, 15*time.Second, "the restarted registry synced", func() error {
		if !strings.Contains(b.get("/debug/registryz"), `"synced": true`) {
			return fmt.Errorf("registryz: %s", b.get("/debug/registryz"))
		}
		return nil
	})
	w.waitFor(15*time.Second, "the restarted registry's services", withStatic)
	if w.losses() != losses {
		t.Errorf("restarting a registry removed %d endpoints from xDS", w.losses()-losses)
	}

	// Keys that cannot change, invalid YAML, a missing file: each fails,
	// names the cause, keeps the running configuration.
	for i, tc := range []struct {
		name, body, want string
	}{
		{"fixed key", changed + "output: {namespace: other}\n", "output.namespace"},
		{"invalid YAML", changed + "debounce: [\n", "yaml"},
		{"invalid value", changed + "conflictPolicy: sometimes\n", "conflictPolicy"},
	} {
		b.rewriteConfig(tc.body)
		lr = b.waitReload("failure", float64(i+1))
		if lr.Result != "failure" || !strings.Contains(lr.Error, tc.want) {
			t.Errorf("%s: last reload %+v, want a failure naming %q", tc.name, lr, tc.want)
		}
	}
	if err := os.Remove(b.cfgPath); err != nil {
		t.Fatal(err)
	}
	lr = b.waitReload("failure", 4)
	if !strings.Contains(lr.Error, "no such file") {
		t.Errorf("missing file: last reload %+v", lr)
	}
	w.waitFor(5*time.Second, "the mesh after failed reloads", withStatic)

	// Live keys: debounce and log level; SIGHUP reloads.
	b.rewriteConfig(changed + "debounce: {after: 50ms}\nlog: {level: warn}\n")
	lr = b.waitReload("success", 4)
	if len(lr.Added)+len(lr.Removed)+len(lr.Restarted) != 0 {
		t.Errorf("a debounce and log change restarted registries: %+v", lr)
	}
	if page := b.get("/debug/config"); !strings.Contains(page, `"after": "50ms"`) || !strings.Contains(page, `"level": "warn"`) {
		t.Errorf("/debug/config does not show the reloaded keys:\n%s", page)
	}
	if err := b.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if lr = b.waitReload("success", 5); lr.Trigger != "SIGHUP" {
		t.Errorf("SIGHUP: last reload %+v", lr)
	}

	// Removed: the file registry's service leaves xDS.
	b.rewriteConfig(consulOnly)
	lr = b.waitReload("success", 6)
	if strings.Join(lr.Removed, ",") != "static" {
		t.Fatalf("reload removing static: %+v", lr)
	}
	delete(withStatic, "static.local")
	w.waitFor(15*time.Second, "the removed registry's service gone", withStatic)
	if strings.Contains(b.get("/debug/registryz"), `"name": "static"`) {
		t.Errorf("/debug/registryz still shows the removed registry:\n%s", b.get("/debug/registryz"))
	}
	m := mustScrape(t, b)
	for _, series := range []string{`meshbridge_registry_up{registry="static"}`, `meshbridge_registry_services{registry="static"}`} {
		if v, ok := m.get(series); ok {
			t.Errorf("%s = %v after the registry was removed; want no series", series, v)
		}
	}
	if v, _ := m.get(`meshbridge_registry_up{registry="consul-e2e"}`); v != 1 {
		t.Errorf(`meshbridge_registry_up{registry="consul-e2e"} = %v, want 1`, v)
	}
}

// TestReloadOnTokenFileChange: a registry names a file (consul.tokenFile);
// replacing the file's content reloads the configuration and restarts that
// registry only, which reads the new token (README "Reloading the
// configuration": rotate a token by replacing its file).
func TestReloadOnTokenFileChange(t *testing.T) {
	consul := harness.StartConsul(t)
	consul.RegisterInstance(t, "web", "web-1", "10.51.0.1", 8080, nil, map[string]string{"protocol": "grpc"}, "passing")
	dir := t.TempDir()
	token, static := filepath.Join(dir, "token"), filepath.Join(dir, "services.yaml")
	writeFileAtomic(t, token, "token-1\n")
	writeFileAtomic(t, static, "services:\n- host: static.local\n  ports: [{number: 9090, protocol: grpc}]\n  instances: [{address: 10.61.0.1, port: 9090}]\n")
	b := startBridge(t, fmt.Sprintf("registries:\n- name: consul-e2e\n  type: consul\n  consul: {address: %q, tokenFile: %q}\n"+
		"- name: static\n  type: file\n  file: {path: %q}\n", consul.Address(), token, static))
	w := watchXDS(t, b.xdsAddr)
	mesh := map[string][]string{"web.service.consul": {"10.51.0.1:8080"}, "static.local": {"10.61.0.1:9090"}}
	w.waitFor(15*time.Second, "both registries' services", mesh)

	writeFileAtomic(t, token, "token-2\n")
	lr := b.waitReload("success", 1)
	if strings.Join(lr.Restarted, ",") != "consul-e2e" || len(lr.Added)+len(lr.Removed) != 0 || lr.Trigger != "file change" {
		t.Fatalf("reload after the token file changed: %+v", lr)
	}
	consul.RegisterInstance(t, "web", "web-2", "10.51.0.2", 8080, nil, map[string]string{"protocol": "grpc"}, "passing")
	mesh["web.service.consul"] = []string{"10.51.0.1:8080", "10.51.0.2:8080"}
	w.waitFor(15*time.Second, "the restarted registry following Consul", mesh)
	if w.losses() != 0 {
		t.Errorf("the restart removed %d endpoints from xDS", w.losses())
	}
}

// TestReloadRemovesRegistryObjects pins README "Kubernetes output": a
// registry removed by a reload has its ServiceEntries and WorkloadEntries
// deleted from the cluster by the writer; the other registry's objects are
// not written.
func TestReloadRemovesRegistryObjects(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ic := istioClient(t, k)
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one.yaml"), filepath.Join(dir, "two.yaml")
	writeFileAtomic(t, one, "services:\n- host: one.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.62.0.1, port: 8080}]\n")
	writeFileAtomic(t, two, "services:\n- host: two.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.62.0.2, port: 8080}]\n")
	reg := func(name, path string) string {
		return fmt.Sprintf("- name: %s\n  type: file\n  file: {path: %q}\n", name, path)
	}
	out := kubeOutputYAML(k.Kubeconfig(t), ns, leaderElection{})
	b := startBridge(t, "registries:\n"+reg("one", one)+reg("two", two)+out)
	read := func() kubeState {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := readKube(ctx, ic, ns)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	eventually(t, 30*time.Second, "both registries' objects written", func() error {
		if st := read(); len(st.SEs) != 2 || len(st.WEs) != 2 {
			return fmt.Errorf("%s", st)
		}
		return nil
	})
	writes := func(op string) float64 {
		v, _ := mustScrape(t, b).get(`meshbridge_kube_writes_total{op="` + op + `",result="ok"}`)
		return v
	}
	updates, creates := writes("update"), writes("create")

	b.rewriteConfig("registries:\n" + reg("two", two) + out)
	if lr := b.waitReload("success", 1); strings.Join(lr.Removed, ",") != "one" {
		t.Fatalf("reload removing one: %+v", lr)
	}
	eventually(t, 30*time.Second, "the removed registry's objects deleted", func() error {
		if st := read(); len(st.SEs) != 1 || len(st.WEs) != 1 {
			return fmt.Errorf("%s", st)
		}
		return nil
	})
	checkOwnership(t, read(), "two")
	if u, c := writes("update")-updates, writes("create")-creates; u != 0 || c != 0 {
		t.Errorf("the reload made %v updates and %v creates; the registry that stayed must not be written", u, c)
	}
}

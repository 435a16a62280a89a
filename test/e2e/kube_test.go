package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	apinetworking "istio.io/api/networking/v1"
	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/test/harness"
)

// This file pins README "Kubernetes output": the Kubernetes output of the
// meshbridge binary against a real kube-apiserver and etcd (test/harness),
// fed by a real Consul or the file registry.

// consulRegistryName is the registry name consulRegistry configures.
const consulRegistryName = "consul-e2e"

// converge waits, bounded, until the bridge serves exactly want (names and
// WorkloadEntry addresses) and the apiserver's namespace holds exactly the
// bridge's objects, content hashes included. It returns the apiserver's state.
func converge(t testing.TB, ic versioned.Interface, ns string, b *bridge, timeout time.Duration, want kubeState) kubeState {
	t.Helper()
	var got kubeState
	eventually(t, timeout, "the apiserver to hold what the bridge serves: "+want.String(), func() error {
		served, err := servedState(b)
		if err != nil {
			return err
		}
		if !slices.Equal(sortedKeys(served.SEs), sortedKeys(want.SEs)) ||
			!maps.Equal(weAddresses(served.WEs), weAddresses(want.WEs)) {
			return fmt.Errorf("the bridge serves %s", served)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err = readKube(ctx, ic, ns)
		if err != nil {
			return err
		}
		if d := sameObjects(got, served); d != "" {
			return fmt.Errorf("apiserver differs from the bridge: %s", d)
		}
		return nil
	})
	return got
}

// wantState builds the expected objects: ServiceEntry names, and
// WorkloadEntry name → address.
func wantState(ses []string, wes map[string]string) kubeState {
	st := kubeState{SEs: map[string]kubeObject{}, WEs: map[string]kubeObject{}}
	for _, s := range ses {
		st.SEs[s] = kubeObject{}
	}
	for n, a := range wes {
		st.WEs[n] = kubeObject{Address: a}
	}
	return st
}

// TestKubeOutputFollowsConsul pins README "Kubernetes output" (server-side
// apply, only its own objects, garbage collection): with kubernetes.enabled
// (and leader election), a service registered in Consul appears in the
// apiserver as a ServiceEntry and one WorkloadEntry per instance, carrying the
// ownership labels and the content hash the bridge serves; a deregistered
// instance's WorkloadEntry is deleted, and a deregistered service leaves
// nothing behind.
func TestKubeOutputFollowsConsul(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ic := istioClient(t, k)
	consul := harness.StartConsul(t)
	b := startBridge(t, consulRegistry(consul)+kubeOutputYAML(k.Kubeconfig(t), ns, fastElection))

	const host = "web.service.consul"
	we1 := weName(host, consulRegistryName, consul.Node()+"/web-1")
	we2 := weName(host, consulRegistryName, consul.Node()+"/web-2")
	consul.RegisterInstance(t, "web", "web-1", "10.20.0.1", 9090, []string{"version=v1"}, grpcMeta, api.HealthPassing)
	consul.RegisterInstance(t, "web", "web-2", "10.20.0.2", 9090, []string{"version=v2"}, grpcMeta, api.HealthPassing)
	st := converge(t, ic, ns, b, 30*time.Second, wantState([]string{host}, map[string]string{we1: "10.20.0.1", we2: "10.20.0.2"}))
	checkOwnership(t, st, consulRegistryName)
	if v := st.WEs[we1].SpecLabels["version"]; v != "v1" {
		t.Errorf("WorkloadEntry %s has spec.labels %v, want version=v1 (from the Consul tag)", we1, st.WEs[we1].SpecLabels)
	}
	if v, _ := mustScrape(t, b).get("meshbridge_kube_leader"); v != 1 {
		t.Errorf("meshbridge_kube_leader = %v, want 1 (the only replica holds the lease)", v)
	}
	// The apiserver may show a write before the bridge has its response
	// and counts it.
	waitMetric(t, b, `meshbridge_kube_writes_total{op="create",result="ok"}`, 3)

	consul.Deregister(t, "web-2")
	st = converge(t, ic, ns, b, 30*time.Second, wantState([]string{host}, map[string]string{we1: "10.20.0.1"}))
	checkOwnership(t, st, consulRegistryName)

	consul.Deregister(t, "web-1")
	converge(t, ic, ns, b, 30*time.Second, wantState(nil, nil))
	waitMetric(t, b, `meshbridge_kube_writes_total{op="delete",result="ok"}`, 3)
}

// waitMetric waits, bounded, until a bridge's series (or, for a bare metric
// name, the sum of its series) is at least min.
func waitMetric(t testing.TB, b *bridge, series string, min float64) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%s >= %v on %s", series, min, b.httpAddr), func() error {
		m, err := scrape(b.httpAddr)
		if err != nil {
			return err
		}
		v := m.sum(series)
		if strings.Contains(series, "{") {
			v, _ = m.get(series)
		}
		if v < min {
			return fmt.Errorf("%s = %v", series, v)
		}
		return nil
	})
}

// churnInstance is one Consul instance the outage test registers.
type churnInstance struct {
	service, id, addr string
	tags              []string
}

// consulMesh is the Consul state the outage test drives, kept by the test so
// it can say what every output must converge to.
type consulMesh struct {
	t        *testing.T
	consul   *harness.Consul
	live     map[string]churnInstance // by instance id
	touched  map[string]bool          // every object name that ever existed
	changes  int
	lastDesc string
}

const churnPort = 7000

func (c *consulMesh) register(inst churnInstance) {
	c.consul.RegisterInstance(c.t, inst.service, inst.id, inst.addr, churnPort, inst.tags, grpcMeta, api.HealthPassing)
	c.live[inst.id] = inst
	c.touched["se:"+inst.service] = true
	c.touched["we:"+inst.id] = true
	c.changes++
	c.lastDesc = fmt.Sprintf("register %s %s tags %v", inst.id, inst.addr, inst.tags)
}

func (c *consulMesh) deregister(id string) {
	c.consul.Deregister(c.t, id)
	delete(c.live, id)
	c.changes++
	c.lastDesc = "deregister " + id
}

// kube is the objects the live instances translate to.
func (c *consulMesh) kube() kubeState {
	var ses []string
	wes := map[string]string{}
	for _, inst := range c.live {
		host := inst.service + ".service.consul"
		if !slices.Contains(ses, host) {
			ses = append(ses, host)
		}
		wes[weName(host, consulRegistryName, c.consul.Node()+"/"+inst.id)] = inst.addr
	}
	return wantState(ses, wes)
}

// xds is the mesh the live instances serve: host → sorted "address:port".
func (c *consulMesh) xds() map[string][]string {
	out := map[string][]string{}
	for _, inst := range c.live {
		host := inst.service + ".service.consul"
		out[host] = append(out[host], fmt.Sprintf("%s:%d", inst.addr, churnPort))
	}
	for h := range out {
		slices.Sort(out[h])
	}
	return out
}

// outageBridge is one bridge of the outage test and what is measured of it.
type outageBridge struct {
	name  string
	ns    string
	b     *bridge
	xds   *xdsWatch
	depth *gaugeMax
}

// TestKubeApiserverOutage pins README "Kubernetes output", "Errors": while the
// kube-apiserver is down (etcd keeps running) the bridge keeps following
// Consul over xDS; once the apiserver is back the cluster converges to exactly
// what the bridge serves within 60 s (MaxRetryDelay is 30 s); and the writer's
// queue holds each object at most once however often it changed meanwhile.
//
// Two bridges run against the one private control plane, in two namespaces,
// following the same Consul: "elected" with leader election (it loses the
// lease during the outage and takes it back afterwards, its resync repairing
// the cluster) and "direct" without (every failed write is retried with
// per-object backoff, which is what MaxRetryDelay bounds).
func TestKubeApiserverOutage(t *testing.T) {
	const (
		outage  = 60 * time.Second
		churnTo = 55 * time.Second // churn until then, then check xDS while the apiserver is still down
		// The cluster must converge within 60 s of the apiserver's return
		// (per-object backoff is capped at MaxRetryDelay = 30 s).
		convergeBound = 60 * time.Second
	)
	k := harness.StartKube(t, istioCRDs) // private: this test stops its apiserver
	ic := istioClient(t, k)
	kubeconfig := k.Kubeconfig(t)
	consul := harness.StartConsul(t)
	mesh := &consulMesh{t: t, consul: consul, live: map[string]churnInstance{}, touched: map[string]bool{}}

	// Three services with a base instance each and a pool of four instances
	// toggled during the outage, plus one service removed and one added
	// during it.
	const services, pool = 3, 4
	inst := func(s, i int) churnInstance {
		return churnInstance{service: fmt.Sprintf("churn-%d", s), id: fmt.Sprintf("churn-%d-%d", s, i), addr: fmt.Sprintf("10.30.%d.%d", s, 10+i)}
	}
	for s := range services {
		for i := range 3 {
			mesh.register(inst(s, i))
		}
	}
	gone := churnInstance{service: "gone", id: "gone-1", addr: "10.31.0.1"}
	late := churnInstance{service: "late", id: "late-1", addr: "10.32.0.1"}
	mesh.register(gone)

	bridges := []*outageBridge{{name: "elected"}, {name: "direct"}}
	for _, ob := range bridges {
		ob.ns = k.Namespace(t)
		le := fastElection
		if ob.name == "direct" {
			le = leaderElection{}
		}
		ob.b = startBridge(t, consulRegistry(consul)+kubeOutputYAML(kubeconfig, ob.ns, le))
		ob.xds = watchXDS(t, ob.b.xdsAddr)
	}
	for _, ob := range bridges {
		converge(t, ic, ob.ns, ob.b, 30*time.Second, mesh.kube())
		ob.xds.waitFor(15*time.Second, "the initial mesh", mesh.xds())
		ob.depth = watchGauge(ob.b, "meshbridge_kube_queue_depth", 100*time.Millisecond)
		t.Logf("%s bridge: RSS before the outage %s", ob.name, rss(t, ob.b.proc.cmd.Process.Pid))
	}

	k.StopAPIServer(t)
	down := time.Now()
	t.Logf("kube-apiserver stopped; churning Consul for %s", churnTo)
	changesBefore := mesh.changes
	for step := 0; time.Since(down) < churnTo; step++ {
		s := step % services
		switch {
		case step == 10:
			mesh.deregister(gone.id) // a whole service goes: ServiceEntry and WorkloadEntry deletes
		case step == 20:
			mesh.register(late) // a new service: ServiceEntry and WorkloadEntry creates
		case step%7 == 3:
			base := inst(s, 0) // new labels: a WorkloadEntry update
			base.tags = []string{fmt.Sprintf("gen=%d", step)}
			mesh.register(base)
		default:
			in := inst(s, 1+(step/services)%pool)
			if _, ok := mesh.live[in.id]; ok {
				mesh.deregister(in.id)
			} else {
				mesh.register(in)
			}
		}
		// xDS is unaffected by the outage: every change is served.
		for _, ob := range bridges {
			ob.xds.waitFor(15*time.Second, fmt.Sprintf("change %d (%s) during the outage", mesh.changes, mesh.lastDesc), mesh.xds())
		}
		if next := down.Add(time.Duration(step+1) * time.Second); time.Until(next) > 0 {
			time.Sleep(time.Until(next))
		}
	}
	// The last change is on xDS (checked above) while the apiserver is still
	// down.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := ic.NetworkingV1().ServiceEntries(bridges[0].ns).List(ctx, metav1.ListOptions{})
	cancel()
	if err == nil {
		t.Fatal("the kube-apiserver answered while it should be stopped")
	}
	t.Logf("%d Consul changes during the outage, each served over xDS by both bridges while the apiserver was down; last: %s",
		mesh.changes-changesBefore, mesh.lastDesc)
	// A leader that cannot renew its lease for renewDeadline stops leading
	// (and writing); without leader election the writer always leads.
	for _, ob := range bridges {
		want := 0.0
		if ob.name == "direct" {
			want = 1
		}
		if v, _ := mustScrape(t, ob.b).get("meshbridge_kube_leader"); v != want {
			t.Errorf("%s bridge: meshbridge_kube_leader = %v %s into the outage, want %v", ob.name, v, time.Since(down).Round(time.Second), want)
		}
	}
	time.Sleep(time.Until(down.Add(outage)))

	restart := time.Now()
	k.StartAPIServer(t)
	back := time.Now() // its /readyz answers ok
	t.Logf("kube-apiserver down for %s, then ready %s after its start", restart.Sub(down).Round(time.Millisecond),
		back.Sub(restart).Round(time.Millisecond))
	want := mesh.kube()
	for _, ob := range bridges {
		st := converge(t, ic, ob.ns, ob.b, convergeBound-time.Since(back), want)
		t.Logf("%s bridge: the apiserver equals what it serves %s after the apiserver's return (ready), %s after its start (%d ServiceEntries, %d WorkloadEntries)",
			ob.name, time.Since(back).Round(time.Millisecond), time.Since(restart).Round(time.Millisecond), len(st.SEs), len(st.WEs))
		checkOwnership(t, st, consulRegistryName)
		ob.xds.waitFor(5*time.Second, "the final mesh", mesh.xds())
		if v, _ := mustScrape(t, ob.b).get("meshbridge_kube_leader"); v != 1 {
			t.Errorf("%s bridge: meshbridge_kube_leader = %v after the apiserver's return, want 1", ob.name, v)
		}
	}
	for _, ob := range bridges {
		maxDepth, scrapes, errs := ob.depth.finish()
		m := mustScrape(t, ob.b)
		t.Logf("%s bridge: RSS after the outage %s; queue depth max %v over %d scrapes (%d failed); writes %v",
			ob.name, rss(t, ob.b.proc.cmd.Process.Pid), maxDepth, scrapes, errs, writesOf(m))
		if maxDepth > float64(len(mesh.touched)) {
			t.Errorf("%s bridge: meshbridge_kube_queue_depth reached %v, more than the %d distinct objects touched",
				ob.name, maxDepth, len(mesh.touched))
		}
		if scrapes == 0 {
			t.Errorf("%s bridge: no successful /metrics scrape", ob.name)
		}
	}
	var failed float64
	for _, op := range []string{"create", "update", "delete"} {
		v, _ := mustScrape(t, bridges[1].b).get(`meshbridge_kube_writes_total{op="` + op + `",result="error"}`)
		failed += v
	}
	if failed == 0 {
		t.Errorf("direct bridge: no failed write during the outage; was the apiserver really down?")
	}
}

// writesOf formats the meshbridge_kube_writes_total series of a scrape.
func writesOf(m metrics) string {
	var out []string
	for _, series := range sortedKeys(m) {
		if strings.HasPrefix(series, "meshbridge_kube_writes_total{") {
			out = append(out, fmt.Sprintf("%s=%v", strings.TrimPrefix(series, "meshbridge_kube_writes_total"), m[series]))
		}
	}
	return strings.Join(out, " ")
}

// fileRegistry is the registries block of a file registry named "static".
func fileRegistry(path string) string {
	return fmt.Sprintf("registries:\n- name: static\n  type: file\n  file: {path: %q}\n", path)
}

// writeFileAtomic replaces path's content with a rename, as the file
// registry expects of writers.
func writeFileAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestKubeLeaderFailover pins README "Kubernetes output", "Leader election":
// of two replicas with the same configuration, both serve xDS and exactly one
// writes; when the writer is killed (SIGKILL: it cannot release the lease) the
// other takes over within leaseDuration + retryPeriod (plus slack) and writes
// a change made after the kill.
func TestKubeLeaderFailover(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ic := istioClient(t, k)
	kubeconfig := k.Kubeconfig(t)
	services := filepath.Join(t.TempDir(), "services.yaml")
	writeFileAtomic(t, services, `services:
- host: failover.static.local
  ports: [{number: 8080, protocol: grpc}]
  instances:
  - {address: 10.40.0.1, port: 8080}
  - {address: 10.40.0.2, port: 8080}
`)
	cfg := fileRegistry(services) + kubeOutputYAML(kubeconfig, ns, fastElection)
	replicas := []*bridge{startBridge(t, cfg), startBridge(t, cfg)}

	const host = "failover.static.local"
	we := func(addr string) string { return weName(host, "static", addr+":8080") }
	want := wantState([]string{host}, map[string]string{we("10.40.0.1"): "10.40.0.1", we("10.40.0.2"): "10.40.0.2"})
	wantXDS := map[string][]string{host: {"10.40.0.1:8080", "10.40.0.2:8080"}}
	var watches []*xdsWatch
	for _, r := range replicas {
		w := watchXDS(t, r.xdsAddr)
		w.waitFor(15*time.Second, "the file registry's mesh", wantXDS)
		watches = append(watches, w)
	}

	// Exactly one leader.
	var leaderIdx int
	eventually(t, 30*time.Second, "exactly one replica leading", func() error {
		var gauges []float64
		for _, r := range replicas {
			m, err := scrape(r.httpAddr)
			if err != nil {
				return err
			}
			v, _ := m.get("meshbridge_kube_leader")
			gauges = append(gauges, v)
		}
		if !(gauges[0] == 1 && gauges[1] == 0 || gauges[0] == 0 && gauges[1] == 1) {
			return fmt.Errorf("meshbridge_kube_leader is %v", gauges)
		}
		leaderIdx = slices.Index(gauges, 1)
		return nil
	})
	leader, follower := replicas[leaderIdx], replicas[1-leaderIdx]
	st := converge(t, ic, ns, leader, 30*time.Second, want)
	checkOwnership(t, st, "static")
	// The leader created the three objects (a write shows in the apiserver
	// a moment before the bridge counts it); the follower wrote nothing.
	waitMetric(t, leader, `meshbridge_kube_writes_total{op="create",result="ok"}`, 3)
	lm, fm := mustScrape(t, leader), mustScrape(t, follower)
	if v, _ := lm.get("meshbridge_kube_leader"); v != 1 {
		t.Fatalf("leader's meshbridge_kube_leader = %v after convergence, want 1", v)
	}
	if v, _ := fm.get("meshbridge_kube_leader"); v != 0 {
		t.Fatalf("follower's meshbridge_kube_leader = %v, want 0", v)
	}
	if w := fm.sum("meshbridge_kube_writes_total"); w != 0 {
		t.Errorf("the follower made %v writes (%s), want 0", w, writesOf(fm))
	}

	// SIGKILL the leader, by its PID, then change the registry.
	if err := leader.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-leader.proc.done
	writeFileAtomic(t, services, `services:
- host: failover.static.local
  ports: [{number: 8080, protocol: grpc}]
  instances:
  - {address: 10.40.0.1, port: 8080}
  - {address: 10.40.0.2, port: 8080}
  - {address: 10.40.0.3, port: 8080}
- host: added.static.local
  ports: [{number: 9090, protocol: grpc}]
  instances:
  - {address: 10.41.0.1, port: 9090}
`)
	var failover time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := scrape(follower.httpAddr)
		if err == nil {
			if v, _ := m.get("meshbridge_kube_leader"); v == 1 {
				failover = time.Since(killed)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not lead within 30 s of the leader's kill (last scrape error: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A lease is taken over once it has not been renewed for LeaseDuration
	// as the follower observed it, on the follower's next attempt, every
	// retryPeriod. The 2 s slack: client-go jitters every attempt by up to
	// 1.2 × retryPeriod (its last observation of a renewal may come 0.6 s
	// late, and so may its first attempt after expiry: 1.2 s), the 100 ms
	// scrape interval, and process scheduling on a loaded machine.
	bound := fastElection.leaseDuration + fastElection.retryPeriod + 2*time.Second
	t.Logf("failover: the follower led %s after the leader's SIGKILL (leaseDuration %s, retryPeriod %s, bound %s)",
		failover.Round(time.Millisecond), fastElection.leaseDuration, fastElection.retryPeriod, bound)
	if failover > bound {
		t.Errorf("failover took %s, more than leaseDuration + retryPeriod + 2 s slack = %s", failover, bound)
	}

	// The change made after the kill lands through the new leader.
	want = wantState([]string{host, "added.static.local"}, map[string]string{
		we("10.40.0.1"): "10.40.0.1", we("10.40.0.2"): "10.40.0.2", we("10.40.0.3"): "10.40.0.3",
		weName("added.static.local", "static", "10.41.0.1:9090"): "10.41.0.1",
	})
	st = converge(t, ic, ns, follower, 30*time.Second, want)
	checkOwnership(t, st, "static")
	watches[1-leaderIdx].waitFor(15*time.Second, "the changed mesh", map[string][]string{
		host: {"10.40.0.1:8080", "10.40.0.2:8080", "10.40.0.3:8080"}, "added.static.local": {"10.41.0.1:9090"},
	})
	waitMetric(t, follower, "meshbridge_kube_writes_total", 1)
}

// translateDiff runs `meshbridge translate --diff --config cfg` and returns
// its output lines.
func translateDiff(t testing.TB, cfg string) []string {
	t.Helper()
	cmd := exec.Command(bins.meshbridge, "translate", "--diff", "--config", cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("meshbridge translate --diff: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// TestKubeTranslateDiff pins `meshbridge translate --diff`: against an empty
// namespace it lists creates; after a bridge synced, nothing; after the
// registry changed behind a stopped bridge, the update, delete, create and
// conflict (a name held by an object meshbridge does not own) it would make.
// It writes nothing.
func TestKubeTranslateDiff(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ic := istioClient(t, k)
	dir := t.TempDir()
	services := filepath.Join(dir, "services.yaml")
	writeFileAtomic(t, services, `services:
- host: a.static.local
  ports: [{number: 8080, protocol: grpc}]
  instances:
  - {address: 10.50.0.1, port: 8080}
  - {address: 10.50.0.2, port: 8080}
- host: b.static.local
  ports: [{number: 8080, protocol: grpc}]
  instances:
  - {address: 10.50.1.1, port: 8080}
`)
	cfgText := fileRegistry(services) + kubeOutputYAML(k.Kubeconfig(t), ns, fastElection)
	cfg := filepath.Join(dir, "meshbridge.yaml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	a1, a2 := weName("a.static.local", "static", "10.50.0.1:8080"), weName("a.static.local", "static", "10.50.0.2:8080")
	b1 := weName("b.static.local", "static", "10.50.1.1:8080")
	c1 := weName("c.static.local", "static", "10.50.2.1:8080")
	line := func(op, kind, name string) string { return op + " " + kind + "/" + ns + "/" + name }
	summary := func(create, update, del, conflict int) string {
		return fmt.Sprintf("# %d to create, %d to update, %d to delete, %d conflicts (names held by objects meshbridge does not own) in namespace %s",
			create, update, del, conflict, ns)
	}
	check := func(when string, want ...string) {
		t.Helper()
		if got := translateDiff(t, cfg); !slices.Equal(got, want) {
			t.Errorf("translate --diff %s:\n got  %q\n want %q", when, got, want)
		}
	}

	// Sorted by op, kind, then name.
	creates := []string{line("create", "ServiceEntry", "a.static.local"), line("create", "ServiceEntry", "b.static.local")}
	creates = append(creates, sortedLines(line("create", "WorkloadEntry", a1), line("create", "WorkloadEntry", a2),
		line("create", "WorkloadEntry", b1))...)
	check("before any bridge ran", append(creates, summary(5, 0, 0, 0))...)

	b := startBridge(t, cfgText)
	converge(t, ic, ns, b, 30*time.Second, wantState([]string{"a.static.local", "b.static.local"},
		map[string]string{a1: "10.50.0.1", a2: "10.50.0.2", b1: "10.50.1.1"}))
	check("after a bridge synced", summary(0, 0, 0, 0))
	b.proc.stop()

	// Behind the stopped bridge: b removed, a's first instance relabelled,
	// c added under a name a foreign ServiceEntry holds.
	foreign := &clientnetworking.ServiceEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "c.static.local", Namespace: ns},
		Spec: apinetworking.ServiceEntry{
			Hosts: []string{"c.static.local"},
			Ports: []*apinetworking.ServicePort{{Number: 8080, Name: "grpc-8080", Protocol: "GRPC"}},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ic.NetworkingV1().ServiceEntries(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, services, `services:
- host: a.static.local
  ports: [{number: 8080, protocol: grpc}]
  instances:
  - {address: 10.50.0.1, port: 8080, labels: {version: v2}}
  - {address: 10.50.0.2, port: 8080}
- host: c.static.local
  ports: [{number: 8080, protocol: grpc}]
  instances:
  - {address: 10.50.2.1, port: 8080}
`)
	before, err := readKube(ctx, ic, ns)
	if err != nil {
		t.Fatal(err)
	}
	check("after the registry changed",
		line("create", "WorkloadEntry", c1),
		line("update", "WorkloadEntry", a1),
		line("delete", "ServiceEntry", "b.static.local"),
		line("delete", "WorkloadEntry", b1),
		line("conflict", "ServiceEntry", "c.static.local"),
		summary(1, 1, 2, 1))
	after, err := readKube(ctx, ic, ns)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameObjects(after, before); d != "" {
		t.Errorf("translate --diff changed the cluster: %s", d)
	}
}

// sortedLines returns the lines sorted, as translate --diff sorts names
// within an op and kind.
func sortedLines(lines ...string) []string { return slices.Sorted(slices.Values(lines)) }

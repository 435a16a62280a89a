package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// istioCRDs are the ServiceEntry and WorkloadEntry CRDs the shared control
// plane installs (harness.KubeMain in TestMain) and private ones take.
const istioCRDs = "../../kube/testdata/crds/istio-networking.yaml"

// Object metadata contract (README, "Naming conventions").
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelRegistry  = "meshbridge.io/registry"
	annotationHash = "meshbridge.io/content-hash"
)

// leaderElection is the kubernetes.leaderElection block the tests use:
// short durations so a failover takes seconds, not the default 15 s.
type leaderElection struct {
	enabled                                   bool
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

// fastElection is leaseDuration 4s, renewDeadline 3s, retryPeriod 500ms.
var fastElection = leaderElection{enabled: true, leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: 500 * time.Millisecond}

// kubeOutputYAML is the output and kubernetes blocks of a configuration that
// writes into namespace ns of the apiserver kubeconfig names.
func kubeOutputYAML(kubeconfig, ns string, le leaderElection) string {
	lb := "{enabled: false}"
	if le.enabled {
		lb = fmt.Sprintf("{enabled: true, leaseDuration: %s, renewDeadline: %s, retryPeriod: %s}",
			le.leaseDuration, le.renewDeadline, le.retryPeriod)
	}
	return fmt.Sprintf("output: {namespace: %s}\nkubernetes:\n  enabled: true\n  kubeconfig: %q\n  leaderElection: %s\n",
		ns, kubeconfig, lb)
}

// istioClient is an istio.io/client-go clientset for k's admin.
func istioClient(t testing.TB, k *harness.Kube) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kubeObject is what the tests compare of an object: the apiserver's or the
// bridge's (/debug/configz).
type kubeObject struct {
	Labels     map[string]string
	Hash       string
	Address    string            // WorkloadEntries only
	SpecLabels map[string]string // WorkloadEntries only: spec.labels
}

// kubeState is a namespace's ServiceEntries and WorkloadEntries by name.
type kubeState struct {
	SEs, WEs map[string]kubeObject
}

func (s kubeState) String() string {
	return fmt.Sprintf("ServiceEntries %v, WorkloadEntries %v", sortedKeys(s.SEs), weAddresses(s.WEs))
}

// readKube lists the ServiceEntries and WorkloadEntries in ns.
func readKube(ctx context.Context, ic versioned.Interface, ns string) (kubeState, error) {
	st := kubeState{SEs: map[string]kubeObject{}, WEs: map[string]kubeObject{}}
	ses, err := ic.NetworkingV1().ServiceEntries(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, err
	}
	for _, o := range ses.Items {
		st.SEs[o.Name] = kubeObject{Labels: o.Labels, Hash: o.Annotations[annotationHash]}
	}
	wes, err := ic.NetworkingV1().WorkloadEntries(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, err
	}
	for _, o := range wes.Items {
		st.WEs[o.Name] = kubeObject{Labels: o.Labels, Hash: o.Annotations[annotationHash],
			Address: o.Spec.GetAddress(), SpecLabels: o.Spec.GetLabels()}
	}
	return st, nil
}

// servedState is the bridge's aggregate store as /debug/configz shows it.
func servedState(b *bridge) (kubeState, error) {
	resp, err := http.Get("http://" + b.debugAddr + "/debug/configz")
	if err != nil {
		return kubeState{}, err
	}
	defer resp.Body.Close()
	var entries []struct {
		Kind        string            `json:"kind"`
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		Spec        struct {
			Address string `json:"address"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
		return kubeState{}, fmt.Errorf("decode /debug/configz: %w", err)
	}
	st := kubeState{SEs: map[string]kubeObject{}, WEs: map[string]kubeObject{}}
	for _, e := range entries {
		o := kubeObject{Labels: e.Labels, Hash: e.Annotations[annotationHash], Address: e.Spec.Address}
		switch e.Kind {
		case "ServiceEntry":
			st.SEs[e.Name] = o
		case "WorkloadEntry":
			st.WEs[e.Name] = o
		}
	}
	return st, nil
}

// sameObjects reports how got differs from want in names, content hashes and
// addresses ("" when equal).
func sameObjects(got, want kubeState) string {
	var diffs []string
	cmp := func(kind string, g, w map[string]kubeObject) {
		for _, name := range sortedKeys(w) {
			o, ok := g[name]
			switch {
			case !ok:
				diffs = append(diffs, "missing "+kind+" "+name)
			case o.Hash != w[name].Hash:
				diffs = append(diffs, fmt.Sprintf("%s %s has content hash %.12s, want %.12s", kind, name, o.Hash, w[name].Hash))
			case o.Address != w[name].Address:
				diffs = append(diffs, fmt.Sprintf("%s %s has address %s, want %s", kind, name, o.Address, w[name].Address))
			}
		}
		for _, name := range sortedKeys(g) {
			if _, ok := w[name]; !ok {
				diffs = append(diffs, "extra "+kind+" "+name)
			}
		}
	}
	cmp("ServiceEntry", got.SEs, want.SEs)
	cmp("WorkloadEntry", got.WEs, want.WEs)
	return strings.Join(diffs, "; ")
}

// weAddresses maps WorkloadEntry names to their addresses.
func weAddresses(wes map[string]kubeObject) map[string]string {
	out := make(map[string]string, len(wes))
	for n, o := range wes {
		out[n] = o.Address
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// checkOwnership fails the test unless every object carries meshbridge's
// ownership labels for registry and a content hash.
func checkOwnership(t testing.TB, st kubeState, registry string) {
	t.Helper()
	for kind, objs := range map[string]map[string]kubeObject{"ServiceEntry": st.SEs, "WorkloadEntry": st.WEs} {
		for name, o := range objs {
			if o.Labels[labelManagedBy] != "meshbridge" || o.Labels[labelRegistry] != registry {
				t.Errorf("%s %s has labels %v, want %s=meshbridge and %s=%s", kind, name, o.Labels,
					labelManagedBy, labelRegistry, registry)
			}
			if len(o.Hash) != 64 {
				t.Errorf("%s %s has annotation %s=%q, want 64 hex digits", kind, name, annotationHash, o.Hash)
			}
		}
	}
}

// weName is the WorkloadEntry naming contract: "<ServiceEntry name>-<first
// 10 hex of sha256(registry "/" instance id)>".
func weName(host, registry, instanceID string) string {
	sum := sha256.Sum256([]byte(registry + "/" + instanceID))
	return host + "-" + hex.EncodeToString(sum[:])[:10]
}

// metrics is one scrape of a /metrics page: sample value by series
// ("name{labels}" as exposed).
type metrics map[string]float64

// scrape reads addr's /metrics.
func scrape(httpAddr string) (metrics, error) {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sum adds every series of the metric name (all label values).
func (m metrics) sum(name string) float64 {
	var s float64
	for series, v := range m {
		if series == name || strings.HasPrefix(series, name+"{") {
			s += v
		}
	}
	return s
}

// get returns one series' value; ok is false when it is not exposed.
func (m metrics) get(series string) (float64, bool) {
	v, ok := m[series]
	return v, ok
}

// mustScrape scrapes or fails the test.
func mustScrape(t testing.TB, b *bridge) metrics {
	t.Helper()
	m, err := scrape(b.httpAddr)
	if err != nil {
		t.Fatalf("scrape %s: %v", b.httpAddr, err)
	}
	return m
}

// rss returns a process's resident set size (VmRSS of /proc/<pid>/status).
func rss(t testing.TB, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// gaugeMax scrapes a bridge's /metrics every interval until stopped and keeps
// the largest value a gauge had.
type gaugeMax struct {
	mu      sync.Mutex
	max     float64
	scrapes int
	errs    int
	stop    chan struct{}
	done    chan struct{}
}

func watchGauge(b *bridge, series string, interval time.Duration) *gaugeMax {
	g := &gaugeMax{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			m, err := scrape(b.httpAddr)
			g.mu.Lock()
			if err != nil {
				g.errs++
			} else {
				g.scrapes++
				if v, ok := m.get(series); ok && v > g.max {
					g.max = v
				}
			}
			g.mu.Unlock()
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return g
}

// finish stops the scraping and returns the maximum and the scrape count.
func (g *gaugeMax) finish() (maxValue float64, scrapes, errs int) {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max, g.scrapes, g.errs
}

// xdsWatch is an Envoy over xDS (an ads.SotW with an Envoy node and
// FollowCDS: CDS by wildcard, then EDS for exactly the clusters it holds),
// keeping the latest endpoints of every cluster: the mesh as the bridge
// serves it over xDS.
type xdsWatch struct {
	t testing.TB
	s *ads.SotW

	mu sync.Mutex
	// removed counts endpoints the stream saw leave: an address gone from
	// a cluster's assignment, or with its cluster.
	removed int
	// firstCDS is how many clusters the first CDS response held, -1
	// before it.
	firstCDS int
}

// losses returns how many endpoints the stream saw leave so far.
func (w *xdsWatch) losses() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.removed
}

// watchXDS opens the stream to a bridge's xDS address; it ends with the test.
func watchXDS(t testing.TB, xdsAddr string) *xdsWatch {
	t.Helper()
	conn, err := ads.Dial(xdsAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	node := &core.Node{Id: "e2e-envoy-" + strconv.Itoa(harness.FreePort(t)), Cluster: "e2e"}
	w := &xdsWatch{t: t, firstCDS: -1}
	w.s = ads.NewSotW(t, conn, ads.Options{Node: node, FollowCDS: true}, w.observe)
	if err := w.s.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// observe counts the endpoints a response removes and the size of the
// first CDS response. It runs before the stream accepts the response, so
// the stream still holds what the response replaces; as it accepts every
// one, a CDS response is the clusters held next, an EDS response's
// assignments those of the clusters it holds.
func (w *xdsWatch) observe(r ads.Receipt) error {
	switch r.Resp.GetTypeUrl() {
	case resourcev3.ClusterType:
		names := make(map[string]bool)
		for _, a := range r.Resp.GetResources() {
			c := &cluster.Cluster{}
			if err := a.UnmarshalTo(c); err == nil {
				names[c.GetName()] = true
			}
		}
		held := w.s.Resources(resourcev3.EndpointType)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.firstCDS < 0 {
			w.firstCDS = len(names)
		}
		for name, cla := range held {
			if !names[name] {
				w.removed += len(endpointsOf(cla))
			}
		}
	case resourcev3.EndpointType:
		held := w.s.Snapshot(resourcev3.ClusterType, resourcev3.EndpointType)
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, a := range r.Resp.GetResources() {
			name, addrs, err := ads.Endpoints(a)
			if _, ok := held[resourcev3.ClusterType][name]; err != nil || !ok {
				continue
			}
			for _, old := range endpointsOf(held[resourcev3.EndpointType][name]) {
				if !slices.Contains(addrs, old) {
					w.removed++
				}
			}
		}
	}
	return nil
}

// endpointsOf returns the sorted "address:port" of an assignment's
// endpoints; nil for none or an undecodable one.
func endpointsOf(cla *anypb.Any) []string {
	if cla == nil {
		return nil
	}
	_, addrs, err := ads.Endpoints(cla)
	if err != nil {
		return nil
	}
	slices.Sort(addrs)
	return addrs
}

// hosts returns the served mesh: host → sorted "address:port" of its
// cluster's endpoints (clusters are "outbound|<port>||<host>"; a cluster
// whose assignment has not arrived yet has nil).
func (w *xdsWatch) hosts() map[string][]string {
	held := w.s.Snapshot(resourcev3.ClusterType, resourcev3.EndpointType)
	out := make(map[string][]string, len(held[resourcev3.ClusterType]))
	for _, c := range sortedKeys(held[resourcev3.ClusterType]) {
		_, host, _ := strings.Cut(c, "||")
		out[host] = endpointsOf(held[resourcev3.EndpointType][c])
	}
	return out
}

// waitFor waits, bounded, until the served mesh equals want.
func (w *xdsWatch) waitFor(timeout time.Duration, what string, want map[string][]string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got map[string][]string
	err := w.s.Wait(ctx, func() error {
		if got = w.hosts(); !equalMesh(got, want) {
			return errors.New("another mesh")
		}
		return nil
	})
	switch {
	case err == nil:
	case errors.Is(err, ads.ErrEnded):
		w.t.Fatalf("xDS stream ended while waiting for %s: %v", what, w.s.Err())
	default:
		w.t.Fatalf("timed out after %s waiting for xDS to serve %s:\n got  %v\n want %v", timeout, what, got, want)
	}
}

func equalMesh(a, b map[string][]string) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

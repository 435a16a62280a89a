package kube

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/api/networking/v1"
	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

const crds = "testdata/crds/istio-networking.yaml"

func TestMain(m *testing.M) { os.Exit(harness.KubeMain(m, crds)) }

// pipeline is the bridge's Kubernetes path: Syncer → Store → Writer →
// kube-apiserver, fed registry snapshots directly.
type pipeline struct {
	t        testing.TB
	ns       string
	registry string
	instance string
	store    *serviceentry.Store
	syncer   *syncer.Syncer
	writer   *Writer
	requests *harness.RequestCounter
	client   versioned.Interface // uncounted, for the test's own reads
}

type pipelineOptions struct {
	endpoints translate.EndpointMode
	registry  string
	// owned are the writer's registries; default: registry alone.
	owned []string
	// instance is output.instance: the translator's and the writer's.
	instance string
	// synced is the writer's RegistrySynced; default: the syncer's.
	synced func(registry string) bool
	// wrap, when set, wraps the transport of the writer's clients (before
	// the request counter).
	wrap func(http.RoundTripper) http.RoundTripper
}

func newPipeline(t testing.TB, k *harness.Kube, ns string, o pipelineOptions) *pipeline {
	t.Helper()
	if o.registry == "" {
		o.registry = "dc1"
	}
	tr, err := translate.New(translate.Options{Registry: o.registry, HostTemplate: consul.HostTemplate, Namespace: ns,
		Endpoints: o.endpoints, Instance: o.instance})
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{t: t, ns: ns, registry: o.registry, instance: o.instance, requests: &harness.RequestCounter{}}
	p.store = serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	p.syncer = syncer.New(p.store, syncer.Config{
		Registries: []syncer.Registry{{Name: o.registry, Type: "consul", Translator: tr}},
	})
	if p.client, err = versioned.NewForConfig(k.Config); err != nil {
		t.Fatal(err)
	}
	if o.owned == nil {
		o.owned = []string{o.registry}
	}
	if o.synced == nil {
		o.synced = p.syncer.RegistrySynced
	}
	cfg := rest.CopyConfig(k.Config)
	if o.wrap != nil {
		cfg.Wrap(o.wrap)
	}
	client, md := p.requests.IstioClients(t, cfg)
	p.writer, err = NewWriter(p.store, Options{
		Namespace:      ns,
		Instance:       o.instance,
		Registries:     o.owned,
		Client:         client,
		Metadata:       md,
		RegistrySynced: o.synced,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs the store and the writer, and leads once the registry has
// synced, as cmd/bridge does. The returned function stops it all.
func (p *pipeline) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.store.Run(ctx) })
	wg.Go(func() { p.writer.Run(ctx) })
	p.syncer.Synced(p.registry)
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-p.syncer.Ready():
			p.writer.Lead(ctx)
		}
	})
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	p.t.Cleanup(stop)
	return stop
}

func (p *pipeline) put(name string, insts ...registries.Instance) {
	p.syncer.Snapshot(registries.Snapshot{Registry: p.registry, Service: registries.Service{Name: name, Instances: insts}})
}

func (p *pipeline) remove(name string) {
	p.syncer.Snapshot(registries.Snapshot{Registry: p.registry, Service: registries.Service{Name: name}, Removed: true})
}

// settle waits until the writer has resynced and has nothing left to do.
func (p *pipeline) settle() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.store.Flush(ctx); err != nil {
		p.t.Fatal(err)
	}
	for p.writer.LastResync().IsZero() || p.writer.Pending() > 0 {
		select {
		case <-ctx.Done():
			p.t.Fatalf("writer not idle after 60s: %d pending", p.writer.Pending())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func inst(id, addr string, port uint32, labels map[string]string) registries.Instance {
	return registries.Instance{ID: id, Address: addr, Port: port, Protocol: "grpc", Labels: labels}
}

// cluster is what the apiserver holds in a namespace, by kind and name.
type cluster struct {
	ses map[string]*clientnetworking.ServiceEntry
	wes map[string]*clientnetworking.WorkloadEntry
}

func (p *pipeline) read() cluster {
	p.t.Helper()
	ctx := context.Background()
	ses, err := p.client.NetworkingV1().ServiceEntries(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	wes, err := p.client.NetworkingV1().WorkloadEntries(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	c := cluster{ses: map[string]*clientnetworking.ServiceEntry{}, wes: map[string]*clientnetworking.WorkloadEntry{}}
	for _, o := range ses.Items {
		c.ses[o.Name] = o
	}
	for _, o := range wes.Items {
		c.wes[o.Name] = o
	}
	return c
}

// checkMatchesStore asserts that the namespace holds exactly the store's
// objects, with their labels, content hash and spec, applied by meshbridge.
// Objects of other registries or instances are not compared.
func (p *pipeline) checkMatchesStore() {
	p.t.Helper()
	got := p.read()
	maps.DeleteFunc(got.ses, func(_ string, o *clientnetworking.ServiceEntry) bool {
		return o.Labels[model.LabelRegistry] != p.registry || o.Labels[model.LabelInstance] != p.instance
	})
	maps.DeleteFunc(got.wes, func(_ string, o *clientnetworking.WorkloadEntry) bool {
		return o.Labels[model.LabelRegistry] != p.registry || o.Labels[model.LabelInstance] != p.instance
	})
	want := map[model.Kind][]*model.Config{
		model.KindServiceEntry:  p.store.List(model.KindServiceEntry, p.ns),
		model.KindWorkloadEntry: p.store.List(model.KindWorkloadEntry, p.ns),
	}
	if len(got.ses) != len(want[model.KindServiceEntry]) || len(got.wes) != len(want[model.KindWorkloadEntry]) {
		p.t.Fatalf("cluster holds %d ServiceEntries %v and %d WorkloadEntries %v; store holds %d and %d",
			len(got.ses), slices.Sorted(maps.Keys(got.ses)), len(got.wes), slices.Sorted(maps.Keys(got.wes)),
			len(want[model.KindServiceEntry]), len(want[model.KindWorkloadEntry]))
	}
	check := func(c *model.Config, meta *metav1.ObjectMeta, spec proto.Message) {
		if meta == nil {
			p.t.Errorf("%s missing from the cluster", c.Key())
			return
		}
		if !maps.Equal(meta.Labels, c.Labels) {
			p.t.Errorf("%s labels = %v, want %v", c.Key(), meta.Labels, c.Labels)
		}
		if meta.Annotations[model.AnnotationHash] != c.ContentHash() {
			p.t.Errorf("%s hash = %q, want %q", c.Key(), meta.Annotations[model.AnnotationHash], c.ContentHash())
		}
		own := maps.Clone(meta.Annotations)
		delete(own, model.AnnotationHash)
		if len(own) == 0 {
			own = nil
		}
		if got := translate.ContentHash(meta.Labels, own, spec); got != c.ContentHash() {
			p.t.Errorf("%s: the stored spec hashes to %q, want %q", c.Key(), got, c.ContentHash())
		}
		managers := []string{}
		for _, mf := range meta.ManagedFields {
			if mf.Subresource == "status" {
				continue // istiod's, e.g. status.addresses
			}
			managers = append(managers, mf.Manager+"/"+string(mf.Operation))
		}
		if !slices.Equal(managers, []string{FieldManager + "/Apply"}) {
			p.t.Errorf("%s managed by %v, want only meshbridge/Apply (the status subresource aside)", c.Key(), managers)
		}
	}
	for _, c := range want[model.KindServiceEntry] {
		if o := got.ses[c.Name]; o != nil {
			check(c, &o.ObjectMeta, &o.Spec)
		} else {
			check(c, nil, nil)
		}
	}
	for _, c := range want[model.KindWorkloadEntry] {
		if o := got.wes[c.Name]; o != nil {
			check(c, &o.ObjectMeta, &o.Spec)
		} else {
			check(c, nil, nil)
		}
	}
}

func counterDelta(c prometheus.Collector) func() float64 {
	start := testutil.ToFloat64(c)
	return func() float64 { return testutil.ToFloat64(c) - start }
}

// TestWriterFollowsTheRegistry: creates, updates and deletes in the registry
// reach the apiserver as server-side applies and deletes, in both endpoint
// modes.
func TestWriterFollowsTheRegistry(t *testing.T) {
	for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
		t.Run(string(mode), func(t *testing.T) {
			k := harness.SharedKube(t)
			p := newPipeline(t, k, k.Namespace(t), pipelineOptions{endpoints: mode})
			p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, map[string]string{"version": "v1"}),
				inst("n2/orders-2", "10.0.0.2", 8080, nil))
			p.put("users", inst("n1/users-1", "10.0.1.1", 9090, nil))
			p.start()
			p.settle()
			p.checkMatchesStore()
			if got := p.read(); len(got.ses) != 2 {
				t.Fatalf("want 2 ServiceEntries, have %d", len(got.ses))
			}

			steps := []struct {
				name   string
				change func()
			}{
				{"instance label changes", func() {
					p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, map[string]string{"version": "v2"}),
						inst("n2/orders-2", "10.0.0.2", 8080, nil))
				}},
				{"instance added", func() {
					p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, map[string]string{"version": "v2"}),
						inst("n2/orders-2", "10.0.0.2", 8080, nil), inst("n3/orders-3", "10.0.0.3", 8080, nil))
				}},
				{"instance removed", func() {
					p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, map[string]string{"version": "v2"}))
				}},
				{"service removed", func() { p.remove("users") }},
				{"service added", func() { p.put("billing", inst("n4/billing-1", "10.0.2.1", 7070, nil)) }},
			}
			for _, s := range steps {
				s.change()
				p.settle()
				t.Run(s.name, func(t *testing.T) { p.t = t; p.checkMatchesStore() })
				p.t = t
			}
		})
	}
}

// TestRestartWritesNothing: a new writer (a restarted bridge) over the same
// registry contents lists the apiserver's objects and writes none.
func TestRestartWritesNothing(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	fill := func(p *pipeline) {
		for i := range 20 {
			name := fmt.Sprintf("svc-%02d", i)
			p.put(name, inst("n1/"+name+"-a", fmt.Sprintf("10.1.%d.1", i), 8080, nil), inst("n2/"+name+"-b", fmt.Sprintf("10.1.%d.2", i), 8080, nil))
		}
	}
	first := newPipeline(t, k, ns, pipelineOptions{})
	fill(first)
	stop := first.start()
	first.settle()
	first.checkMatchesStore()
	if got := first.requests.Writes(); got != 60 {
		t.Errorf("first run: %d writes, want 60 (20 ServiceEntries, 40 WorkloadEntries)", got)
	}
	stop()

	second := newPipeline(t, k, ns, pipelineOptions{})
	fill(second)
	second.start()
	second.settle()
	if got := second.requests.Writes(); got != 0 {
		t.Errorf("restart with an unchanged registry: %d writes, want 0 (requests by method: %v)", got, second.requests)
	}
	second.checkMatchesStore()
}

// TestForeignObjectsAreNeverTouched: an object without meshbridge's
// ownership labels is neither overwritten (even under a name meshbridge
// wants) nor garbage-collected; objects of a registry this bridge does not
// run, and of a registry that has not synced, are not collected either.
func TestForeignObjectsAreNeverTouched(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ctx := context.Background()
	client, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, labels map[string]string) *clientnetworking.ServiceEntry {
		t.Helper()
		se := &clientnetworking.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}
		se.Spec.Hosts = []string{name}
		se.Spec.Ports = []*networkingv1.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}
		se.Spec.Resolution = networkingv1.ServiceEntry_DNS
		out, err := client.NetworkingV1().ServiceEntries(ns).Create(ctx, se, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The same name as the ServiceEntry meshbridge wants for "orders".
	squatter := create("orders.service.consul", map[string]string{"team": "payments"})
	// Not desired, not ours: a label-less object and one claiming meshbridge
	// for another bridge's registry.
	other := create("legacy.example.com", nil)
	otherBridge := create("b.example.com", map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: "dc9"})
	// Ours, of registry dc2, which has not synced: kept until it has.
	unsynced := create("c.example.com", map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: "dc2"})

	// The writer owns dc1 and dc2; only dc1 runs (and syncs).
	p := newPipeline(t, k, ns, pipelineOptions{owned: []string{"dc1", "dc2"}})
	p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	conflictsBefore := counterDelta(conflicts)
	p.start()
	p.settle()

	for _, want := range []*clientnetworking.ServiceEntry{squatter, other, otherBridge, unsynced} {
		got, err := client.NetworkingV1().ServiceEntries(ns).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", want.Name, err)
			continue
		}
		if got.ResourceVersion != want.ResourceVersion {
			t.Errorf("%s was modified (resourceVersion %s → %s, labels %v)", want.Name, want.ResourceVersion, got.ResourceVersion, got.Labels)
		}
	}
	if d := conflictsBefore(); d != 1 {
		t.Errorf("meshbridge_kube_conflicts_total grew by %v, want 1", d)
	}
	// The WorkloadEntry of the squatted service is still written.
	if got := p.read(); len(got.wes) != 1 {
		t.Errorf("want the one WorkloadEntry of orders written, have %d", len(got.wes))
	}
}

// failingFirstList is a fake for a fault: it holds the writer's first list
// of ServiceEntries (its resync's, not the informer's metadata list) until
// release is closed, then answers it with a 500, so that the leader lists
// again; it counts the GETs of one object by name.
type failingFirstList struct {
	release chan struct{}
	listing chan struct{} // closed when the first list is held
	once    sync.Once
	mu      sync.Mutex
	gets    map[string]int
}

func newFailingFirstList() *failingFirstList {
	return &failingFirstList{release: make(chan struct{}), listing: make(chan struct{}), gets: map[string]int{}}
}

func (f *failingFirstList) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		dir, name := path.Split(r.URL.Path)
		switch {
		case r.Method != http.MethodGet || strings.Contains(r.Header.Get("Accept"), "PartialObjectMetadata"):
		case name == "serviceentries" && r.URL.Query().Get("watch") != "true":
			first := false
			f.once.Do(func() { first = true })
			if !first {
				break
			}
			close(f.listing)
			select {
			case <-f.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
				Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("injected")),
				Request: r}, nil
		case path.Base(dir) == "serviceentries":
			f.mu.Lock()
			f.gets[name]++
			f.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (f *failingFirstList) getsOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[name]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestConflictDetectedOncePerResync: a ServiceEntry whose name another
// bridge instance holds is a conflict detected (looked up, counted and
// logged) once per resync, even when it reaches the store before the
// leader's first list of the apiserver has succeeded (here the first list
// fails and is retried): nothing is looked up or written before that list.
func TestConflictDetectedOncePerResync(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	ctx := context.Background()
	client, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	const taken = "billing.service.consul"
	se := &clientnetworking.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: taken, Namespace: ns, Labels: map[string]string{
		model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: "dc1", model.LabelInstance: "b"}}}
	se.Spec.Hosts = []string{taken}
	se.Spec.Ports = []*networkingv1.ServicePort{{Number: 8080, Name: "grpc", Protocol: "GRPC"}}
	se.Spec.Resolution = networkingv1.ServiceEntry_STATIC
	if _, err := client.NetworkingV1().ServiceEntries(ns).Create(ctx, se, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	fault := newFailingFirstList()
	p := newPipeline(t, k, ns, pipelineOptions{instance: "a", wrap: fault.wrap})
	p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	conflictsBefore := counterDelta(conflicts)
	p.start()
	select {
	case <-fault.listing:
	case <-time.After(60 * time.Second):
		t.Fatal("the leader never listed ServiceEntries")
	}
	// The first list is in flight: billing reaches the store, and every
	// handler has seen it once Flush returns; then the list fails.
	p.put("billing", inst("n2/billing-1", "10.0.2.1", 8080, nil))
	flush, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.store.Flush(flush); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyTrue(t, 60*time.Second, "the writer idle before its first list",
		func() bool { return p.writer.Pending() == 0 })
	close(fault.release)
	p.settle()

	if d := conflictsBefore(); d != 1 {
		t.Errorf("meshbridge_kube_conflicts_total grew by %v, want 1", d)
	}
	if got := fault.getsOf(taken); got != 1 {
		t.Errorf("%s was looked up %d times, want once", taken, got)
	}
}

// ownedConfig is a ServiceEntry config as the translator labels it, for
// tests that put objects into the store directly.
func ownedConfig(ns, name, registry string, spec *networkingv1.ServiceEntry) *model.Config {
	labels := map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: registry}
	return &model.Config{Meta: model.Meta{
		Kind: model.KindServiceEntry, Name: name, Namespace: ns, Labels: labels,
		Hash: translate.ContentSum(labels, nil, spec),
	}, Spec: spec}
}

// TestRejectedObjectIsNotRetriedInALoop: a 422 from the CRD's validation is
// counted and logged once, not retried, and the object is written as soon as
// it changes into a valid one.
func TestRejectedObjectIsNotRetriedInALoop(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	p := newPipeline(t, k, ns, pipelineOptions{})
	// The CRD allows a workloadSelector or endpoints, not both.
	bad := &networkingv1.ServiceEntry{
		Hosts:            []string{"bad.example.com"},
		Ports:            []*networkingv1.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
		Resolution:       networkingv1.ServiceEntry_STATIC,
		WorkloadSelector: &networkingv1.WorkloadSelector{Labels: map[string]string{"app": "x"}},
		Endpoints:        []*networkingv1.WorkloadEntry{{Address: "10.0.0.1"}},
	}
	if _, err := p.store.Create(ownedConfig(ns, "bad.example.com", "dc1", bad)); err != nil {
		t.Fatal(err)
	}
	invalid := counterDelta(writes.WithLabelValues("create", "invalid"))
	p.start()
	p.settle()
	time.Sleep(3 * baseRetryDelay) // a retry, if there were one, would be due by now
	if d := invalid(); d != 1 {
		t.Errorf("meshbridge_kube_writes_total{op=create,result=invalid} grew by %v, want 1", d)
	}
	if got := p.requests.Count(http.MethodPatch); got != 1 {
		t.Errorf("%d applies of the invalid object, want 1", got)
	}

	good := proto.Clone(bad).(*networkingv1.ServiceEntry)
	good.Endpoints = nil
	if _, err := p.store.Update(ownedConfig(ns, "bad.example.com", "dc1", good)); err != nil {
		t.Fatal(err)
	}
	p.settle()
	if got := p.read(); got.ses["bad.example.com"] == nil {
		t.Fatal("the corrected object was not written")
	}
}

// TestStaleObjectsAreCollected: at the start of leadership, objects of ours
// that the store does not hold (left by a previous run) are deleted.
func TestStaleObjectsAreCollected(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	first := newPipeline(t, k, ns, pipelineOptions{})
	first.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	first.put("users", inst("n1/users-1", "10.0.1.1", 8080, nil))
	stop := first.start()
	first.settle()
	stop()

	// While no bridge ran, "users" left the registry.
	second := newPipeline(t, k, ns, pipelineOptions{})
	second.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
	second.start()
	second.settle()
	second.checkMatchesStore()
	if got := second.requests.Count(http.MethodDelete); got != 2 {
		t.Errorf("%d deletes, want 2 (the ServiceEntry and WorkloadEntry of users)", got)
	}
}

// TestTooLargeObjectIsNeverSent: an object whose request exceeds
// translate.MaxObjectBytes is refused before it reaches the apiserver.
func TestTooLargeObjectIsNeverSent(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	p := newPipeline(t, k, ns, pipelineOptions{})
	huge := &networkingv1.ServiceEntry{
		Hosts:      []string{"huge.example.com"},
		Ports:      []*networkingv1.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
		Resolution: networkingv1.ServiceEntry_STATIC,
	}
	for i := range translate.MaxInlineEndpoints {
		huge.Endpoints = append(huge.Endpoints, &networkingv1.WorkloadEntry{
			Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			Labels:  map[string]string{"padding": fmt.Sprintf("%0500d", i)},
		})
	}
	if _, err := p.store.Create(ownedConfig(ns, "huge.example.com", "dc1", huge)); err != nil {
		t.Fatal(err)
	}
	tooLarge := counterDelta(writes.WithLabelValues("create", "too_large"))
	p.start()
	p.settle()
	if d := tooLarge(); d != 1 {
		t.Errorf("meshbridge_kube_writes_total{op=create,result=too_large} grew by %v, want 1", d)
	}
	if got := p.requests.Writes(); got != 0 {
		t.Errorf("%d writes, want 0", got)
	}
}

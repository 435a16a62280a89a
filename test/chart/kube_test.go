package chart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/meshbridge/meshbridge/kube"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
)

// notInstalled are the kinds the chart may render whose CRDs the test
// apiserver lacks (Prometheus Operator's); TestTemplate checks them.
var notInstalled = map[string]bool{"PodMonitor": true, "ServiceMonitor": true}

// TestRBAC server-side applies each value set's rendered objects to a real
// kube-apiserver (RBAC authorizer on), then runs meshbridge's Kubernetes
// writer and leader election (package kube, as cmd/bridge wires them) as
// the chart's ServiceAccount, by impersonation, against the configuration
// the chart rendered: it writes a registry's ServiceEntry and WorkloadEntry
// into output.namespace, repairs one deleted by hand (its metadata watch),
// garbage-collects them, holds and releases the Lease, and logs no
// "forbidden". Everything outside the chart's Roles is Forbidden: the
// writer's kinds in another namespace or all namespaces, an update (PUT),
// other kinds (ConfigMaps, DestinationRules, Secrets, Deployments), another
// Lease, cluster-scoped reads. Without kubernetes.enabled the account may
// do nothing at all.
func TestRBAC(t *testing.T) {
	helm := harness.HelmBin(t)
	k := harness.SharedKube(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			rel, other, elsewhere := k.Namespace(t), k.Namespace(t), k.Namespace(t)
			r := render(t, helm, chartDir, rel, vs.helmArgs(rel, other)...)
			applyAll(t, k, r)
			cfg := r.config(t)
			sa := r.deployment(t).Spec.Template.Spec.ServiceAccountName
			acct := account{user: "system:serviceaccount:" + rel + ":" + sa, namespace: rel}
			as := acct.clients(t, k)

			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			outNS := digString(cfg, "output", "namespace")
			kubeOn, _ := dig(cfg, "kubernetes", "enabled").(bool)
			le := leaseOf(cfg)
			if kubeOn {
				// The RBAC authorizer learns of new bindings through a watch:
				// wait for them before the writer's first call.
				acct.waitAllowed(t, k, outNS, "networking.istio.io", "serviceentries", "patch", "")
				if le.enabled {
					acct.waitAllowed(t, k, le.namespace, "coordination.k8s.io", "leases", "update", le.name)
				}
				runWriter(t, ctx, k, as, cfg, le)
			}

			if namespaces := policyNamespaces(cfg); len(namespaces) > 0 {
				acct.waitAllowed(t, k, namespaces[0], "networking.istio.io", "destinationrules", "watch", "")
				runPolicyReader(t, as, namespaces)
				_, err := as.istio.NetworkingV1().DestinationRules(elsewhere).List(ctx, metav1.ListOptions{})
				if !apierrors.IsForbidden(err) {
					t.Errorf("list DestinationRules in a namespace policy.kubernetes does not name: %v; want Forbidden", err)
				}
			}

			// Outside the Roles: Forbidden.
			se := &networkingv1.ServiceEntry{
				ObjectMeta: metav1.ObjectMeta{Name: "probe"},
				Spec: apinetworking.ServiceEntry{Hosts: []string{"probe.example"},
					Ports: []*apinetworking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}},
			}
			forbidden := func(what string, err error) {
				t.Helper()
				if !apierrors.IsForbidden(err) {
					t.Errorf("%s as %s: %v; want Forbidden", what, acct.user, err)
				}
			}
			_, err := as.istio.NetworkingV1().ServiceEntries(elsewhere).Create(ctx, se, metav1.CreateOptions{})
			forbidden("create a ServiceEntry in another namespace", err)
			_, err = as.istio.NetworkingV1().ServiceEntries(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			forbidden("list ServiceEntries in all namespaces", err)
			_, err = as.istio.NetworkingV1().WorkloadEntries(elsewhere).List(ctx, metav1.ListOptions{})
			forbidden("list WorkloadEntries in another namespace", err)
			if kubeOn {
				// The one verb on its own objects the writer never needs.
				created, err := adminIstio(t, k).NetworkingV1().ServiceEntries(outNS).Create(ctx, se, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := as.istio.NetworkingV1().ServiceEntries(outNS).Get(ctx, created.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("get a ServiceEntry in %s as %s: %v", outNS, acct.user, err)
				}
				_, err = as.istio.NetworkingV1().ServiceEntries(outNS).Update(ctx, got, metav1.UpdateOptions{})
				forbidden("update (PUT) a ServiceEntry", err)
			} else {
				_, err = as.istio.NetworkingV1().ServiceEntries(outNS).List(ctx, metav1.ListOptions{})
				forbidden("list ServiceEntries without kubernetes.enabled", err)
			}
			dr := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: apinetworking.DestinationRule{Host: "probe.example"}}
			_, err = as.istio.NetworkingV1().DestinationRules(outNS).Create(ctx, dr, metav1.CreateOptions{})
			forbidden("create a DestinationRule", err)
			_, err = as.kube.CoreV1().ConfigMaps(outNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
			forbidden("create a ConfigMap", err)
			_, err = as.kube.CoreV1().Secrets(rel).List(ctx, metav1.ListOptions{})
			forbidden("list Secrets", err)
			_, err = as.kube.AppsV1().Deployments(rel).List(ctx, metav1.ListOptions{})
			forbidden("list Deployments", err)
			_, err = as.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			forbidden("list Namespaces", err)
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
			_, err = as.kube.CoordinationV1().Leases(elsewhere).Create(ctx, lease, metav1.CreateOptions{})
			forbidden("create a Lease in another namespace", err)
			if le.enabled {
				_, err = as.kube.CoordinationV1().Leases(le.namespace).Get(ctx, "kube-controller-manager", metav1.GetOptions{})
				forbidden("get another Lease", err)
				err = as.kube.CoordinationV1().Leases(le.namespace).Delete(ctx, le.name, metav1.DeleteOptions{})
				forbidden("delete the Lease", err)
			} else {
				_, err = as.kube.CoordinationV1().Leases(outNS).Create(ctx, lease, metav1.CreateOptions{})
				forbidden("create a Lease without leader election", err)
			}
		})
	}
}

// lease is the configuration's kubernetes.leaderElection, defaults applied
// (README "Configuration").
type lease struct {
	enabled                                   bool
	name, namespace                           string
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

func leaseOf(cfg map[string]any) lease {
	l := lease{enabled: true, name: "meshbridge", namespace: digString(cfg, "output", "namespace"),
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	if v, ok := dig(cfg, "kubernetes", "leaderElection", "enabled").(bool); ok {
		l.enabled = v
	}
	if s := digString(cfg, "kubernetes", "leaderElection", "leaseName"); s != "" {
		l.name = s
	}
	if s := digString(cfg, "kubernetes", "leaderElection", "leaseNamespace"); s != "" {
		l.namespace = s
	}
	for key, d := range map[string]*time.Duration{"leaseDuration": &l.leaseDuration, "renewDeadline": &l.renewDeadline, "retryPeriod": &l.retryPeriod} {
		if s := digString(cfg, "kubernetes", "leaderElection", key); s != "" {
			if v, err := time.ParseDuration(s); err == nil {
				*d = v
			}
		}
	}
	return l
}

// runWriter runs meshbridge's Kubernetes output as cmd/bridge does (store,
// syncer, writer; leading under the Lease, or at once without leader
// election) with as's clients, fed one service of the configuration's first
// registry, and checks every step the writer takes in output.namespace and
// the Lease's namespace. It returns once the writer stopped.
func runWriter(t *testing.T, ctx context.Context, k *harness.Kube, as *clients, cfg map[string]any, le lease) {
	t.Helper()
	outNS := digString(cfg, "output", "namespace")
	var names []string
	for _, reg := range registriesOf(cfg) {
		names = append(names, digString(reg, "name"))
	}
	registry := names[0]
	tr, err := translate.New(translate.Options{Registry: registry, Namespace: outNS})
	if err != nil {
		t.Fatal(err)
	}
	logs := &harness.LockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	sy := syncer.New(store, syncer.Config{Registries: []syncer.Registry{{Name: registry, Type: "file", Translator: tr}}, Logger: log})
	w, err := kube.NewWriter(store, kube.Options{
		Namespace: outNS, Registries: names, Client: as.istio, Metadata: as.metadata,
		RegistrySynced: sy.RegistrySynced, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func(removed bool) {
		svc := registries.Service{Name: "orders"}
		if !removed {
			svc.Instances = []registries.Instance{{ID: "n1/orders-1", Address: "10.0.0.1", Port: 8080, Protocol: "grpc"}}
		}
		sy.Snapshot(registries.Snapshot{Registry: registry, Service: svc, Removed: removed})
	}
	put(false)
	sy.Synced(registry)

	const identity = "chart-test"
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { store.Run(runCtx) })
	wg.Go(func() { w.Run(runCtx) })
	wg.Go(func() {
		select {
		case <-runCtx.Done():
			return
		case <-sy.Ready():
		}
		if !le.enabled {
			w.Lead(runCtx)
			return
		}
		err := kube.RunLeaderElection(runCtx, as.kube, kube.LeaderElection{
			LeaseName: le.name, LeaseNamespace: le.namespace, Identity: identity,
			LeaseDuration: le.leaseDuration, RenewDeadline: le.renewDeadline, RetryPeriod: le.retryPeriod,
		}, log, w.Lead)
		if err != nil {
			t.Error(err)
		}
	})
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	defer stop()
	defer func() {
		if t.Failed() {
			t.Logf("writer log:\n%s", logs.String())
		}
	}()

	admin := adminIstio(t, k).NetworkingV1()
	selector := metav1.ListOptions{LabelSelector: model.LabelRegistry + "=" + registry}
	objects := func() (ses []*networkingv1.ServiceEntry, wes int, err error) {
		sl, err := admin.ServiceEntries(outNS).List(ctx, selector)
		if err != nil {
			return nil, 0, err
		}
		wl, err := admin.WorkloadEntries(outNS).List(ctx, selector)
		if err != nil {
			return nil, 0, err
		}
		return sl.Items, len(wl.Items), nil
	}
	var first *networkingv1.ServiceEntry
	harness.Eventually(t, time.Minute, "the writer's ServiceEntry and WorkloadEntry in "+outNS, func() error {
		ses, wes, err := objects()
		if err != nil {
			return err
		}
		if len(ses) != 1 || wes != 1 {
			return fmt.Errorf("%d ServiceEntries, %d WorkloadEntries", len(ses), wes)
		}
		first = ses[0]
		return nil
	})
	if le.enabled {
		l, err := adminKube(t, k).CoordinationV1().Leases(le.namespace).Get(ctx, le.name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identity {
			t.Fatalf("Lease %s/%s: %+v, %v; want held by %s", le.namespace, le.name, l, err, identity)
		}
	}

	// Drift repair through the writer's metadata-only watch.
	if err := admin.ServiceEntries(outNS).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "the ServiceEntry deleted by hand written again", func() error {
		got, err := admin.ServiceEntries(outNS).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.UID == first.UID {
			return fmt.Errorf("still the deleted object %s", got.UID)
		}
		return nil
	})

	// Garbage collection: the service leaves the registry.
	put(true)
	harness.Eventually(t, time.Minute, "the service's objects deleted", func() error {
		ses, wes, err := objects()
		if err != nil {
			return err
		}
		if len(ses)+wes != 0 {
			return fmt.Errorf("%d ServiceEntries, %d WorkloadEntries left", len(ses), wes)
		}
		return nil
	})

	stop()
	if le.enabled {
		l, err := adminKube(t, k).CoordinationV1().Leases(le.namespace).Get(ctx, le.name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			t.Errorf("Lease %s/%s after a graceful stop: %+v, %v; want released", le.namespace, le.name, l, err)
		}
	}
	if s := logs.String(); strings.Contains(strings.ToLower(s), "forbidden") {
		t.Errorf("the writer was refused something:\n%s", s)
	}
}

// account is a ServiceAccount's user, as the apiserver authenticates its
// token.
type account struct {
	user, namespace string
}

// clients are the clients of one identity.
type clients struct {
	istio    versioned.Interface
	kube     kubernetes.Interface
	metadata metadata.Interface
}

// clients returns clients of k's admin impersonating a: every request is
// authorized as a's, with a ServiceAccount token's groups.
func (a account) clients(t testing.TB, k *harness.Kube) *clients {
	t.Helper()
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: a.user, Groups: a.groups()}
	c := &clients{}
	var err error
	if c.istio, err = versioned.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if c.metadata, err = metadata.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

func (a account) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + a.namespace, "system:authenticated"}
}

// waitAllowed waits until the apiserver's authorizer allows a verb (a
// SubjectAccessReview, answered as a request would be).
func (a account) waitAllowed(t testing.TB, k *harness.Kube, ns, group, resource, verb, name string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%s may %s %s.%s %s in %s", a.user, verb, resource, group, name, ns), func() error {
		res, err := adminKube(t, k).AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: a.user, Groups: a.groups(),
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb, Name: name}},
		}, metav1.CreateOptions{})
		switch {
		case err != nil:
			return err
		case !res.Status.Allowed:
			return fmt.Errorf("not allowed: %s", res.Status.Reason)
		}
		return nil
	})
}

// applyAll server-side applies every rendered object as k's admin, as
// helm or kubectl apply --server-side would; kinds whose CRDs are not
// installed (notInstalled) are left out. The apiserver validates each
// (a Deployment's pod spec included).
func applyAll(t testing.TB, k *harness.Kube, r *release) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.objects {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) && notInstalled[gvk.Kind] {
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Apply(t.Context(), o.GetName(), o,
			metav1.ApplyOptions{FieldManager: "chart-test", Force: true}); err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// TestNotes installs the chart with helm install --dry-run=server against a
// real apiserver and reads NOTES.txt: with mcp.enabled it prints istiod's
// configSources entry for the Service's MCP port (its own, or the xDS
// port), and k8s://; without mTLS on the xDS port it says whom the
// NetworkPolicy admits, and warns when there is none; it always says how to
// reach the loopback-only debug port.
func TestNotes(t *testing.T) {
	helm := harness.HelmBin(t)
	k := harness.SharedKube(t)
	for _, tc := range []struct {
		name      string
		args      []string
		want, not []string
	}{
		{name: "default",
			want: []string{"The xDS port serves plaintext, without client certificates: the NetworkPolicy\nmb-meshbridge admits only pods labelled meshbridge.io/xds-client=true (any namespace)",
				"port-forward deploy/mb-meshbridge 15015", "kubectl get serviceentries,workloadentries -n {ns}"},
			not: []string{"configSources", "WARNING"}},
		{name: "without the NetworkPolicy", args: []string{"--set", "networkPolicy.enabled=false"},
			want: []string{"WARNING: the xDS port answers every cluster and endpoint of the mesh to any\nclient that reaches it, and networkPolicy.enabled is false"}},
		{name: "mTLS from cert-manager", args: []string{"--set", "tls.xds.secretName=xds-cert"},
			not: []string{"WARNING", "serves plaintext"}},
		{name: "mcp on the xDS port", args: []string{"--set", "config.mcp.enabled=true", "--set", "config.kubernetes.enabled=false"},
			want: []string{"configSources:\n  - address: xds://mb-meshbridge.{ns}.svc:15010\n  - address: k8s://"},
			not:  []string{"kubectl get serviceentries"}},
		{name: "mcp on its own port", args: []string{"-f", "testdata/mcp-monitors.yaml",
			"--set", "metrics.podMonitor.enabled=false", "--set", "metrics.serviceMonitor.enabled=false"},
			want: []string{"- address: xds://mb-meshbridge.{ns}.svc:15012\n    tlsSettings: {mode: SIMPLE", "- address: k8s://"},
			not:  []string{"WARNING"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := k.Namespace(t)
			out, err := runHelm(t, helm, []string{"KUBECONFIG=" + k.Kubeconfig(t)},
				append([]string{"install", "mb", chartDir, "--namespace", ns, "--dry-run=server", "-o", "json"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var rel struct {
				Info struct {
					Notes string `json:"notes"`
				} `json:"info"`
			}
			if err := json.Unmarshal(out, &rel); err != nil || rel.Info.Notes == "" {
				t.Fatalf("helm install -o json: %v\n%s", err, out)
			}
			for _, s := range tc.want {
				if s = strings.ReplaceAll(s, "{ns}", ns); !strings.Contains(rel.Info.Notes, s) {
					t.Errorf("NOTES lack %q:\n%s", s, rel.Info.Notes)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(rel.Info.Notes, s) {
					t.Errorf("NOTES hold %q:\n%s", s, rel.Info.Notes)
				}
			}
		})
	}
}

// adminIstio and adminKube are clients of k's admin (group
// system:masters).
func adminIstio(t testing.TB, k *harness.Kube) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func adminKube(t testing.TB, k *harness.Kube) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// policyNamespaces are cfg's policy.kubernetes.namespaces when
// policy.kubernetes.enabled, else none.
func policyNamespaces(cfg map[string]any) []string {
	if on, _ := dig(cfg, "policy", "kubernetes", "enabled").(bool); !on {
		return nil
	}
	list, _ := dig(cfg, "policy", "kubernetes", "namespaces").([]any)
	var out []string
	for _, ns := range list {
		out = append(out, fmt.Sprint(ns))
	}
	return out
}

// runPolicyReader runs meshbridge's traffic policy source (package
// policy, as cmd/bridge wires it) with the account's client over
// namespaces, until it has listed every namespace's DestinationRules and
// VirtualServices without an error.
func runPolicyReader(t *testing.T, as *clients, namespaces []string) {
	t.Helper()
	src, err := policy.New(policy.Config{Kubernetes: &policy.KubernetesConfig{Client: as.istio, Namespaces: namespaces},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	defer func() { cancel(); <-done }()
	harness.Eventually(t, time.Minute, "the policy reader synced", func() error {
		st := src.Status().Kubernetes
		switch {
		case st.LastError != "":
			return errors.New(st.LastError)
		case !st.Synced:
			return errors.New("not synced")
		}
		return nil
	})
}

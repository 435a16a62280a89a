package harness

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const istioCRDs = "../../kube/testdata/crds/istio-networking.yaml"

// TestKube starts a control plane with Istio's ServiceEntry and WorkloadEntry
// CRDs, creates one of each through istio.io/client-go, restarts the
// apiserver and reads them back with the same client and through a
// kubeconfig written before the restart.
func TestKube(t *testing.T) {
	start := time.Now()
	k := StartKube(t, istioCRDs)
	t.Logf("StartKube took %s", time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(k.Config.Host, "https://127.0.0.1:") {
		t.Errorf("apiserver at %q, want https://127.0.0.1:<port>", k.Config.Host)
	}

	ns := k.Namespace(t)
	ic, err := istioclient.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	se := &networkingv1.ServiceEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "web.service.consul", Namespace: ns},
		Spec: apinetworking.ServiceEntry{
			Hosts:      []string{"web.service.consul"},
			Ports:      []*apinetworking.ServicePort{{Number: 8080, Name: "grpc-8080", Protocol: "GRPC"}},
			Resolution: apinetworking.ServiceEntry_STATIC,
			WorkloadSelector: &apinetworking.WorkloadSelector{
				Labels: map[string]string{"meshbridge.io/service": "web.service.consul"},
			},
		},
	}
	created := time.Now()
	if _, err := ic.NetworkingV1().ServiceEntries(ns).Create(ctx, se, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceEntry: %v", err)
	}
	// The apiserver delays creates by 2 s right after a CRD is Established;
	// StartKube waits that out.
	if d := time.Since(created); d >= 2*time.Second {
		t.Errorf("creating the first ServiceEntry took %s: StartKube returned inside the apiserver's 2 s window after the CRD was Established", d)
	}
	we := &networkingv1.WorkloadEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0123456789", Namespace: ns},
		Spec: apinetworking.WorkloadEntry{
			Address: "10.0.0.1",
			Ports:   map[string]uint32{"grpc-8080": 8080},
			Labels:  map[string]string{"meshbridge.io/service": "web.service.consul"},
		},
	}
	if _, err := ic.NetworkingV1().WorkloadEntries(ns).Create(ctx, we, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create WorkloadEntry: %v", err)
	}
	kubeconfig := k.Kubeconfig(t)

	host := k.Config.Host
	stop := time.Now()
	k.StopAPIServer(t)
	t.Logf("StopAPIServer took %s", time.Since(stop).Round(time.Millisecond))
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	_, err = ic.NetworkingV1().ServiceEntries(ns).Get(short, se.Name, metav1.GetOptions{})
	cancelShort()
	if err == nil {
		t.Fatal("Get succeeded with the apiserver stopped")
	}
	restart := time.Now()
	k.StartAPIServer(t)
	t.Logf("StartAPIServer took %s", time.Since(restart).Round(time.Millisecond))
	if k.Config.Host != host {
		t.Errorf("apiserver moved from %s to %s", host, k.Config.Host)
	}

	got, err := ic.NetworkingV1().ServiceEntries(ns).Get(ctx, se.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ServiceEntry after the restart, same client: %v", err)
	}
	if h := got.Spec.GetHosts(); len(h) != 1 || h[0] != "web.service.consul" || got.Spec.GetResolution() != apinetworking.ServiceEntry_STATIC {
		t.Errorf("ServiceEntry read back: hosts %v, resolution %v", h, got.Spec.GetResolution())
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	ic2, err := istioclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gotWE, err := ic2.NetworkingV1().WorkloadEntries(ns).Get(ctx, we.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get WorkloadEntry after the restart, kubeconfig from before: %v", err)
	}
	if gotWE.Spec.GetAddress() != "10.0.0.1" {
		t.Errorf("WorkloadEntry read back: address %q", gotWE.Spec.GetAddress())
	}

	// A second namespace has another name; both exist.
	ns2 := k.Namespace(t)
	kc, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{ns, ns2} {
		if _, err := kc.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", n, err)
		}
	}
	if ns == ns2 {
		t.Errorf("Namespace returned %s twice", ns)
	}
}

func TestKubeNamespaceName(t *testing.T) {
	for _, name := range []string{
		"TestKube",
		"TestX/sub_test#01",
		"Test/ÄÖÜ/---/",
		"////",
		strings.Repeat("TestVeryLongName_", 10),
		strings.Repeat("a", 55) + "/b",
	} {
		got := namespaceName(name)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("namespaceName(%q) = %q: %v", name, got, errs)
		}
		if !strings.HasPrefix(got, "t-") {
			t.Errorf("namespaceName(%q) = %q, want prefix t-", name, got)
		}
	}
	if got := namespaceName("TestX/sub_test#01"); !strings.HasPrefix(got, "t-testx-sub-test-01-") || len(got) != len("t-testx-sub-test-01-")+5 {
		t.Errorf("namespaceName(TestX/sub_test#01) = %q, want t-testx-sub-test-01-<5 random>", got)
	}
	if a, b := namespaceName("TestKube"), namespaceName("TestKube"); a == b {
		t.Errorf("namespaceName returned %q twice", a)
	}
}

func TestMain(m *testing.M) {
	// The Nacos server and Dubbo Java run only in the binary's own network
	// namespace (netns.go).
	if code, reexeced := ReexecInNetNS(); reexeced {
		os.Exit(code)
	}
	os.Exit(KubeMain(m, istioCRDs))
}

// TestSharedKube checks that SharedKube starts one control plane, with
// KubeMain's CRDs, and returns it to every caller.
func TestSharedKube(t *testing.T) {
	var mu sync.Mutex
	var first *Kube
	for i := range 2 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			k := SharedKube(t)
			mu.Lock()
			if first == nil {
				first = k
			} else if k != first {
				t.Errorf("SharedKube returned %p, then %p", first, k)
			}
			mu.Unlock()
			ns := k.Namespace(t)
			ic, err := istioclient.NewForConfig(k.Config)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ic.NetworkingV1().WorkloadEntries(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
				t.Errorf("list WorkloadEntries: %v", err)
			}
		})
	}
}

// TestKubeAuthorizesWithRBAC: the apiserver authorizes with RBAC, so a user
// impersonated through Config (rest.Config.Impersonate, as test/chart runs
// the writer as a chart's ServiceAccount) may do only what Roles grant it,
// while Config's admin may do anything.
func TestKubeAuthorizesWithRBAC(t *testing.T) {
	k := SharedKube(t)
	ns := k.Namespace(t)
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list ConfigMaps as a ServiceAccount without Roles: %v; want Forbidden", err)
	}
	if _, err := k.client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list ConfigMaps as admin: %v", err)
	}
}

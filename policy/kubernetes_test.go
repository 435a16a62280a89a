package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/meshbridge/meshbridge/test/harness"
)

// istioCRDs are Istio's networking CRDs the tests' apiserver installs
// (make refresh-crds keeps the copy).
const istioCRDs = "../kube/testdata/crds/istio-networking.yaml"

// kubeSource runs a Source of the cluster's namespace ns (and of files,
// when globs are given) until the test ends, and returns it and a function
// giving the rules as last handed to OnChange.
func kubeSource(t *testing.T, cfg *rest.Config, ns string, globs ...string) (*Source, func() *Rules) {
	t.Helper()
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got *Rules
	src, err := New(Config{Globs: globs, Settle: 50 * time.Millisecond,
		Kubernetes: &KubernetesConfig{Client: client, Namespaces: []string{ns}},
		OnChange:   func(r *Rules) { mu.Lock(); got = r; mu.Unlock() },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return src, func() *Rules { mu.Lock(); defer mu.Unlock(); return got }
}

// TestKubernetesSource: DestinationRules and VirtualServices created,
// changed and deleted in a real kube-apiserver are served (rule 10),
// before the files' rule for the same host (which serves again once the
// cluster's is deleted); an object exported to its own namespace only is
// rejected with that reason (rule 9).
func TestKubernetesSource(t *testing.T) {
	k := harness.StartKube(t, istioCRDs)
	ns := k.Namespace(t)
	client, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(dr("web-file", "web.service.consul",
		"  trafficPolicy:\n    outlierDetection: {consecutive5xxErrors: 9}\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	src, rules := kubeSource(t, k.Config, ns, filepath.Join(dir, "*.yaml"))
	ctx := t.Context()
	wait := 30 * time.Second
	ejectAfter := func(r *Rules, host string) uint32 {
		return r.For(host).GetTrafficPolicy().GetOutlierDetection().GetConsecutive_5XxErrors().GetValue()
	}
	harness.Eventually(t, wait, "the file's rule served", func() error {
		if r := rules(); r == nil || ejectAfter(r, "web.service.consul") != 9 {
			return errors.New("not yet")
		}
		return nil
	})

	rule := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	rule.Spec.Host = "Web.Service.Consul"
	rule.Spec.TrafficPolicy = &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)}}
	created, err := client.NetworkingV1().DestinationRules(ns).Create(ctx, rule, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, wait, "the cluster's rule served before the file's", func() error {
		if n := ejectAfter(rules(), "web.service.consul"); n != 3 {
			return fmt.Errorf("ejects after %d", n)
		}
		return nil
	})

	created.Spec.TrafficPolicy.OutlierDetection.Consecutive_5XxErrors = wrapperspb.UInt32(4)
	if _, err := client.NetworkingV1().DestinationRules(ns).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	vs.Spec.Hosts = []string{"web.service.consul"}
	vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "web.service.consul"}}}}}
	if _, err := client.NetworkingV1().VirtualServices(ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	local := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}}
	local.Spec.Host = "api.service.consul"
	local.Spec.ExportTo = []string{"."}
	if _, err := client.NetworkingV1().DestinationRules(ns).Create(ctx, local, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, wait, "the update, the VirtualService and the rejection", func() error {
		r := rules()
		switch {
		case ejectAfter(r, "web.service.consul") != 4:
			return fmt.Errorf("ejects after %d", ejectAfter(r, "web.service.consul"))
		case r.RoutingFor("web.service.consul") == nil:
			return errors.New("no VirtualService")
		case r.For("api.service.consul") != nil:
			return errors.New("the rule exported to its namespace only is served")
		}
		for _, rej := range src.Status().Rejected {
			if rej.ID == ns+"/api" && strings.Contains(rej.Reason, "exportTo") && rej.Source == SourceKubernetes {
				return nil
			}
		}
		return fmt.Errorf("rejected %+v", src.Status().Rejected)
	})

	if err := client.NetworkingV1().DestinationRules(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, wait, "the file's rule again", func() error {
		if n := ejectAfter(rules(), "web.service.consul"); n != 9 {
			return fmt.Errorf("ejects after %d", n)
		}
		return nil
	})
	if st := src.Status().Kubernetes; st == nil || !st.Synced || st.LastError != "" {
		t.Errorf("kubernetes status %+v, want synced without error", st)
	}
}

// TestKubernetesSourceForbidden: a source whose identity may not list
// DestinationRules serves nothing, not even its files' rules (rule 10:
// no partial policy), and shows why.
func TestKubernetesSourceForbidden(t *testing.T) {
	k := harness.StartKube(t, istioCRDs)
	ns := k.Namespace(t)
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(dr("web-file", "web.service.consul", ejection)), 0o644); err != nil {
		t.Fatal(err)
	}
	src, rules := kubeSource(t, cfg, ns, filepath.Join(dir, "*.yaml"))
	harness.Eventually(t, 30*time.Second, "the list error shown", func() error {
		if st := src.Status().Kubernetes; st == nil || !strings.Contains(st.LastError, "forbidden") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if rules() != nil || src.Status().Kubernetes.Synced {
		t.Errorf("rules served (%v) or synced before the cluster could be read", rules())
	}
}

package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/test/harness"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "../../charts/meshbridge"

// istioCRDs are the ServiceEntry and WorkloadEntry CRDs the shared control
// plane installs, the same file test/e2e and package kube use.
const istioCRDs = "../../kube/testdata/crds/istio-networking.yaml"

func TestMain(m *testing.M) {
	code := harness.KubeMain(m, istioCRDs)
	if bridgeBin.dir != "" {
		_ = os.RemoveAll(bridgeBin.dir)
	}
	os.Exit(code)
}

// valueSet is one way of installing the chart: a values file of testdata
// ("" for the chart's defaults) and --set flags that depend on the
// namespaces of a test (the release's, and another one).
type valueSet struct {
	name string
	file string
	sets func(release, other string) []string
}

// valueSets are the default values and three others; each test of this
// package runs them all.
var valueSets = []valueSet{
	{name: "default"},
	// MCP on its own TLS port, mTLS xDS, no Kubernetes output, monitors.
	{name: "mcp-monitors", file: "testdata/mcp-monitors.yaml"},
	// Consul token and Nacos password from Secrets, state.dir on a PVC, the
	// Lease in another namespace under its own name.
	{name: "state-secrets", file: "testdata/state-secrets.yaml", sets: func(_, other string) []string {
		return []string{"config.kubernetes.leaderElection.leaseNamespace=" + other}
	}},
	// One replica, no leader election, objects in another namespace.
	{name: "single-replica", file: "testdata/single-replica.yaml", sets: func(_, other string) []string {
		return []string{"config.output.namespace=" + other}
	}},
	// TLS from cert-manager Secrets (mTLS xDS, TLS MCP on its own port), a
	// NetworkPolicy admitting Prometheus.
	{name: "cert-manager", file: "testdata/cert-manager.yaml"},
	// Traffic policy read from the cluster, in another namespace.
	{name: "policy-reader", file: "testdata/policy-reader.yaml", sets: func(_, other string) []string {
		return []string{"config.policy.kubernetes.namespaces={" + other + "}"}
	}},
}

// helmArgs are the values arguments of vs for a release in namespace
// release, with other as the other namespace.
func (vs valueSet) helmArgs(release, other string) []string {
	var args []string
	if vs.file != "" {
		args = append(args, "-f", vs.file)
	}
	if vs.sets != nil {
		for _, s := range vs.sets(release, other) {
			args = append(args, "--set", s)
		}
	}
	return args
}

// runHelm runs helm with args and returns its stdout; stderr goes into the
// error. helm's own configuration, cache and data live in a temp dir, and
// it sees no kubeconfig but the one in env.
func runHelm(t testing.TB, helm string, env []string, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// release is what helm template rendered: the objects by kind and name.
type release struct {
	namespace string
	objects   []*unstructured.Unstructured
}

// render runs helm template for release "mb" of the chart in dir in
// namespace ns with args, and parses every document it prints.
func render(t testing.TB, helm, dir, ns string, args ...string) *release {
	t.Helper()
	out, err := runHelm(t, helm, nil, append([]string{"template", "mb", dir, "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseManifests(out)
	if err != nil {
		t.Fatalf("helm template printed what Kubernetes could not read: %v\n%s", err, out)
	}
	return &release{namespace: ns, objects: objs}
}

// parseManifests splits a multi-document YAML stream and reads each
// document as an object; empty documents are skipped.
func parseManifests(b []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%w in\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document without apiVersion, kind or name:\n%s", doc)
		}
		objs = append(objs, u)
	}
}

// all returns the objects of kind.
func (r *release) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the object of kind named name, failing the test when there is
// none.
func (r *release) one(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.all(kind) {
		if o.GetName() == name {
			return o
		}
	}
	var names []string
	for _, o := range r.objects {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	t.Fatalf("no %s %s rendered; rendered: %s", kind, name, strings.Join(names, ", "))
	return nil
}

// typed converts u into T, failing the test on a field T does not have
// (strict: a misspelt field in a template is an error, as kubectl's
// validation would make it).
func typed[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// deployment is the release's one Deployment.
func (r *release) deployment(t testing.TB) *appsv1.Deployment {
	t.Helper()
	ds := r.all("Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(ds))
	}
	return typed[appsv1.Deployment](t, ds[0])
}

// config is meshbridge's configuration as the ConfigMap holds it.
func (r *release) config(t testing.TB) map[string]any {
	t.Helper()
	cms := r.all("ConfigMap")
	for _, u := range cms {
		cm := typed[corev1.ConfigMap](t, u)
		if s, ok := cm.Data["config.yaml"]; ok {
			var cfg map[string]any
			if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
				t.Fatalf("ConfigMap %s config.yaml: %v\n%s", cm.Name, err, s)
			}
			return cfg
		}
	}
	t.Fatalf("no ConfigMap with config.yaml among %d ConfigMaps", len(cms))
	return nil
}

// dig returns the value at path in a YAML map, or nil.
func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// digString is dig for a string value ("" when absent or not a string).
func digString(m map[string]any, path ...string) string {
	s, _ := dig(m, path...).(string)
	return s
}

package chart

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/test/harness"
)

// The namespaces of the rendering tests: the release's, and the other one
// of the value sets that write or hold the Lease elsewhere.
const (
	releaseNS = "mesh"
	otherNS   = "istio-config"
)

// TestLint runs helm lint --strict for every value set.
func TestLint(t *testing.T) {
	helm := harness.HelmBin(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"lint", "--strict", chartDir, "--namespace", releaseNS}, vs.helmArgs(releaseNS, otherNS)...)
			if out, err := runHelm(t, helm, nil, args...); err != nil {
				t.Fatal(err)
			} else if !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint: %s", out)
			}
		})
	}
}

// TestTemplate renders every value set and checks what every rendering must
// hold (checkCommon), then what the set is for.
func TestTemplate(t *testing.T) {
	helm := harness.HelmBin(t)
	checks := map[string]func(t *testing.T, r *release){
		"default":        checkDefault,
		"mcp-monitors":   checkMCPMonitors,
		"state-secrets":  checkStateSecrets,
		"single-replica": checkSingleReplica,
		"cert-manager":   checkCertManager,
		"policy-reader":  func(*testing.T, *release) {}, // checkCommon's RBAC and token checks
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, helm, chartDir, releaseNS, vs.helmArgs(releaseNS, otherNS)...)
			checkCommon(t, r, userConfig(t, vs), chartValues(t, vs))
			checks[vs.name](t, r)
		})
	}
}

// userConfig is the config block a value set gives: the chart's default
// config with the set's values file's config and --set flags merged over
// it, as helm merges values.
func userConfig(t testing.TB, vs valueSet) map[string]any {
	t.Helper()
	cfg, _ := chartValues(t, vs)["config"].(map[string]any)
	if vs.sets != nil {
		for _, s := range vs.sets(releaseNS, otherNS) {
			key, val, _ := strings.Cut(s, "=")
			path := strings.Split(strings.TrimPrefix(key, "config."), ".")
			m := cfg
			for _, p := range path[:len(path)-1] {
				next, ok := m[p].(map[string]any)
				if !ok {
					next = map[string]any{}
					m[p] = next
				}
				m = next
			}
			if list, ok := strings.CutPrefix(val, "{"); ok {
				// helm's --set list syntax: {a,b}.
				var items []any
				for item := range strings.SplitSeq(strings.TrimSuffix(list, "}"), ",") {
					items = append(items, item)
				}
				m[path[len(path)-1]] = items
				continue
			}
			m[path[len(path)-1]] = val
		}
	}
	return cfg
}

// chartValues are the chart's values for a value set: values.yaml with the
// set's values file merged over it, as helm merges them (not its --set
// flags, which set config keys).
func chartValues(t testing.TB, vs valueSet) map[string]any {
	t.Helper()
	read := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return v
	}
	values := read(filepath.Join(chartDir, "values.yaml"))
	if vs.file != "" {
		mergeValues(values, read(vs.file))
	}
	return values
}

// mergeValues merges src into dst as helm merges values: maps key by key,
// anything else replaced whole.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// leaves returns the paths of a values tree's leaves, dot-joined: a map is
// descended into unless empty; lists, scalars, null and {} are leaves.
func leaves(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leaves(p, m[k])...)
	}
	return out
}

// chartSets are the config keys the chart sets, with what it sets them to
// for the rendering in releaseNS with the default ports (README of the
// chart, "Configuration").
var chartSets = map[string]string{
	"xds.address":       "0.0.0.0:15010",
	"http.address":      "0.0.0.0:15014",
	"http.debugAddress": "127.0.0.1:15015",
}

// checkCommon checks what every rendering holds: the user's config passed
// through with the chart's keys merged in, the listeners, the pod's
// security, volumes for every path the bridge writes and for every secret
// file the config names, the Service, the PDB, and namespaced RBAC that
// follows kubernetes.enabled and leader election.
func checkCommon(t *testing.T, r *release, user, values map[string]any) {
	cfg := r.config(t)

	// The user's keys pass through unchanged; the chart's are set.
	for _, leaf := range leaves("", user) {
		path := strings.Split(leaf, ".")
		if _, set := chartSets[leaf]; set || leaf == "output.namespace" || leaf == "mcp.address" {
			continue
		}
		if got, want := dig(cfg, path...), dig(user, path...); !reflect.DeepEqual(got, want) {
			t.Errorf("config %s = %#v, want the value's %#v", leaf, got, want)
		}
	}
	for key, want := range chartSets {
		if got := digString(cfg, strings.Split(key, ".")...); got != want {
			t.Errorf("config %s = %q, want %q", key, got, want)
		}
	}
	outNS := digString(cfg, "output", "namespace")
	if want := digString(user, "output", "namespace"); want != "" && outNS != want || want == "" && outNS != releaseNS {
		t.Errorf("config output.namespace = %q; values say %q (\"\" = the release's, %s)", outNS, want, releaseNS)
	}

	d := r.deployment(t)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := []string{"run", "--config", "/etc/meshbridge/config.yaml", "--log-format", "json"}; !slices.Equal(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/meshbridge/meshbridge:") {
		t.Errorf("image %q", c.Image)
	}

	// Ports: the container's are the config's, the Service's target them.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["grpc-xds"] != 15010 || ports["http-monitoring"] != 15014 {
		t.Errorf("container ports %v, want grpc-xds 15010 and http-monitoring 15014", ports)
	}
	for _, p := range c.Ports {
		if p.ContainerPort == 15015 {
			t.Errorf("the debug port is a container port: %v", p)
		}
	}
	for name, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != name || probe.HTTPGet.Port != intstr.FromString("http-monitoring") {
			t.Errorf("probe %s: %+v", name, probe)
		}
	}
	svc := typed[corev1.Service](t, r.one(t, "Service", d.Name))
	for _, sp := range svc.Spec.Ports {
		if ports[sp.TargetPort.StrVal] != sp.Port {
			t.Errorf("Service port %s %d targets %q: container port %d", sp.Name, sp.Port, sp.TargetPort.StrVal, ports[sp.TargetPort.StrVal])
		}
	}
	if len(svc.Spec.Ports) != len(c.Ports) {
		t.Errorf("Service exposes %d ports, the container %d", len(svc.Spec.Ports), len(c.Ports))
	}
	podLabels := d.Spec.Template.Labels
	if !subset(d.Spec.Selector.MatchLabels, podLabels) || !subset(svc.Spec.Selector, podLabels) {
		t.Errorf("selectors: Deployment %v, Service %v; pod labels %v", d.Spec.Selector.MatchLabels, svc.Spec.Selector, podLabels)
	}
	if sum, ok := d.Spec.Template.Annotations["checksum/config"]; ok {
		t.Errorf("checksum/config annotation %q by default: a config change would roll the pods instead of reloading", sum)
	}
	pdb := typed[policyv1.PodDisruptionBudget](t, r.one(t, "PodDisruptionBudget", d.Name))
	if !subset(pdb.Spec.Selector.MatchLabels, podLabels) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %+v", pdb.Spec)
	}

	// Security.
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("no security context")
	}
	if !deref(psc.RunAsNonRoot) || deref(psc.RunAsUser) != 65532 || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if !deref(sc.RunAsNonRoot) || deref(sc.RunAsUser) != 65532 || !deref(sc.ReadOnlyRootFilesystem) ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container security context %+v", sc)
	}

	// Volumes: every mount has its volume, no path twice; the config and
	// every directory the bridge writes under the read-only root.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		if _, dup := volumes[v.Name]; dup {
			t.Errorf("volume %s twice", v.Name)
		}
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("mount %s: no volume %s", m.MountPath, m.Name)
		}
		if _, dup := mounts[m.MountPath]; dup {
			t.Errorf("two mounts at %s", m.MountPath)
		}
		mounts[m.MountPath] = m
	}
	if m, ok := mounts["/etc/meshbridge"]; !ok || !m.ReadOnly || volumes[m.Name].ConfigMap == nil {
		t.Errorf("/etc/meshbridge: %+v", m)
	}
	writable := []string{"/tmp"}
	if dir := digString(cfg, "state", "dir"); dir != "" {
		writable = append(writable, dir)
	}
	for _, reg := range registriesOf(cfg) {
		if dir := digString(reg, "nacos", "cacheDir"); dir != "" && !strings.HasPrefix(dir, "/tmp/") {
			writable = append(writable, dir)
		}
	}
	for _, dir := range writable {
		m, ok := mounts[dir]
		if !ok || m.ReadOnly {
			t.Errorf("nothing writable mounted at %s (the root file system is read-only): %+v", dir, m)
		}
	}
	// Every file the config names that the chart could mount (its
	// secretMounts) lies in a Secret volume, and with items under a key's
	// path.
	for path := range configFiles(cfg) {
		if strings.HasPrefix(path, "/etc/meshbridge-services/") {
			continue // the file registry's file: an extraVolume
		}
		var found bool
		for dir, m := range mounts {
			rel, ok := strings.CutPrefix(path, dir+"/")
			sec := volumes[m.Name].Secret
			if !ok || sec == nil {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("secret %s mounted writable", sec.SecretName)
			}
			if len(sec.Items) == 0 || slices.ContainsFunc(sec.Items, func(i corev1.KeyToPath) bool { return i.Path == rel }) {
				found = true
			}
		}
		if !found {
			t.Errorf("config names %s, which no Secret volume holds", path)
		}
	}

	checkNetworkPolicy(t, r, cfg, values, c.Ports)

	// The service account token only where the bridge uses it: the
	// Kubernetes output or policy.kubernetes with the in-cluster config.
	kubeOn, _ := dig(cfg, "kubernetes", "enabled").(bool)
	policyOn, _ := dig(cfg, "policy", "kubernetes", "enabled").(bool)
	if want := (kubeOn || policyOn) && digString(cfg, "kubernetes", "kubeconfig") == ""; pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken != want {
		t.Errorf("pod automountServiceAccountToken %v, want %v (kubernetes.enabled %v, policy.kubernetes.enabled %v)",
			pod.AutomountServiceAccountToken, want, kubeOn, policyOn)
	}

	// RBAC: namespaced only (these value sets name policy.kubernetes'
	// namespaces), following kubernetes.enabled and policy.kubernetes.
	if n := len(r.all("ClusterRole")) + len(r.all("ClusterRoleBinding")); n != 0 {
		t.Errorf("%d cluster-wide RBAC objects", n)
	}
	leOn := kubeOn
	if v, ok := dig(cfg, "kubernetes", "leaderElection", "enabled").(bool); ok {
		leOn = kubeOn && v
	}
	leaseNS := digString(cfg, "kubernetes", "leaderElection", "leaseNamespace")
	if leaseNS == "" {
		leaseNS = outNS
	}
	leaseName := digString(cfg, "kubernetes", "leaderElection", "leaseName")
	if leaseName == "" {
		leaseName = "meshbridge"
	}
	want := map[string]rbacv1.Role{}
	if kubeOn {
		want[d.Name+"-writer"] = rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: outNS}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"networking.istio.io"}, Resources: []string{"serviceentries", "workloadentries"},
			Verbs: []string{"get", "list", "watch", "create", "patch", "delete"},
		}}}
	}
	if leOn {
		want[d.Name+"-leader-election"] = rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{leaseName}, Verbs: []string{"get", "update"}},
		}}
	}
	for _, ns := range policyNamespaces(cfg) {
		// One namespace in these value sets: one Role of that name.
		want[d.Name+"-policy-reader"] = rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"networking.istio.io"}, Resources: []string{"destinationrules", "virtualservices"},
			Verbs: []string{"get", "list", "watch"},
		}}}
	}
	roles := r.all("Role")
	if len(roles) != len(want) || len(r.all("RoleBinding")) != len(want) {
		t.Errorf("%d Roles and %d RoleBindings, want %d of each (%v)", len(roles), len(r.all("RoleBinding")), len(want), slices.Sorted(maps.Keys(want)))
	}
	for _, u := range roles {
		role := typed[rbacv1.Role](t, u)
		w, ok := want[role.Name]
		if !ok {
			t.Errorf("unexpected Role %s", role.Name)
			continue
		}
		if role.Namespace != w.Namespace || !reflect.DeepEqual(role.Rules, w.Rules) {
			t.Errorf("Role %s in %s: %+v; want in %s: %+v", role.Name, role.Namespace, role.Rules, w.Namespace, w.Rules)
		}
		rb := typed[rbacv1.RoleBinding](t, r.one(t, "RoleBinding", role.Name))
		wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: pod.ServiceAccountName, Namespace: releaseNS}}
		if rb.Namespace != role.Namespace || rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}) ||
			!reflect.DeepEqual(rb.Subjects, wantSubject) {
			t.Errorf("RoleBinding %s: %+v", rb.Name, rb)
		}
	}
	sa := typed[corev1.ServiceAccount](t, r.one(t, "ServiceAccount", pod.ServiceAccountName))
	if sa.Namespace != releaseNS || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount in %s, automountServiceAccountToken %v; want %s, false (the pod decides)", sa.Namespace, sa.AutomountServiceAccountToken, releaseNS)
	}
	for _, o := range r.objects {
		if ns := o.GetNamespace(); ns == "" {
			t.Errorf("%s %s has no namespace", o.GetKind(), o.GetName())
		} else if o.GetKind() != "Role" && o.GetKind() != "RoleBinding" && ns != releaseNS {
			t.Errorf("%s %s in %s, not the release's namespace", o.GetKind(), o.GetName(), ns)
		}
	}
}

// checkNetworkPolicy: one NetworkPolicy selects the pods, for ingress only;
// each container port has one rule: the xDS port admits the labelled
// clients of any namespace (and istiod's pods while MCP is served there),
// the MCP port istiod's pods alone, the HTTP port networkPolicy.httpFrom or
// everyone.
func checkNetworkPolicy(t *testing.T, r *release, cfg, values map[string]any, ports []corev1.ContainerPort) {
	t.Helper()
	nps := r.all("NetworkPolicy")
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1 (networkPolicy.enabled by default)", len(nps))
	}
	np := typed[networkingv1.NetworkPolicy](t, nps[0])
	podLabels := r.deployment(t).Spec.Template.Labels
	if !subset(np.Spec.PodSelector.MatchLabels, podLabels) || len(np.Spec.PodSelector.MatchLabels) == 0 ||
		!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy selects %v for %v; want the pods (%v), ingress only", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes, podLabels)
	}
	rules := map[int32]networkingv1.NetworkPolicyIngressRule{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			rules[p.Port.IntVal] = rule
		}
	}
	istiodNS := "istio-system"
	if v, ok := values["networkPolicy"].(map[string]any)["istiodNamespace"].(string); ok {
		istiodNS = v
	}
	istiod := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": istiodNS}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "istiod"}},
	}
	clients := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{},
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"meshbridge.io/xds-client": "true"}}}
	mcpOn, _ := dig(cfg, "mcp", "enabled").(bool)
	for _, p := range ports {
		rule, ok := rules[p.ContainerPort]
		if !ok {
			t.Errorf("NetworkPolicy: no rule for port %s %d", p.Name, p.ContainerPort)
			continue
		}
		var want []networkingv1.NetworkPolicyPeer
		switch p.Name {
		case "grpc-xds":
			want = []networkingv1.NetworkPolicyPeer{clients}
			if mcpOn && digString(cfg, "mcp", "address") == "" {
				want = append(want, istiod)
			}
		case "grpc-mcp":
			want = []networkingv1.NetworkPolicyPeer{istiod}
		case "http-monitoring":
			var httpFrom []networkingv1.NetworkPolicyPeer
			if b, err := yaml.Marshal(values["networkPolicy"].(map[string]any)["httpFrom"]); err == nil {
				_ = yaml.Unmarshal(b, &httpFrom)
			}
			want = httpFrom
		}
		if (len(rule.From) != 0 || len(want) != 0) && !reflect.DeepEqual(rule.From, want) {
			t.Errorf("NetworkPolicy port %s admits %+v, want %+v", p.Name, rule.From, want)
		}
	}
	if len(rules) != len(ports) {
		t.Errorf("NetworkPolicy has rules for %d ports, the container %d", len(rules), len(ports))
	}
}

func checkDefault(t *testing.T, r *release) {
	d := r.deployment(t)
	if deref(d.Spec.Replicas) != 2 || d.Name != "mb-meshbridge" {
		t.Errorf("Deployment %s, %d replicas; want mb-meshbridge, 2", d.Name, deref(d.Spec.Replicas))
	}
	if c := d.Spec.Template.Spec.Containers[0]; c.Image != "ghcr.io/meshbridge/meshbridge:"+chartAppVersion(t) {
		t.Errorf("image %s, want the chart's appVersion %s", c.Image, chartAppVersion(t))
	}
	cfg := r.config(t)
	if dig(cfg, "kubernetes", "enabled") != true || dig(cfg, "kubernetes", "leaderElection", "enabled") != true {
		t.Errorf("kubernetes %v", dig(cfg, "kubernetes"))
	}
	if dig(cfg, "mcp") != nil || dig(cfg, "state") != nil {
		t.Errorf("the chart set keys the values did not: mcp %v, state %v", dig(cfg, "mcp"), dig(cfg, "state"))
	}
	for _, kind := range []string{"PersistentVolumeClaim", "PodMonitor", "ServiceMonitor"} {
		if n := len(r.all(kind)); n != 0 {
			t.Errorf("%d %ss by default", n, kind)
		}
	}
	if n := len(r.all("ConfigMap")); n != 1 {
		t.Errorf("%d ConfigMaps, want the config's alone", n)
	}
	vols := d.Spec.Template.Spec.Volumes
	if len(vols) != 2 || vols[1].Name != "tmp" || vols[1].EmptyDir == nil {
		t.Errorf("volumes %+v, want config and the /tmp emptyDir", vols)
	}
	// Replicas spread over nodes by default.
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		!subset(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("affinity %+v", aff)
	}
}

func checkMCPMonitors(t *testing.T, r *release) {
	cfg := r.config(t)
	if got := digString(cfg, "mcp", "address"); got != "0.0.0.0:15012" {
		t.Errorf("mcp.address %q, want 0.0.0.0:15012", got)
	}
	d := r.deployment(t)
	svc := typed[corev1.Service](t, r.one(t, "Service", d.Name))
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Name == "grpc-mcp" && p.Port == 15012 && p.TargetPort.StrVal == "grpc-mcp"
	}) {
		t.Errorf("Service ports %+v: no grpc-mcp 15012", svc.Spec.Ports)
	}
	podLabels := d.Spec.Template.Labels
	for kind, interval := range map[string]string{"PodMonitor": "30s", "ServiceMonitor": "15s"} {
		m := r.one(t, kind, d.Name)
		if m.GetAPIVersion() != "monitoring.coreos.com/v1" || m.GetLabels()["release"] != "prometheus" {
			t.Errorf("%s: apiVersion %s, labels %v", kind, m.GetAPIVersion(), m.GetLabels())
		}
		sel, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
		target := podLabels
		field := "podMetricsEndpoints"
		if kind == "ServiceMonitor" {
			target, field = svc.Labels, "endpoints"
		}
		if len(sel) == 0 || !subset(sel, target) {
			t.Errorf("%s selects %v, not %v", kind, sel, target)
		}
		eps, _, _ := unstructured.NestedSlice(m.Object, "spec", field)
		if len(eps) != 1 {
			t.Fatalf("%s %s: %v", kind, field, eps)
		}
		ep := eps[0].(map[string]any)
		if ep["port"] != "http-monitoring" || ep["path"] != "/metrics" || ep["interval"] != interval {
			t.Errorf("%s endpoint %v", kind, ep)
		}
	}
}

func checkStateSecrets(t *testing.T, r *release) {
	d := r.deployment(t)
	pvc := typed[corev1.PersistentVolumeClaim](t, r.one(t, "PersistentVolumeClaim", d.Name+"-state"))
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) ||
		deref(pvc.Spec.StorageClassName) != "shared-nfs" || !pvc.Spec.Resources.Requests.Storage().Equal(resource.MustParse("128Mi")) {
		t.Errorf("PVC %+v", pvc.Spec)
	}
	pod := d.Spec.Template.Spec
	byName := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		byName[v.Name] = v
	}
	if v := byName["state"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.Name {
		t.Errorf("state volume %+v, want the claim %s", v, pvc.Name)
	}
	if v := byName["consul-token"]; v.Secret == nil || v.Secret.SecretName != "consul-acl-token" || deref(v.Secret.DefaultMode) != 0o440 {
		t.Errorf("consul-token volume %+v", v)
	}
	if v := byName["nacos-password"]; v.Secret == nil || v.Secret.SecretName != "nacos-auth" {
		t.Errorf("nacos-password volume %+v", v)
	}
	if v := byName["nacos-cache-0"]; v.EmptyDir == nil {
		t.Errorf("nacos cacheDir volume %+v", v)
	}
	if deref(pod.SecurityContext.FSGroup) != 65532 {
		t.Errorf("fsGroup %v: the Secrets' mode 0440 would not let the bridge read them", pod.SecurityContext.FSGroup)
	}
	for _, u := range r.all("Role") {
		role := typed[rbacv1.Role](t, u)
		want := releaseNS
		if strings.HasSuffix(role.Name, "-leader-election") {
			want = otherNS
		}
		if role.Namespace != want {
			t.Errorf("Role %s in %s, want %s", role.Name, role.Namespace, want)
		}
	}
}

// checkCertManager: the Secrets of tls.*.secretName are mounted read-only
// and the config's xds.tls (with the client CA: mTLS) and mcp.tls name
// their files, cert-manager's keys.
func checkCertManager(t *testing.T, r *release) {
	cfg := r.config(t)
	const dir = "/var/run/secrets/meshbridge/tls/"
	for key, want := range map[string]string{
		"xds.tls.certFile": dir + "xds/tls.crt", "xds.tls.keyFile": dir + "xds/tls.key", "xds.tls.clientCAFile": dir + "xds/ca.crt",
		"mcp.tls.certFile": dir + "mcp/tls.crt", "mcp.tls.keyFile": dir + "mcp/tls.key",
	} {
		if got := digString(cfg, strings.Split(key, ".")...); got != want {
			t.Errorf("config %s = %q, want %q", key, got, want)
		}
	}
	if dig(cfg, "mcp", "tls", "clientCAFile") != nil {
		t.Error("mcp.tls has a client CA: istiod presents no certificate")
	}
	pod := r.deployment(t).Spec.Template.Spec
	for name, secret := range map[string]string{"tls-xds": "meshbridge-xds-cert", "tls-mcp": "meshbridge-mcp-cert"} {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == name })
		if i < 0 || pod.Volumes[i].Secret == nil || pod.Volumes[i].Secret.SecretName != secret {
			t.Errorf("no volume %s of Secret %s: %+v", name, secret, pod.Volumes)
		}
	}
}

func checkSingleReplica(t *testing.T, r *release) {
	d := r.deployment(t)
	if deref(d.Spec.Replicas) != 1 || d.Name != "bridge" || d.Spec.Template.Spec.ServiceAccountName != "meshbridge-writer" {
		t.Errorf("Deployment %s, %d replicas, service account %s", d.Name, deref(d.Spec.Replicas), d.Spec.Template.Spec.ServiceAccountName)
	}
	cfg := r.config(t)
	if dig(cfg, "kubernetes", "leaderElection", "enabled") != false || digString(cfg, "output", "namespace") != otherNS {
		t.Errorf("config kubernetes %v, output %v", dig(cfg, "kubernetes"), dig(cfg, "output"))
	}
	roles := r.all("Role")
	if len(roles) != 1 || roles[0].GetName() != "bridge-writer" || roles[0].GetNamespace() != otherNS {
		t.Errorf("Roles %v, want bridge-writer in %s alone", roles, otherNS)
	}
	var found bool
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		found = found || m.Name == "services" && m.MountPath == "/etc/meshbridge-services"
	}
	if !found {
		t.Error("extraVolumeMounts not mounted")
	}
}

// TestTemplateConfigChecksum: with rollOnConfigChange, a change of config
// changes the pods' checksum/config annotation (the pods roll); other values
// leave it alone. Without it (the default) there is none: meshbridge reloads
// the mounted config.
func TestTemplateConfigChecksum(t *testing.T) {
	helm := harness.HelmBin(t)
	sum := func(args ...string) string {
		args = append([]string{"--set", "rollOnConfigChange=true"}, args...)
		return render(t, helm, chartDir, releaseNS, args...).deployment(t).Spec.Template.Annotations["checksum/config"]
	}
	base := sum()
	if base == "" {
		t.Fatal("no checksum/config annotation with rollOnConfigChange")
	}
	if got := render(t, helm, chartDir, releaseNS, "--set", "logLevel=debug").deployment(t).Spec.Template.Spec.Containers[0].Args; !slices.Contains(got, "--log-level") {
		t.Errorf("logLevel=debug: args %v lack --log-level", got)
	}
	if sum("--set", "config.sync.timeout=45s") == base {
		t.Error("config change kept checksum/config")
	}
	if sum("--set", "replicaCount=3") != base {
		t.Error("replicaCount changed checksum/config")
	}
}

// TestTemplateDashboards: with dashboards.enabled, a ConfigMap holds every
// dashboards/*.json of the chart under its file name, labelled for
// Grafana's sidecar; none without files, or when disabled.
func TestTemplateDashboards(t *testing.T) {
	helm := harness.HelmBin(t)
	dir := copyChart(t)
	if err := os.RemoveAll(filepath.Join(dir, "dashboards")); err != nil {
		t.Fatal(err)
	}
	count := func(args ...string) int {
		n := 0
		for _, cm := range render(t, helm, dir, releaseNS, args...).all("ConfigMap") {
			if strings.HasSuffix(cm.GetName(), "-dashboards") {
				n++
			}
		}
		return n
	}
	if n := count("--set", "dashboards.enabled=true"); n != 0 {
		t.Errorf("%d dashboards ConfigMaps without dashboards", n)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dashboards"), 0o755); err != nil {
		t.Fatal(err)
	}
	if n := count("--set", "dashboards.enabled=true"); n != 0 {
		t.Errorf("%d dashboards ConfigMaps with an empty dashboards/", n)
	}
	const board = `{"title": "meshbridge", "panels": []}`
	if err := os.WriteFile(filepath.Join(dir, "dashboards", "meshbridge.json"), []byte(board), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d dashboards ConfigMaps while disabled", n)
	}
	r := render(t, helm, dir, releaseNS, "--set", "dashboards.enabled=true")
	cm := typed[corev1.ConfigMap](t, r.one(t, "ConfigMap", "mb-meshbridge-dashboards"))
	if cm.Data["meshbridge.json"] != board || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboards ConfigMap: labels %v, data %v", cm.Labels, cm.Data)
	}
}

// copyChart copies the chart into a temp dir and returns its path.
func copyChart(t testing.TB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "meshbridge")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestTemplateRejects: values the pod could not run with fail the render,
// naming the value.
func TestTemplateRejects(t *testing.T) {
	helm := harness.HelmBin(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no registries", []string{"--set", "config.registries=null"}, "config.registries"},
		{"relative state.dir", []string{"--set", "config.state.dir=state"}, "config.state.dir"},
		{"relative nacos cacheDir", []string{"--set-json", `config.registries=[{"name":"n","type":"nacos","nacos":{"cacheDir":"cache"}}]`}, "nacos.cacheDir"},
		{"one port twice", []string{"--set", "ports.debug=15014"}, "must differ"},
		{"shared ReadWriteOnce claim", []string{"--set", "config.state.dir=/var/lib/meshbridge", "--set", "state.persistence.enabled=true"}, "ReadWriteMany"},
		{"a Consul token in values", []string{"--set-json", `config.registries=[{"name":"c","type":"consul","consul":{"token":"s3cr3t"}}]`},
			"config.registries[0].consul.token: a secret written in values lands in the ConfigMap; put it in a Secret, mount it with secretMounts and name the file with config.registries[0].consul.tokenFile"},
		{"a Nacos password in values", []string{"--set-json", `config.registries=[{"name":"c","type":"consul"},{"name":"n","type":"nacos","nacos":{"username":"u","password":"s3cr3t"}}]`},
			"config.registries[1].nacos.password: a secret written in values lands in the ConfigMap; put it in a Secret, mount it with secretMounts and name the file with config.registries[1].nacos.passwordFile"},
		{"a Nacos secret key in values", []string{"--set-json", `config.registries=[{"name":"n","type":"nacos","nacos":{"accessKey":"ak","secretKey":"s3cr3t"}}]`},
			"name the file with config.registries[0].nacos.secretKeyFile"},
		{"ZooKeeper credentials in values", []string{"--set-json", `config.registries=[{"name":"z","type":"zookeeper","zookeeper":{"auth":{"scheme":"digest","credentials":"u:s3cr3t"}}}]`},
			"name the file with config.registries[0].zookeeper.auth.credentialsFile"},
		{"tls.xds.secretName with config.xds.tls", []string{"--set", "tls.xds.secretName=x", "--set", "config.xds.tls.certFile=/c"}, "tls.xds.secretName and config.xds.tls are both set"},
		{"tls.mcp.secretName without MCP's port", []string{"--set", "tls.mcp.secretName=x"}, "tls.mcp.secretName: MCP has no port of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := runHelm(t, helm, nil, append([]string{"template", "mb", chartDir, "--namespace", releaseNS}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template %v: %v; want an error naming %q", tc.args, err, tc.want)
			}
			if _, out, _ := strings.Cut(err.Error(), "\n"); strings.Contains(out, "s3cr3t") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

// chartAppVersion is Chart.yaml's appVersion.
func chartAppVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %v", err)
	}
	return c.AppVersion
}

// registriesOf are the config's registries.
func registriesOf(cfg map[string]any) []map[string]any {
	list, _ := cfg["registries"].([]any)
	var out []map[string]any
	for _, r := range list {
		if m, ok := r.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// configFiles returns every file path the config names (keys ending in
// "File", and file.path), with the key's name.
func configFiles(cfg map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(k, c)
			}
		case []any:
			for _, c := range v {
				walk(key, c)
			}
		case string:
			if strings.HasSuffix(key, "File") && v != "" {
				out[v] = key
			}
		}
	}
	walk("", cfg)
	for _, reg := range registriesOf(cfg) {
		if p := digString(reg, "file", "path"); p != "" {
			out[p] = "file.path"
		}
	}
	return out
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// alertRules is the chart's Prometheus rule file, which
// testdata/alerts_test.yaml tests.
const alertRules = chartDir + "/alerts/meshbridge.yaml"

// TestAlertRules checks the chart's alerting rules with Prometheus's own
// promtool (the version tools/promtool pins): they load (check rules), and
// each alert fires on what it is for, from a counter's first event
// (testdata/alerts_test.yaml). With metrics.prometheusRule.enabled the chart
// renders them as a PrometheusRule, MeshbridgeNoLeader only with the
// Kubernetes output.
func TestAlertRules(t *testing.T) {
	promtool := harness.PromtoolBin(t)
	for _, args := range [][]string{{"check", "rules", alertRules}, {"test", "rules", "testdata/alerts_test.yaml"}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	helm := harness.HelmBin(t)
	alerts := func(groups []any) []string {
		var out []string
		for _, g := range groups {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				out = append(out, r.(map[string]any)["alert"].(string))
			}
		}
		return out
	}
	want := alerts(file.Groups)
	for _, tc := range []struct {
		name     string
		args     []string
		noLeader bool
	}{
		{"off by default", nil, false},
		{"with the Kubernetes output", []string{"--set", "metrics.prometheusRule.enabled=true"}, true},
		{"without it", []string{"--set", "metrics.prometheusRule.enabled=true", "--set", "config.kubernetes.enabled=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := render(t, helm, chartDir, releaseNS, tc.args...).all("PrometheusRule")
			if tc.args == nil {
				if len(rules) != 0 {
					t.Fatalf("%d PrometheusRules rendered by default", len(rules))
				}
				return
			}
			if len(rules) != 1 {
				t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
			}
			groups, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
			got := alerts(groups)
			exp := slices.DeleteFunc(slices.Clone(want), func(a string) bool { return a == "MeshbridgeNoLeader" && !tc.noLeader })
			if !slices.Equal(got, exp) {
				t.Errorf("PrometheusRule alerts %v, want %v", got, exp)
			}
		})
	}
}

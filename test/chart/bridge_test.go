package chart

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
)

// bridgeBin is the meshbridge binary built from this tree, once per test
// binary (buildBridge); TestMain removes its directory.
var bridgeBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// buildBridge builds ./cmd/bridge as make build does, and returns its path.
func buildBridge(t testing.TB) string {
	t.Helper()
	bridgeBin.once.Do(func() {
		if bridgeBin.dir, bridgeBin.err = os.MkdirTemp("", "meshbridge-chart-"); bridgeBin.err != nil {
			return
		}
		bridgeBin.path = filepath.Join(bridgeBin.dir, "meshbridge")
		out, err := exec.Command("go", "build", "-o", bridgeBin.path, "github.com/meshbridge/meshbridge/cmd/bridge").CombinedOutput()
		if err != nil {
			bridgeBin.err = fmt.Errorf("go build ./cmd/bridge: %w\n%s", err, out)
		}
	})
	if bridgeBin.err != nil {
		t.Fatal(bridgeBin.err)
	}
	return bridgeBin.path
}

// TestBridgeRuns starts the real meshbridge, built from this tree, with the
// container arguments and the config.yaml each value set renders, as the
// pod would: the configuration loads (unknown keys and invalid values are
// errors), every file it names exists where the pod mounts it, and with
// kubernetes.enabled it runs as the chart's ServiceAccount after the
// rendered objects are applied. What the test machine needs changed is
// changed, and nothing else: the listeners move to free 127.0.0.1 ports,
// registries to closed 127.0.0.1 ports (and sync.timeout, when the values
// leave it out, from 30 s to 3 s), the pod's paths under a temp dir
// (Secrets' files hold a token or a certificate of a test CA), and
// kubernetes.kubeconfig names the apiserver with the ServiceAccount
// impersonated (the pod's in-cluster config). The bridge answers /healthz,
// serves each listener, holds the Lease with leader election and writes the
// file registry's ServiceEntry (single-replica); its log holds no
// "forbidden"; SIGTERM stops it with exit code 0, releasing the Lease.
func TestBridgeRuns(t *testing.T) {
	helm := harness.HelmBin(t)
	k := harness.SharedKube(t)
	bin := buildBridge(t)
	ca := harness.NewCA(t, "chart-test")
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			rel, other := k.Namespace(t), k.Namespace(t)
			r := render(t, helm, chartDir, rel, vs.helmArgs(rel, other)...)
			applyAll(t, k, r)
			cfg := r.config(t)
			d := r.deployment(t)
			root := t.TempDir()

			// Distinct ports: the bridge binds them all when it starts.
			listeners := map[string]string{}
			ports := harness.FreePorts(t, 4)
			for i, key := range [][]string{{"xds", "address"}, {"http", "address"}, {"http", "debugAddress"}, {"mcp", "address"}} {
				if digString(cfg, key...) != "" {
					addr := "127.0.0.1:" + strconv.Itoa(ports[i])
					setPath(cfg, addr, key...)
					listeners[strings.Join(key, ".")] = addr
				}
			}
			podFiles(t, root, cfg, ca)
			if dig(cfg, "sync", "timeout") == nil {
				setPath(cfg, "3s", "sync", "timeout") // the registries here never answer
			}
			kubeOn, _ := dig(cfg, "kubernetes", "enabled").(bool)
			if kubeOn {
				acct := account{user: "system:serviceaccount:" + rel + ":" + d.Spec.Template.Spec.ServiceAccountName, namespace: rel}
				setPath(cfg, impersonatingKubeconfig(t, k, acct), "kubernetes", "kubeconfig")
				outNS := digString(cfg, "output", "namespace")
				acct.waitAllowed(t, k, outNS, "networking.istio.io", "serviceentries", "patch", "")
			}
			b, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfgPath := filepath.Join(root, "etc/meshbridge/config.yaml")
			writeFile(t, cfgPath, b)

			// The container's arguments, the config at its place under root.
			args := slices.Clone(d.Spec.Template.Spec.Containers[0].Args)
			i := slices.Index(args, "--config")
			if i < 0 || args[i+1] != "/etc/meshbridge/config.yaml" {
				t.Fatalf("container args %q: no --config /etc/meshbridge/config.yaml", args)
			}
			args[i+1] = cfgPath
			logs := &harness.LockedBuffer{}
			cmd := exec.Command(bin, args...)
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// exitErr is written before exited is closed.
			exited := make(chan struct{})
			var exitErr error
			go func() { exitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				select {
				case <-exited:
				default:
					_ = cmd.Process.Kill() // by its PID
					<-exited
				}
				if t.Failed() {
					t.Logf("meshbridge log:\n%s", logs.String())
				}
			})

			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			harness.Eventually(t, time.Minute, "meshbridge's /healthz", func() error {
				select {
				case <-exited:
					t.Fatalf("meshbridge exited: %v", exitErr)
				default:
				}
				return get(ctx, "http://"+listeners["http.address"]+"/healthz")
			})
			// xDS and MCP listen once the aggregate registry synced.
			for name, addr := range listeners {
				harness.Eventually(t, time.Minute, name+" "+addr+" listening", func() error {
					c, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err == nil {
						_ = c.Close()
					}
					return err
				})
			}
			le := leaseOf(cfg)
			if kubeOn && le.enabled {
				harness.Eventually(t, time.Minute, "meshbridge holds the Lease", func() error {
					l, err := adminKube(t, k).CoordinationV1().Leases(le.namespace).Get(ctx, le.name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
						return errors.New("not held")
					}
					return nil
				})
			}
			if ns := policyNamespaces(cfg); len(ns) > 0 {
				harness.EventuallyTrue(t, time.Minute, "meshbridge read the cluster's traffic policy", func() bool {
					return strings.Contains(logs.String(), "Read the cluster's DestinationRules and VirtualServices")
				})
			}
			if vs.name == "single-replica" {
				outNS := digString(cfg, "output", "namespace")
				harness.Eventually(t, time.Minute, "the file registry's ServiceEntry in "+outNS, func() error {
					l, err := adminIstio(t, k).NetworkingV1().ServiceEntries(outNS).List(ctx, metav1.ListOptions{LabelSelector: model.LabelRegistry + "=static"})
					if err != nil {
						return err
					}
					if len(l.Items) != 1 {
						return fmt.Errorf("%d ServiceEntries", len(l.Items))
					}
					return nil
				})
				if err := get(ctx, "http://"+listeners["http.address"]+"/readyz"); err != nil {
					t.Errorf("/readyz: %v", err)
				}
			}

			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				if exitErr != nil {
					t.Errorf("meshbridge after SIGTERM: %v", exitErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("meshbridge still running 30 s after SIGTERM")
			}
			if kubeOn && le.enabled {
				l, err := adminKube(t, k).CoordinationV1().Leases(le.namespace).Get(ctx, le.name, metav1.GetOptions{})
				if err != nil || l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
					t.Errorf("Lease after SIGTERM: %+v, %v; want released", l, err)
				}
			}
			if s := logs.String(); strings.Contains(strings.ToLower(s), "forbidden") {
				t.Errorf("meshbridge was refused something:\n%s", s)
			}
		})
	}
}

// podFiles moves every path of cfg that the pod holds (files the config
// names, file.path, state.dir, nacos.cacheDir) under root, writing a
// stand-in for each file: for a certFile and its keyFile a server
// certificate of ca and its key, for a CA file ca's certificate, for
// file.path a file registry with one service, else a token. Registries'
// addresses move to closed 127.0.0.1 ports.
func podFiles(t testing.TB, root string, cfg map[string]any, ca *harness.CA) {
	t.Helper()
	closed := func() string { return "127.0.0.1:" + strconv.Itoa(harness.FreePort(t)) }
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		if c, _ := m["certFile"].(string); c != "" {
			pair := ca.ServerCert(t, "127.0.0.1", "localhost")
			writeFile(t, filepath.Join(root, c), pair.CertPEM)
			m["certFile"] = filepath.Join(root, c)
			if k, _ := m["keyFile"].(string); k != "" {
				writeFile(t, filepath.Join(root, k), pair.KeyPEM)
				m["keyFile"] = filepath.Join(root, k)
			}
		}
		for key, v := range m {
			switch v := v.(type) {
			case map[string]any:
				walk(v)
			case []any:
				for _, e := range v {
					if em, ok := e.(map[string]any); ok {
						walk(em)
					}
				}
			case string:
				if v == "" || !strings.HasSuffix(key, "File") || key == "certFile" || key == "keyFile" {
					continue
				}
				content := []byte("chart-test-secret\n")
				if strings.HasSuffix(key, "CAFile") || key == "caFile" {
					content = ca.CertPEM
				}
				writeFile(t, filepath.Join(root, v), content)
				m[key] = filepath.Join(root, v)
			}
		}
	}
	walk(cfg)
	if dir := digString(cfg, "state", "dir"); dir != "" {
		setPath(cfg, filepath.Join(root, dir), "state", "dir")
	}
	for _, reg := range registriesOf(cfg) {
		if p := digString(reg, "file", "path"); p != "" {
			writeFile(t, filepath.Join(root, p), []byte(
				"services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances:\n  - {address: 10.0.0.1, port: 8080}\n"))
			setPath(reg, filepath.Join(root, p), "file", "path")
		}
		if dir := digString(reg, "nacos", "cacheDir"); dir != "" {
			setPath(reg, filepath.Join(root, dir), "nacos", "cacheDir")
		}
		if digString(reg, "consul", "address") != "" {
			setPath(reg, closed(), "consul", "address")
		}
		if dig(reg, "nacos", "addresses") != nil {
			setPath(reg, []any{closed()}, "nacos", "addresses")
		}
		if dig(reg, "zookeeper", "servers") != nil {
			setPath(reg, []any{closed()}, "zookeeper", "servers")
		}
	}
}

// impersonatingKubeconfig writes a kubeconfig for k's apiserver whose user
// is k's admin impersonating a (kubectl's --as and --as-group), and returns
// its path.
func impersonatingKubeconfig(t testing.TB, k *harness.Kube, a account) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(k.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = a.user
		ai.ImpersonateGroups = a.groups()
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// setPath sets the value at path in a YAML map, making maps on the way.
func setPath(m map[string]any, v any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// get fetches url and wants 200.
func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

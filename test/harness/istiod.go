package harness

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file runs istiod (pilot-discovery) as tests and benchmarks need it:
// the istio.io/istio version test/istio/go.mod pins, built by tools/build.sh
// istiod into ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/istiod-<key>/,
// key the first 12 hex digits of sha256("istio.io/istio <version>\n"). It
// runs unpatched, outside a cluster, in Kubernetes mode: its config and
// service registry are a kube-apiserver of the harness, reached with the
// admin's kubeconfig.

// istiodModule is the Go module that pins istio.io/istio, relative to the
// checkout.
const istiodModule = "test/istio"

// IstiodEnv is the environment every istiod of the harness (and of make
// bench-istiod) runs with, outside a cluster: no CA and no certificates of istiod's own (plaintext
// xDS on IstiodOptions' gRPC port only), no webhook configurations to patch,
// its namespace istio-system, no tracking of config distribution, and no
// admission throttle on new xDS connections (istiod's default admits 25 a
// second). Debounce, the push throttle and the xDS cache keep istiod's
// defaults.
var IstiodEnv = []string{
	"POD_NAMESPACE=" + IstiodNamespace,
	"POD_NAME=istiod-test",
	"REVISION=default",
	"ENABLE_CA_SERVER=false",
	"PILOT_CERT_PROVIDER=none",
	"INJECTION_WEBHOOK_CONFIG_NAME=",
	"VALIDATION_WEBHOOK_CONFIG_NAME=",
	"PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=false",
	"PILOT_MAX_REQUESTS_PER_SECOND=100000",
}

// IstiodNamespace is istiod's POD_NAMESPACE: where it keeps its leader
// election locks.
const IstiodNamespace = "istio-system"

// IstiodBinary returns the pilot-discovery tests run: $MESHBRIDGE_ISTIOD,
// else the one tools/build.sh istiod built for the istio.io/istio version
// of the checkout's test/istio/go.mod (the checkout is found from the
// working directory up). When there is none it skips the test, or fails it
// when MESHBRIDGE_REQUIRE_SERVERS=1.
func IstiodBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MESHBRIDGE_ISTIOD"); p != "" {
		if isExecutable(p) {
			return p
		}
		missing(t, "istiod", fmt.Sprintf("MESHBRIDGE_ISTIOD=%s is not an executable file", p))
	}
	root, err := checkoutRoot()
	if err != nil {
		missing(t, "istiod", fmt.Sprintf("no istiod: set MESHBRIDGE_ISTIOD (%v)", err))
	}
	version, err := IstioVersion(filepath.Join(root, istiodModule, "go.mod"))
	if err != nil {
		missing(t, "istiod", fmt.Sprintf("no istiod: set MESHBRIDGE_ISTIOD (%v)", err))
	}
	sum := sha256.Sum256([]byte("istio.io/istio " + version + "\n"))
	p := filepath.Join(cacheDir(), "istiod-"+hex.EncodeToString(sum[:])[:12], "pilot-discovery")
	if !isExecutable(p) {
		missing(t, "istiod", fmt.Sprintf("no istiod built for istio.io/istio %s (no %s): set MESHBRIDGE_ISTIOD, "+
			"or build it with tools/build.sh istiod", version, p))
	}
	return p
}

// IstioVersion returns the istio.io/istio version a go.mod requires.
func IstioVersion(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == "istio.io/istio" {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s requires no istio.io/istio", gomod)
}

// IstiodOptions configure StartIstiod.
type IstiodOptions struct {
	// MeshConfig is the MeshConfig YAML (--meshConfig); "" is empty: every
	// default, config read from the Kubernetes API.
	MeshConfig string
	// Env is added to IstiodEnv (later entries win), e.g.
	// "PILOT_ENABLE_AMBIENT=true".
	Env []string
}

// Istiod is a running istiod started by this package.
type Istiod struct {
	// GRPCAddr is the plaintext xDS address (--grpcAddr), 127.0.0.1.
	GRPCAddr string
	// HTTPAddr serves /ready and /debug (--httpAddr), 127.0.0.1.
	HTTPAddr string
	srv      *server
}

// StartIstiod starts istiod on free 127.0.0.1 ports, reading k (its config
// and service registry) as k's admin, and returns once its /ready answers
// 200: its informers synced. It creates namespace IstiodNamespace if need
// be. The test's cleanup stops istiod by PID and shows the end of its log
// when the test failed. A missing binary skips or fails the test like
// IstiodBinary.
func StartIstiod(t testing.TB, k *Kube, opts IstiodOptions) *Istiod {
	t.Helper()
	i := startIstiod(t, k, t.TempDir(), opts)
	i.srv.stopAtEnd(t)
	return i
}

// sharedIstiod is the test binary's istiod for SharedIstiod.
var sharedIstiod struct {
	mu  sync.Mutex
	i   *Istiod
	dir string
}

// SharedIstiod returns the test binary's one istiod, reading SharedKube's
// control plane, started by the first call with opts (later calls' opts are
// ignored) and stopped when KubeMain returns. Tests sharing it isolate
// themselves by namespace and hosts of their own; a failed test shows the
// end of istiod's log. It fails like SharedKube and StartIstiod.
func SharedIstiod(t testing.TB, opts IstiodOptions) *Istiod {
	t.Helper()
	k := SharedKube(t)
	sharedIstiod.mu.Lock()
	defer sharedIstiod.mu.Unlock()
	if sharedIstiod.i == nil {
		dir, err := os.MkdirTemp("", "meshbridge-istiod-")
		if err != nil {
			t.Fatal(err)
		}
		sharedIstiod.dir = dir
		sharedIstiod.i = startIstiod(t, k, dir, opts)
	}
	i := sharedIstiod.i
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("istiod logs, last lines:\n%s", i.srv.tails())
		}
	})
	return i
}

// stopSharedIstiod stops SharedIstiod's istiod, if one was started, and
// removes its directory.
func stopSharedIstiod() {
	sharedIstiod.mu.Lock()
	defer sharedIstiod.mu.Unlock()
	if sharedIstiod.i != nil {
		sharedIstiod.i.srv.stop()
		_ = os.RemoveAll(sharedIstiod.dir)
		sharedIstiod.i = nil
	}
}

func startIstiod(t testing.TB, k *Kube, dir string, opts IstiodOptions) *Istiod {
	t.Helper()
	bin := IstiodBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), kubeStartTimeout)
	defer cancel()
	_, err := k.client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: IstiodNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", IstiodNamespace, err)
	}
	files := map[string][]byte{
		"kubeconfig":        k.kubeconfig,
		"mesh.yaml":         []byte(opts.MeshConfig + "\n"),
		"meshNetworks.yaml": []byte("networks: {}\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ports := FreePorts(t, 3)
	i := &Istiod{
		GRPCAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
	}
	i.srv = &server{
		name: "istiod",
		bin:  bin,
		args: []string{"discovery",
			"--kubeconfig", filepath.Join(dir, "kubeconfig"),
			"--meshConfig", filepath.Join(dir, "mesh.yaml"),
			"--networksConfig", filepath.Join(dir, "meshNetworks.yaml"),
			"--domain", "cluster.local",
			"--grpcAddr", i.GRPCAddr,
			"--httpAddr", i.HTTPAddr,
			"--monitoringAddr", fmt.Sprintf("127.0.0.1:%d", ports[2]),
			"--httpsAddr", "",
			"--secureGRPCAddr", "",
		},
		env:       append(append(os.Environ(), IstiodEnv...), opts.Env...),
		log:       filepath.Join(dir, "istiod.log"),
		tailLines: 40,
	}
	client := &http.Client{Timeout: readyInterval * 10}
	i.srv.start(t, i.HTTPAddr, func() error {
		resp, err := client.Get("http://" + i.HTTPAddr + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
	return i
}

// Pid is istiod's process ID, or 0 once it stopped.
func (i *Istiod) Pid() int { return i.srv.pid() }

package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// This file runs a private Kubernetes control plane (etcd and kube-apiserver,
// no controllers) through controller-runtime's envtest, which starts the two
// binaries, provisions the serving certificates and an admin client
// certificate, and installs CRDs. What the harness adds: binaries only from
// the directory KubeAssets names (envtest never downloads: its
// DownloadBinaryAssets stays false, and every binary path is set explicitly,
// so its own lookup through TEST_ASSET_* and /usr/local/kubebuilder/bin never
// runs),
// 127.0.0.1 and free ports fixed before start, a kube-apiserver restart that
// keeps its address and credentials, CRDs waited for until Established, logs
// in files, and the control plane shared by a test binary.
//
// Importing envtest also registers controller-runtime's "-kubeconfig" flag on
// flag.CommandLine (sigs.k8s.io/controller-runtime/pkg/client/config): a
// test package that imports the harness must not define a flag of that name.

const (
	// kubeStartTimeout bounds each of etcd's and kube-apiserver's start (until
	// healthy), and the wait for CRDs and for /readyz. Generous: under -race on
	// a loaded CI machine a cold kube-apiserver takes several seconds.
	kubeStartTimeout = 60 * time.Second
	// kubeStopTimeout is how long a SIGTERMed process may take before envtest
	// sends SIGKILL.
	kubeStopTimeout = 20 * time.Second
	// crdCreateDelayWindow: kube-apiserver delays every create of a custom
	// resource by 2 s while its CRD became Established less than 2 s ago
	// (k8s.io/apiextensions-apiserver pkg/apiserver/customresource_handler.go,
	// for HA servers that have not yet seen the CRD). A control plane is
	// returned only once that window has passed, so the tests' first creates
	// take milliseconds, not 2 s.
	crdCreateDelayWindow = 2 * time.Second
)

// KubeAssets returns the absolute path of the directory holding the
// kube-apiserver and etcd binaries tests run (the layout of envtest's
// KUBEBUILDER_ASSETS): $MESHBRIDGE_KUBE_ASSETS (which make exports: the
// directory tools/build.sh kube prints), else $KUBEBUILDER_ASSETS. When
// neither is set, or the first set one lacks either executable, it skips the
// test, or fails it when MESHBRIDGE_REQUIRE_SERVERS=1. Unlike ConsulBinary it
// does not look in the build cache, so a plain go test (and make test-unit)
// runs no control plane unless asked to.
func KubeAssets(t testing.TB) string {
	t.Helper()
	dir, why := findKubeAssets()
	if why != "" {
		missing(t, "kube", why)
	}
	return dir
}

// findKubeAssets is KubeAssets without the test: the directory, or why there
// is none.
func findKubeAssets() (dir, why string) {
	for _, env := range []string{"MESHBRIDGE_KUBE_ASSETS", "KUBEBUILDER_ASSETS"} {
		d := os.Getenv(env)
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Sprintf("%s=%s: %v", env, d, err)
		}
		if err := checkKubeAssets(abs); err != nil {
			return "", fmt.Sprintf("%s=%s: %v", env, d, err)
		}
		return abs, ""
	}
	return "", "no kube-apiserver and etcd: set MESHBRIDGE_KUBE_ASSETS (or KUBEBUILDER_ASSETS) to the directory " +
		"tools/build.sh kube prints (kube=DIR; built once into " + cacheDir() + ")"
}

// checkKubeAssets reports whether dir holds executable kube-apiserver and etcd.
func checkKubeAssets(dir string) error {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if !isExecutable(filepath.Join(dir, bin)) {
			return fmt.Errorf("no executable %s in the directory", bin)
		}
	}
	return nil
}

// Kube is a running etcd and kube-apiserver started by this package, both on
// 127.0.0.1. There are no controllers: nothing garbage-collects, deletes
// namespaces' contents or creates service accounts. The apiserver authorizes
// with RBAC (envtest's --authorization-mode=RBAC): Config's admin may do
// anything, and a user impersonated through a copy of Config
// (rest.Config.Impersonate, e.g. system:serviceaccount:<ns>:<name>) only what
// Roles and ClusterRoles grant it.
type Kube struct {
	// Config is the admin's configuration for the apiserver (user "admin" in
	// group system:masters, client-certificate authentication, QPS 1000 and
	// Burst 2000). It stays valid across StopAPIServer and StartAPIServer.
	// Callers must not modify it: use rest.CopyConfig.
	Config *rest.Config

	env        *envtest.Environment
	client     kubernetes.Interface
	dir        string // certificates, etcd data and logs
	kubeconfig []byte
	apiLog     string
	etcdLog    string
	logFiles   []*os.File
	shared     bool // SharedKube's: StopAPIServer refuses

	mu         sync.Mutex // serializes StopAPIServer, StartAPIServer and stop
	apiRunning bool
	stopped    bool
}

// StartKube starts a private etcd and kube-apiserver on free 127.0.0.1 ports,
// installs the CRDs in crdFiles (YAML files of CustomResourceDefinitions,
// paths relative to the test's package directory) and returns once the
// apiserver serves, the CRDs are Established and the apiserver's 2-second
// delay for creates under a new CRD has passed. The test's cleanup stops both
// processes by PID. A missing binary skips or fails the test like
// KubeAssets; a failed start fails it, with the end of both logs.
func StartKube(t testing.TB, crdFiles ...string) *Kube {
	t.Helper()
	assets := KubeAssets(t)
	dir := t.TempDir() // removed after the cleanup below has stopped the processes
	k, err := startKube(assets, dir, crdFiles)
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", k.logTails(40))
		}
		if err := k.stop(); err != nil {
			t.Errorf("stop kube-apiserver and etcd: %v", err)
		}
	})
	return k
}

// shared is the test binary's control plane for SharedKube.
var shared struct {
	mu       sync.Mutex
	main     bool     // KubeMain is running the tests
	crdFiles []string // as given to KubeMain
	k        *Kube
	err      error // the first start's error, reported to every caller
}

// KubeMain runs the tests of a package whose tests use SharedKube (or
// SharedIstiod), then stops the shared istiod and control plane if a test
// started them, and returns m.Run's exit code (os.Exit is the caller's
// job). crdFiles are the CRDs SharedKube installs, relative to the package
// directory (or absolute). Use it from TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(harness.KubeMain(m, "../kube/testdata/crds/istio-networking.yaml"))
//	}
//
// The processes outlive a test binary that dies without returning from
// m.Run (a panic, or go test's -timeout), as do those of every harness server.
func KubeMain(m *testing.M, crdFiles ...string) int {
	shared.mu.Lock()
	shared.main = true
	shared.crdFiles = append([]string(nil), crdFiles...)
	shared.mu.Unlock()

	code := m.Run()

	stopSharedIstiod() // before the apiserver it reads
	shared.mu.Lock()
	k := shared.k
	shared.k, shared.main = nil, false
	shared.mu.Unlock()
	if k != nil {
		if err := k.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "harness: stop the shared kube-apiserver and etcd: %v\n", err)
		}
		if err := os.RemoveAll(k.dir); err != nil {
			fmt.Fprintf(os.Stderr, "harness: remove %s: %v\n", k.dir, err)
		}
	}
	return code
}

// SharedKube returns the test binary's one control plane, started by the
// first call with the CRDs given to KubeMain (installed once) and stopped when
// KubeMain returns. It saves the few seconds a StartKube costs; tests sharing
// it isolate themselves with Namespace. It fails the test when the package's
// TestMain does not run the tests through KubeMain (nothing would stop the
// processes), skips or fails like KubeAssets when the binaries are missing,
// and fails every caller when the one start failed.
//
// A test that stops the apiserver (StopAPIServer fails the test on the shared
// control plane) or depends on cluster-scoped state must use its own
// StartKube instead.
func SharedKube(t testing.TB) *Kube {
	t.Helper()
	assets := KubeAssets(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatalf("harness.SharedKube: the package's TestMain must run the tests with harness.KubeMain, " +
			"which stops the shared control plane")
	}
	if shared.k == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "meshbridge-kube-")
		if err == nil {
			shared.k, err = startKube(assets, dir, shared.crdFiles)
			if err != nil {
				_ = os.RemoveAll(dir)
			} else {
				shared.k.shared = true
			}
		}
		shared.err = err
	}
	if shared.err != nil {
		t.Fatalf("start the shared kube-apiserver and etcd: %v", shared.err)
	}
	return shared.k
}

// quietControllerRuntime discards controller-runtime's log (envtest's own
// messages). Without a logger, the first log call made 30 s after the test
// binary started prints a warning and a stack trace. A test that wants
// controller-runtime's logs calls its log.SetLogger after starting a control
// plane.
var quietControllerRuntime = sync.OnceFunc(func() { ctrllog.SetLogger(logr.Discard()) })

// startKube starts etcd and kube-apiserver with the binaries in assets,
// keeping their state, certificates and logs in dir, and installs crdFiles.
// On error nothing is left running.
func startKube(assets, dir string, crdFiles []string) (k *Kube, err error) {
	quietControllerRuntime()
	crds, err := readCRDs(crdFiles)
	if err != nil {
		return nil, err
	}

	k = &Kube{
		dir:     dir,
		apiLog:  filepath.Join(dir, "kube-apiserver.log"),
		etcdLog: filepath.Join(dir, "etcd.log"),
	}
	apiOut, err := k.openLog(k.apiLog)
	if err != nil {
		return nil, err
	}
	etcdOut, err := k.openLog(k.etcdLog)
	if err != nil {
		k.closeLogs()
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		k.closeLogs()
		return nil, err
	}

	etcd := &envtest.Etcd{
		Path: filepath.Join(assets, "etcd"),
		// An explicit data dir: envtest removes only the directories it made.
		DataDir: filepath.Join(dir, "etcd"),
		URL:     &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))},
		Out:     etcdOut,
		Err:     etcdOut,
	}
	// envtest picks the peer port on "localhost"; bind it to 127.0.0.1 too.
	// envtest already passes --unsafe-no-fsync.
	etcd.Configure().Set("listen-peer-urls", "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])))

	api := &envtest.APIServer{
		Path: filepath.Join(assets, "kube-apiserver"),
		// An explicit cert dir survives APIServer.Stop (envtest deletes and
		// forgets a directory it made itself), so a restart reuses the serving
		// certificate, its CA and the client CA: see StartAPIServer.
		CertDir: filepath.Join(dir, "apiserver"),
		// A fixed address: configurePorts keeps a set SecureServing address
		// and port, so a restart binds the same 127.0.0.1:port.
		SecureServing: envtest.SecureServing{
			ListenAddr: envtest.ListenAddr{Address: "127.0.0.1", Port: strconv.Itoa(ports[2])},
		},
		Out: apiOut,
		Err: apiOut,
	}
	// envtest passes --bind-address=127.0.0.1 (from SecureServing) and
	// --secure-port; these are the harness's additions.
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		// No reconciliation of the "kubernetes" Service's endpoints: there
		// are no nodes to reach the apiserver from, and 127.0.0.1 is not a
		// valid endpoint address.
		Set("endpoint-reconciler-type", "none").
		// Open watches (the Kubernetes writer's drift-repair informers)
		// would hold a SIGTERMed apiserver for about a minute while they
		// drain; tests that stop it want it gone in seconds.
		Set("shutdown-watch-termination-grace-period", "2s")
	for _, d := range []string{etcd.DataDir, api.CertDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			k.closeLogs()
			return nil, err
		}
	}

	useExisting := false
	k.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      etcd,
			// Unused (no kubectl tests), and set so no lookup happens.
			KubectlPath: filepath.Join(assets, "kubectl"),
		},
		// Ignore USE_EXISTING_CLUSTER: tests must never touch a real cluster.
		UseExistingCluster:       &useExisting,
		CRDs:                     crds,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: kubeStartTimeout},
		ControlPlaneStartTimeout: kubeStartTimeout,
		ControlPlaneStopTimeout:  kubeStopTimeout,
	}
	fail := func(err error) (*Kube, error) {
		_ = k.stop()
		return nil, fmt.Errorf("%w\n%s", err, k.logTails(40))
	}
	// envtest may have started the processes even when it returns an error
	// (a CRD that failed to install): fail stops them either way.
	cfg, err := k.env.Start()
	k.apiRunning = true
	if err != nil {
		return fail(err)
	}
	k.Config = cfg
	k.kubeconfig = k.env.KubeConfig
	if k.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubeStartTimeout)
	defer cancel()
	if err := waitEstablished(ctx, cfg, k.env.CRDs); err != nil {
		return fail(err)
	}
	return k, nil
}

// readCRDs reads the CustomResourceDefinitions in files (YAML or JSON, as
// envtest reads them), failing on a file that is missing or holds none, so a
// wrong path fails before any process starts.
func readCRDs(files []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		opts := envtest.CRDInstallOptions{Paths: []string{f}, ErrorIfPathMissing: true}
		if err := envtest.ReadCRDFiles(&opts); err != nil {
			return nil, fmt.Errorf("CRD file %s: %w", f, err)
		}
		if len(opts.CRDs) == 0 {
			return nil, fmt.Errorf("CRD file %s: no CustomResourceDefinition (envtest reads only .yaml, .yml and .json files)", f)
		}
		crds = append(crds, opts.CRDs...)
	}
	return crds, nil
}

// waitEstablished waits until every CRD has condition Established, then until
// the apiserver's delay for creates under a new CRD (crdCreateDelayWindow)
// is over for all of them. envtest itself only waits for the CRDs' resources
// to appear in discovery.
func waitEstablished(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	if len(crds) == 0 {
		return nil
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var latest time.Time
	for _, crd := range crds {
		for {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil {
				if c := establishedCondition(got); c != nil {
					// The server compares its clock with this time as stored,
					// truncated to the second, so the deadline below errs late.
					if c.LastTransitionTime.After(latest) {
						latest = c.LastTransitionTime.Time
					}
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not Established: %w (last error: %v)", crd.Name, ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	wait := time.Until(latest.Add(crdCreateDelayWindow + 50*time.Millisecond))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// establishedCondition returns the CRD's Established condition when it is
// True, else nil.
func establishedCondition(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// Namespace creates a namespace with a fresh name, "t-<test name>-<5 random
// characters>" (the test name lower-cased, runs of other characters than
// [a-z0-9] made one "-", shortened so the whole is a DNS-1123 label of at
// most 63 characters), and returns the name. Nothing deletes it: envtest runs
// no namespace controller, so a deleted namespace would stay Terminating with
// its objects anyway.
func (k *Kube) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		name := namespaceName(t.Name())
		_, err := k.client.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err == nil {
			return name
		}
		if !apierrors.IsAlreadyExists(err) || attempt == 3 {
			t.Fatalf("create namespace %s: %v", name, err)
		}
	}
}

// namespaceName returns "t-<sanitized test name>-<5 random [a-z0-9]>", a
// DNS-1123 label (RFC 1123: [a-z0-9-], alphanumeric at both ends, at most 63
// characters), as Kubernetes requires of a namespace's name.
func namespaceName(testName string) string {
	const maxLen, suffixLen = 63, 5
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	s := b.String()
	if room := maxLen - len("t-") - len("-") - suffixLen; len(s) > room {
		s = strings.TrimRight(s[:room], "-")
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	suffix := make([]byte, suffixLen)
	for i := range suffix {
		suffix[i] = alphabet[rand.IntN(len(alphabet))]
	}
	if s == "" {
		return "t-" + string(suffix)
	}
	return "t-" + s + "-" + string(suffix)
}

// Kubeconfig writes a kubeconfig file for the admin user of this apiserver
// (server, CA and client certificate inline; current context "envtest") into
// t.TempDir() and returns its path. It stays valid across StopAPIServer and
// StartAPIServer.
func (k *Kube) Kubeconfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, k.kubeconfig, 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return p
}

// StopAPIServer stops the kube-apiserver process by its PID (SIGTERM, then
// SIGKILL after a timeout); etcd keeps running with all objects. Clients get
// connection errors until StartAPIServer. It is a no-op when the apiserver
// is stopped, and fails the test on SharedKube's control plane, which other
// tests use in parallel.
func (k *Kube) StopAPIServer(t testing.TB) {
	t.Helper()
	if k.shared {
		t.Fatalf("StopAPIServer on harness.SharedKube's control plane would break the tests sharing it; use harness.StartKube")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.apiRunning {
		return
	}
	k.apiRunning = false
	if err := k.env.ControlPlane.APIServer.Stop(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
}

// StartAPIServer starts the kube-apiserver stopped by StopAPIServer again, on
// the same 127.0.0.1 port with the same serving certificate and client CA,
// so Config, clients made from it and Kubeconfig files keep working, and
// returns once its /readyz answers ok. It is a no-op when the apiserver runs.
//
// envtest's APIServer.Start, run again, re-derives its flags from the fields
// this harness fixed at the first start (address, port, cert dir) and finds
// the certificates already in the cert dir, so it reuses them.
func (k *Kube) StartAPIServer(t testing.TB) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		t.Fatalf("StartAPIServer: the control plane was stopped")
	}
	if k.apiRunning {
		return
	}
	if err := k.env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restart kube-apiserver: %v\n%s", err, tail(k.apiLog, 40))
	}
	k.apiRunning = true
	ctx, cancel := context.WithTimeout(context.Background(), kubeStartTimeout)
	defer cancel()
	if err := k.waitReady(ctx); err != nil {
		t.Fatalf("restarted kube-apiserver not ready: %v\n%s", err, tail(k.apiLog, 40))
	}
}

// waitReady polls the apiserver's /readyz until it answers 200 "ok".
func (k *Kube) waitReady(ctx context.Context) error {
	var last error
	for {
		body, err := k.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop stops kube-apiserver, then etcd, by PID and closes the log files;
// later calls do nothing.
func (k *Kube) stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return nil
	}
	k.stopped, k.apiRunning = true, false
	var err error
	if k.env != nil {
		err = k.env.Stop() // envtest skips a process that already exited
	}
	k.closeLogs()
	return err
}

func (k *Kube) openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	k.logFiles = append(k.logFiles, f)
	return f, nil
}

func (k *Kube) closeLogs() {
	for _, f := range k.logFiles {
		_ = f.Close()
	}
	k.logFiles = nil
}

// logTails returns the last n lines of both logs.
func (k *Kube) logTails(n int) string {
	return fmt.Sprintf("kube-apiserver log (%s), last lines:\n%s\netcd log (%s), last lines:\n%s",
		k.apiLog, tail(k.apiLog, n), k.etcdLog, tail(k.etcdLog, n))
}

package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runtimeCheckTimeout bounds the probe that loads a client runtime's gRPC
// library.
const runtimeCheckTimeout = 30 * time.Second

// MissingRuntime skips the test because a client runtime is not installed,
// or fails it when MESHBRIDGE_REQUIRE_SERVERS=1: the rule of missing server
// binaries, for what `make deps` installs (Debian's python3-grpcio, the npm
// modules of test/clients/node).
func MissingRuntime(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("MESHBRIDGE_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s; MESHBRIDGE_REQUIRE_SERVERS=1 forbids skipping (run make deps)", why)
	}
	t.Skipf("%s; skipping (make deps installs it)", why)
}

// NodeXDSClient returns the node binary that runs the grpc-js client in dir
// (test/clients/node), once `npm ci` installed its modules there and
// @grpc/grpc-js-xds loads. Otherwise it calls MissingRuntime.
func NodeXDSClient(t testing.TB, dir string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		MissingRuntime(t, "no node on PATH for the grpc-js client")
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js-xds", "package.json")); err != nil {
		MissingRuntime(t, fmt.Sprintf("@grpc/grpc-js-xds is not installed in %s (npm ci there)", dir))
		return ""
	}
	probe(t, dir, node, "-e", "require('@grpc/grpc-js-xds').register()")
	return node
}

// PythonGRPC returns a Python interpreter that imports grpc and protobuf:
// $MESHBRIDGE_PYTHON, else /usr/bin/python3, the interpreter Debian's
// python3-grpcio installs into (a python3 earlier on PATH may lack it).
// Otherwise it calls MissingRuntime.
func PythonGRPC(t testing.TB) string {
	t.Helper()
	python := os.Getenv("MESHBRIDGE_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if !isExecutable(python) {
		MissingRuntime(t, fmt.Sprintf("no Python interpreter at %s for the gRPC C-core client", python))
		return ""
	}
	probe(t, "", python, "-c", "import grpc; from google.protobuf import wrappers_pb2")
	return python
}

// probe runs a runtime's one-line import check; a failure is a missing
// runtime, with the command's output as the reason.
func probe(t testing.TB, dir, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runtimeCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		MissingRuntime(t, fmt.Sprintf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out))))
	}
}

// GRPCJavaClient returns java and the classpath of the grpc-java proxyless
// client (tools/grpc-java, built by tools/build.sh grpc-java:
// $MESHBRIDGE_GRPC_JAVA_DIR), whose main class is GRPCJavaMain. A missing
// build or java is a missing server (JavaPeerClasspath).
func GRPCJavaClient(t testing.TB) (java, classpath string) {
	t.Helper()
	classpath = JavaPeerClasspath(t, "grpc-java", "MESHBRIDGE_GRPC_JAVA_DIR")
	return javaPath(t, "grpc-java"), classpath
}

// GRPCJavaMain is the grpc-java client's main class.
const GRPCJavaMain = "io.meshbridge.grpcjava.Client"

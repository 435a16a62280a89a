package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/meshbridge/meshbridge/test/harness"
)

// bins holds the binaries built once for every test of this package.
var bins struct {
	meshbridge string
	client     string
}

func TestMain(m *testing.M) {
	// The Nacos server and Dubbo Java run only in the binary's own network
	// namespace (test/harness/netns.go): every test here runs in it.
	if code, reexeced := harness.ReexecInNetNS(); reexeced {
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "meshbridge-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.meshbridge = filepath.Join(dir, "meshbridge")
	bins.client = filepath.Join(dir, "echo-client")
	for out, pkg := range map[string]string{
		bins.meshbridge: "github.com/meshbridge/meshbridge/cmd/bridge",
		bins.client:     "github.com/meshbridge/meshbridge/examples/grpc/client",
	} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n", pkg, err)
			os.Exit(1)
		}
	}
	// KubeMain runs the tests and stops the shared Kubernetes control plane
	// if a test started one (harness.SharedKube starts it lazily, so tests
	// that use only Consul never pay for it).
	code := harness.KubeMain(m, istioCRDs)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

package consul

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

const waitTimeout = registrytest.DefaultTimeout

// runRegistry runs a registry on cfg until the test ends.
func runRegistry(t *testing.T, cfg Config) (*Registry, *registrytest.Recorder) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "consul-test"
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return reg, registrytest.Run(t, reg, 15*time.Second)
}

// waitFor is harness.EventuallyTrue with the package's timeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	harness.EventuallyTrue(t, waitTimeout, what, cond)
}

// counted is meshbridge_registry_errors_total{registry,reason}.
func counted(registry, reason string) float64 {
	return testutil.ToFloat64(errorsTotal.WithLabelValues(registry, reason))
}

func registerPassing(t *testing.T, c *harness.Consul, name, id, addr string, port int) {
	t.Helper()
	c.RegisterInstance(t, name, id, addr, port, nil, nil, "passing")
}

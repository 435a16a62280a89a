package registrytest

import (
	"context"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// Run runs reg into a new Recorder until the test ends. The test's cleanup
// cancels Run and fails t unless Run then returns nil within stopTimeout.
func Run(t testing.TB, reg registries.Registry, stopTimeout time.Duration) *Recorder {
	t.Helper()
	rec := NewRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx, rec) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("Run did not return within %s after cancel", stopTimeout)
		}
	})
	return rec
}

// WaitClosed waits until ch is closed (a fault-injecting proxy's signal,
// say), failing t, naming what, after DefaultTimeout.
func WaitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(DefaultTimeout):
		t.Fatalf("timed out after %s waiting for %s", DefaultTimeout, what)
	}
}

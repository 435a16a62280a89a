package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignals: SIGHUP reloads the configuration (logged; the process keeps
// serving; TestConfigReload covers what a reload changes), and SIGTERM stops
// the process cleanly with exit code 0.
func TestSignals(t *testing.T) {
	dir := t.TempDir()
	svcs := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(svcs, []byte("services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}]\n  instances: [{address: 10.0.0.1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, fmt.Sprintf("registries:\n- {name: static, type: file, file: {path: %q}}\n", svcs))

	if err := b.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the SIGHUP's reload is logged", func() error {
		data, _ := os.ReadFile(b.proc.log)
		if !strings.Contains(string(data), "Received SIGHUP: reloading the configuration") ||
			!strings.Contains(string(data), "Configuration reloaded") {
			return fmt.Errorf("not in the log yet")
		}
		return nil
	})
	select {
	case <-b.proc.done:
		t.Fatalf("meshbridge exited on SIGHUP: %v", b.proc.cmd.ProcessState)
	default:
	}
	if body := b.get("/readyz"); !strings.HasPrefix(body, "ok") {
		t.Fatalf("/readyz after SIGHUP: %q", body)
	}

	b.proc.stop()
	if code := b.proc.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	data, _ := os.ReadFile(b.proc.log)
	if !strings.Contains(string(data), "Stopping meshbridge") {
		t.Errorf("no stop line in the log:\n%s", lastLines(string(data), 20))
	}
}

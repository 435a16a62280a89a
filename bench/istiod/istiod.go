package istiod

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshbridge/meshbridge/test/harness"
)

// istiodProc is a running istiod.
type istiodProc struct {
	cmd      *exec.Cmd
	pid      int
	grpcAddr string // plaintext xDS
	httpAddr string // /ready, /debug
	args     []string
	started  time.Time // before the process was started
	log      string
	exited   chan struct{}
	waitErr  error
}

// startIstiod starts pilot-discovery bin with meshbridge's MCP at mcpAddr as
// its only config source, kubeconfig for its own bookkeeping, and files
// (mesh config, log) in dir; ports are the three free 127.0.0.1 ports for
// gRPC, HTTP and monitoring; quiet is its push debounce's quiet period
// (istiodDebounceEnv).
func startIstiod(bin, kubeconfig, mcpAddr, dir string, ports []int, quiet time.Duration) (*istiodProc, error) {
	mesh := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(mesh, []byte("configSources:\n- address: xds://"+mcpAddr+"\n"), 0o644); err != nil {
		return nil, err
	}
	networks := filepath.Join(dir, "meshNetworks.yaml")
	if err := os.WriteFile(networks, []byte("networks: {}\n"), 0o644); err != nil {
		return nil, err
	}
	p := &istiodProc{
		grpcAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		log:      filepath.Join(dir, "istiod.log"),
		exited:   make(chan struct{}),
	}
	p.args = []string{"discovery",
		"--kubeconfig", kubeconfig,
		"--meshConfig", mesh,
		"--networksConfig", networks,
		"--domain", "cluster.local",
		"--grpcAddr", p.grpcAddr,
		"--httpAddr", p.httpAddr,
		"--monitoringAddr", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--httpsAddr", "",
		"--secureGRPCAddr", "",
	}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Env = append(append(os.Environ(), harness.IstiodEnv...), istiodDebounceEnv(quiet)...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// istiodDebounceEnv is istiod's push debounce, read once at its start:
// quiet period PILOT_DEBOUNCE_AFTER (its default 100ms), EDS debounced
// (PILOT_ENABLE_EDS_DEBOUNCE, its default true) and PILOT_DEBOUNCE_MAX at
// its default 10s (as meshbridge's debounce.max) or the quiet period when
// longer: the same three knobs as meshbridge's debounce.after, debounce.eds
// and debounce.max.
func istiodDebounceEnv(quiet time.Duration) []string {
	return []string{
		"PILOT_DEBOUNCE_AFTER=" + quiet.String(),
		"PILOT_DEBOUNCE_MAX=" + max(debounceMax, quiet).String(),
		"PILOT_ENABLE_EDS_DEBOUNCE=true",
	}
}

// waitReady waits until istiod's /ready answers 200 (its caches and the MCP
// source synced), the process exits, ctx ends or timeout passes.
func (p *istiodProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get("http://" + p.httpAddr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("istiod not ready after %s (last: %v)\n%s", timeout, statusOr(resp, err), p.logTail(30))
		}
		select {
		case <-p.exited:
			return fmt.Errorf("istiod exited: %v\n%s", p.waitErr, p.logTail(30))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func statusOr(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// logTail returns the last n lines of istiod's log.
func (p *istiodProc) logTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "istiod log (" + p.log + "):\n" + strings.Join(lines, "\n")
}

// stop ends istiod by PID: SIGTERM, SIGKILL after 15 s.
func (p *istiodProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		<-p.exited
	}
}

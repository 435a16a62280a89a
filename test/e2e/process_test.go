package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
	"github.com/meshbridge/meshbridge/test/harness"
)

const stopTimeout = 10 * time.Second

// process is a child process stopped by PID when the test ends.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startProcess(t testing.TB, name string, cmd *exec.Cmd, stdout bool) (*process, *bufio.Scanner) {
	t.Helper()
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: filepath.Join(t.TempDir(), name+".log")}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	var sc *bufio.Scanner
	var childOut *os.File
	if stdout {
		// An os.Pipe, not cmd.StdoutPipe: Wait closes the latter, possibly
		// before the scanner read the last lines. This read end sees EOF
		// once the child exits, and Wait leaves it alone.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		cmd.Stdout, childOut = w, w
		sc = bufio.NewScanner(r)
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	if childOut != nil {
		childOut.Close() // the child holds its own copy
	}
	go func() {
		_ = cmd.Wait()
		// How it ended, last in its log: a crash leaves no other trace.
		fmt.Fprintf(logf, "--- %s ended: %v\n", name, cmd.ProcessState)
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			data, _ := os.ReadFile(p.log)
			t.Logf("%s log:\n%s", name, lastLines(string(data), 40))
		}
	})
	return p, sc
}

// stop sends SIGTERM, then SIGKILL after stopTimeout, and waits for exit.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// bridge is a meshbridge process on fixed ports, so a restart keeps its
// xDS address.
type bridge struct {
	t         testing.TB
	cfgPath   string
	xdsAddr   string
	httpAddr  string
	debugAddr string
	proc      *process
}

// startBridge writes a config with the given registries block (and any
// further top-level keys) and starts meshbridge, returning once /readyz
// answers 200.
func startBridge(t testing.TB, registriesYAML string) *bridge {
	t.Helper()
	return startBridgeSync(t, registriesYAML, 20*time.Second)
}

// startBridgeSync is startBridge with sync.timeout.
func startBridgeSync(t testing.TB, registriesYAML string, syncTimeout time.Duration) *bridge {
	t.Helper()
	ports := harness.FreePorts(t, 3)
	b := &bridge{
		t:         t,
		cfgPath:   filepath.Join(t.TempDir(), "meshbridge.yaml"),
		xdsAddr:   "127.0.0.1:" + strconv.Itoa(ports[0]),
		httpAddr:  "127.0.0.1:" + strconv.Itoa(ports[1]),
		debugAddr: "127.0.0.1:" + strconv.Itoa(ports[2]),
	}
	cfg := fmt.Sprintf("%s\nxds: {address: %q}\nhttp: {address: %q, debugAddress: %q}\nsync: {timeout: %s}\n",
		registriesYAML, b.xdsAddr, b.httpAddr, b.debugAddr, syncTimeout)
	if err := os.WriteFile(b.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	return b
}

func (b *bridge) start() {
	b.t.Helper()
	b.proc, _ = startProcess(b.t, "meshbridge", exec.Command(bins.meshbridge, "run", "--config", b.cfgPath, "--log-level", "debug"), false)
	eventually(b.t, 30*time.Second, "meshbridge ready", func() error {
		resp, err := http.Get("http://" + b.httpAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
}

func (b *bridge) restart() {
	b.t.Helper()
	b.proc.stop()
	b.start()
}

// get returns an HTTP endpoint's body, from http.debugAddress for /debug/
// paths and http.address for the rest.
func (b *bridge) get(path string) string {
	b.t.Helper()
	addr := b.httpAddr
	if strings.HasPrefix(path, "/debug/") {
		addr = b.debugAddr
	}
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text())
		sb.WriteByte('\n')
	}
	return sb.String()
}

// startBackend serves the echo service as name on a free 127.0.0.1 port.
func startBackend(t testing.TB, name string) int { return harness.StartEcho(t, name) }

// callResult is one line of the client's output.
type callResult struct {
	at      time.Time
	backend string // "" on error
	err     string
}

// client is the example proxyless gRPC client in its own process.
type client struct {
	t       testing.TB
	proc    *process
	mu      sync.Mutex
	results []callResult
	notify  chan struct{}
}

// startClient starts the client on target with a bootstrap pointing at
// xdsAddr, written before the process starts.
func startClient(t testing.TB, xdsAddr, target string, args ...string) *client {
	t.Helper()
	boot, err := echo.Bootstrap(xdsAddr, "e2e-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(path, boot, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.client, append([]string{"-target", target, "-interval", "50ms", "-timeout", "1s"}, args...)...)
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+path)
	proc, sc := startProcess(t, "client", cmd, true)
	c := &client{t: t, proc: proc, notify: make(chan struct{}, 1)}
	go func() {
		for sc.Scan() {
			c.add(sc.Text())
		}
	}()
	return c
}

func (c *client) add(line string) {
	f := strings.SplitN(line, " ", 3)
	if len(f) < 3 {
		return
	}
	at, _ := time.Parse(time.RFC3339Nano, f[0])
	r := callResult{at: at}
	if f[1] == "ok" {
		r.backend = f[2]
	} else {
		r.err = f[2]
	}
	c.mu.Lock()
	c.results = append(c.results, r)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// mark returns a position in the results; later waits look only past it.
func (c *client) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results)
}

// since returns the results after mark.
func (c *client) since(mark int) []callResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]callResult(nil), c.results[mark:]...)
}

// waitUntil waits, bounded, until cond holds for the results after mark.
func (c *client) waitUntil(mark int, timeout time.Duration, what string, cond func([]callResult) bool) {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		if cond(c.since(mark)) {
			return
		}
		select {
		case <-c.notify:
		case <-deadline:
			rs := c.since(mark)
			if len(rs) > 10 {
				rs = rs[len(rs)-10:]
			}
			c.t.Fatalf("timed out after %s waiting for %s; last results: %+v", timeout, what, rs)
		}
	}
}

// waitReached waits until a call after mark reached backend.
func (c *client) waitReached(mark int, backend string, timeout time.Duration) {
	c.t.Helper()
	c.waitUntil(mark, timeout, "a call to "+backend, func(rs []callResult) bool {
		for _, r := range rs {
			if r.backend == backend {
				return true
			}
		}
		return false
	})
}

// waitSettled waits until the last n calls after mark all succeeded and
// reached exactly the backends in want (each at least once).
func (c *client) waitSettled(mark int, timeout time.Duration, want ...string) {
	c.t.Helper()
	const n = 20
	c.waitUntil(mark, timeout, fmt.Sprintf("%d calls in a row reaching only %v", n, want), func(rs []callResult) bool {
		if len(rs) < n {
			return false
		}
		seen := map[string]bool{}
		for _, r := range rs[len(rs)-n:] {
			if r.backend == "" {
				return false
			}
			seen[r.backend] = true
		}
		if len(seen) != len(want) {
			return false
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	})
}

// stop stops the client process.
func (c *client) stop() { c.proc.stop() }

// firstSuccess waits for the first successful call and returns the time the
// client printed for it.
func (c *client) firstSuccess(t testing.TB, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	c.waitUntil(0, timeout, "a first successful call", func(rs []callResult) bool {
		for _, r := range rs {
			if r.backend != "" {
				at = r.at
				return true
			}
		}
		return false
	})
	return at
}

// errorsSince returns the failed calls after mark.
func (c *client) errorsSince(mark int) []callResult {
	var out []callResult
	for _, r := range c.since(mark) {
		if r.backend == "" {
			out = append(out, r)
		}
	}
	return out
}

// eventually is harness.Eventually.
func eventually(t testing.TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	harness.Eventually(t, timeout, what, fn)
}

func consulRegistry(c *harness.Consul) string {
	return fmt.Sprintf("registries:\n- name: consul-e2e\n  type: consul\n  consul: {address: %q}\n", c.Address())
}

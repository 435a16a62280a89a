package istiod

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// bridgeEnv, set in a re-executed test binary's environment, makes it run
// meshbridge (RunBridge) instead of the benchmarks: services, instances,
// endpoint mode, "mcp" or "xds" and debounce.after, comma-separated.
const bridgeEnv = "MESHBRIDGE_BENCH_ISTIOD_BRIDGE"

// bridgeConfig is what a meshbridge process serves.
type bridgeConfig struct {
	services, instances int
	endpoints           translate.EndpointMode
	mcp                 bool          // also MCP for istiod on the xDS port
	debounce            time.Duration // debounce.after at the start (xDS and MCP pushes)
}

func (c bridgeConfig) env() string {
	kind := "xds"
	if c.mcp {
		kind = "mcp"
	}
	return fmt.Sprintf("%d,%d,%s,%s,%s", c.services, c.instances, c.endpoints, kind, c.debounce)
}

func parseBridgeConfig(s string) (bridgeConfig, error) {
	f := strings.Split(s, ",")
	if len(f) != 5 {
		return bridgeConfig{}, fmt.Errorf("%s=%q: want services,instances,endpoints,mcp|xds,debounce", bridgeEnv, s)
	}
	var c bridgeConfig
	var err1, err2, err3 error
	c.services, err1 = strconv.Atoi(f[0])
	c.instances, err2 = strconv.Atoi(f[1])
	c.debounce, err3 = time.ParseDuration(f[4])
	if err1 != nil || err2 != nil || err3 != nil {
		return c, fmt.Errorf("%s=%q: bad number or duration", bridgeEnv, s)
	}
	c.endpoints, c.mcp = translate.EndpointMode(f[2]), f[3] == "mcp"
	return c, nil
}

// pipelineOptions is cmd/bridge's configuration for the generator registry:
// a Consul-type registry "dc1" (hosts <service>.service.consul),
// debounce.after c.debounce with EDS debounced (at 100ms, istiod's defaults:
// PILOT_DEBOUNCE_AFTER=100ms, PILOT_ENABLE_EDS_DEBOUNCE=true).
func pipelineOptions(c bridgeConfig) pipeline.Options {
	return pipeline.Options{
		Registry: "dc1", Type: "consul", HostTemplate: consul.HostTemplate, Endpoints: c.endpoints,
		DebounceAfter: c.debounce, EDSDebounce: true, MCP: c.mcp,
	}
}

// debounceMax and debounceEDSMax are debounce.max and debounce.edsMax as
// package pipeline starts the xDS server with; the debounce command keeps
// them and changes debounce.after only.
const (
	debounceMax    = 10 * time.Second
	debounceEDSMax = 500 * time.Millisecond
)

// liveDebounce is debounce.* with after as debounce.after, as a reload of
// the configuration applies it (DiscoveryServer.SetDebounce): to xDS and
// MCP pushes alike.
func liveDebounce(after time.Duration) xds.Debounce {
	return xds.Debounce{After: after, Max: debounceMax, EDSMax: debounceEDSMax, EDS: true}
}

// RunBridge is the meshbridge process: it serves the generated mesh and
// answers commands on stdin, one line each, on stdout:
//
//	(at start)         serving ADDR
//	change I GEN    →  event UNIXNANO   (generation GEN of service I; the event time)
//	mcpbytes        →  mcpbytes N       (bytes of the MCP responses sent so far)
//	debounce D      →  debounce NS      (debounce.after set to duration D, live, as a reload does)
//
// It ends when stdin closes.
func RunBridge(spec string) error {
	c, err := parseBridgeConfig(spec)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	for _, col := range xds.Collectors() {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	gen := pipeline.NewGenerator(c.services, c.instances)
	p, err := pipeline.Start(gen, pipelineOptions(c))
	if err != nil {
		return err
	}
	defer p.Stop()
	if err := p.WaitServing(30 * time.Minute); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "serving %s\n", p.XDS.Addr())
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 3 && f[0] == "change":
			i, _ := strconv.Atoi(f[1])
			g, _ := strconv.Atoi(f[2])
			fmt.Fprintf(out, "event %d\n", gen.Change(i, g).UnixNano())
		case len(f) == 1 && f[0] == "mcpbytes":
			n, err := mcpBytes(reg)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "mcpbytes %d\n", n)
		case len(f) == 2 && f[0] == "debounce":
			d, err := time.ParseDuration(f[1])
			if err != nil {
				return err
			}
			p.XDS.SetDebounce(liveDebounce(d))
			fmt.Fprintf(out, "debounce %d\n", d)
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
		out.Flush()
	}
	return in.Err()
}

// mcpBytes sums meshbridge_xds_push_bytes_total over the type URLs that are
// not Envoy's: the MCP responses (Istio config types) to istiod.
func mcpBytes(reg *prometheus.Registry) (int64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "meshbridge_xds_push_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type_url" && !strings.HasPrefix(l.GetValue(), "type.googleapis.com/envoy.") {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(sum), nil
}

// bridgeProc is a running meshbridge process (RunBridge).
type bridgeProc struct {
	cmd     *exec.Cmd
	pid     int
	addr    string
	started time.Time // before the process was started
	serving time.Time // when it reported serving
	in      io.WriteCloser
	out     *bufio.Scanner
	lines   chan string
	exited  chan struct{} // closed once the process was waited for
	waitErr error         // Wait's error; read after exited
	gen     int           // the last generation change emitted
}

// startBridge starts a meshbridge process for c and waits until it serves
// (or ctx ends). Its stderr goes to logPath.
func startBridge(ctx context.Context, c bridgeConfig, logPath string) (*bridgeProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), bridgeEnv+"="+c.env())
	cmd.Stderr = logf
	// The process dies with the benchmark, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b := &bridgeProc{cmd: cmd, in: in, out: bufio.NewScanner(outp), lines: make(chan string), exited: make(chan struct{})}
	b.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.pid = cmd.Process.Pid
	go func() {
		for b.out.Scan() {
			b.lines <- b.out.Text()
		}
		close(b.lines)
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	line, err := b.next(ctx, 30*time.Minute)
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("meshbridge process: %w (log %s)", err, logPath)
	}
	addr, ok := strings.CutPrefix(line, "serving ")
	if !ok {
		b.stop()
		return nil, fmt.Errorf("meshbridge process said %q, want serving ADDR", line)
	}
	b.addr, b.serving = addr, time.Now()
	return b, nil
}

// next returns the process's next line of output.
func (b *bridgeProc) next(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-b.lines:
		if !ok {
			<-b.exited
			return "", fmt.Errorf("exited: %v", b.waitErr)
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", fmt.Errorf("no answer within %s", timeout)
	}
}

// ask sends a command and returns the answer's value after prefix.
func (b *bridgeProc) ask(ctx context.Context, cmd, prefix string) (int64, error) {
	if _, err := fmt.Fprintln(b.in, cmd); err != nil {
		return 0, err
	}
	line, err := b.next(ctx, time.Minute)
	if err != nil {
		return 0, err
	}
	v, ok := strings.CutPrefix(line, prefix+" ")
	if !ok {
		return 0, fmt.Errorf("%q answered %q", cmd, line)
	}
	return strconv.ParseInt(v, 10, 64)
}

// change emits the next generation of service i (1, 2, … over the
// process's life, so that each change moves an instance, whatever churn
// rounds came before) and returns the event time.
func (b *bridgeProc) change(ctx context.Context, i int) (time.Time, error) {
	b.gen++
	ns, err := b.ask(ctx, fmt.Sprintf("change %d %d", i, b.gen), "event")
	return time.Unix(0, ns), err
}

// mcpBytes returns the bytes of MCP responses the process sent so far.
func (b *bridgeProc) mcpBytes(ctx context.Context) (int64, error) {
	return b.ask(ctx, "mcpbytes", "mcpbytes")
}

// setDebounce sets the process's debounce.after (xDS and MCP pushes) to d,
// live.
func (b *bridgeProc) setDebounce(ctx context.Context, d time.Duration) error {
	ns, err := b.ask(ctx, "debounce "+d.String(), "debounce")
	if err == nil && time.Duration(ns) != d {
		err = fmt.Errorf("debounce %s answered %s", d, time.Duration(ns))
	}
	return err
}

// stop closes stdin (RunBridge returns) and waits for the process; after
// 10 s it is killed by PID.
func (b *bridgeProc) stop() {
	_ = b.in.Close()
	go func() {
		for range b.lines { // drain, so the reader reaches Wait
		}
	}()
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(b.pid, syscall.SIGKILL)
		<-b.exited
	}
}

// Command demo is `make demo`: it starts a real Consul agent on 127.0.0.1,
// two instances of the example gRPC service, meshbridge, and a proxyless gRPC
// client calling xds:///echo.service.consul:<port> through meshbridge; then
// registers, adds and deregisters instances and shows the client following.
// Every process it starts is stopped by PID when it exits.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
)

type demo struct {
	bins struct{ consul, meshbridge, server, client string }
	dir  string
	mu   sync.Mutex
	cmds []*exec.Cmd
}

func main() {
	var d demo
	flag.StringVar(&d.bins.consul, "consul", "", "consul binary")
	flag.StringVar(&d.bins.meshbridge, "meshbridge", "bin/meshbridge", "meshbridge binary")
	flag.StringVar(&d.bins.server, "server", "bin/echo-server", "example gRPC server binary")
	flag.StringVar(&d.bins.client, "client", "bin/echo-client", "example gRPC client binary")
	flag.Parse()
	dir, err := os.MkdirTemp("", "meshbridge-demo-")
	if err != nil {
		fail(err)
	}
	d.dir = dir
	err = d.run()
	d.stopAll()
	_ = os.RemoveAll(dir)
	if err != nil {
		fail(err)
	}
	say("Demo finished; every process was stopped.")
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	os.Exit(1)
}

func say(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func (d *demo) run() error {
	if d.bins.consul == "" {
		return fmt.Errorf("--consul is required (make demo builds it with tools/build.sh consul)")
	}
	consul, consulAddr, err := d.startConsul()
	if err != nil {
		return err
	}
	b1, p1, err := d.startBackend("backend-1")
	if err != nil {
		return err
	}
	b2, p2, err := d.startBackend("backend-2")
	if err != nil {
		return err
	}
	say("Registering echo instance backend-1 (%s) in Consul, passing", b1)
	if err := register(consul, "backend-1", p1); err != nil {
		return err
	}
	xdsAddr, err := d.startBridge(consulAddr)
	if err != nil {
		return err
	}
	target := fmt.Sprintf("xds:///echo.service.consul:%d", p1)
	lines, err := d.startClient(xdsAddr, target)
	if err != nil {
		return err
	}
	show := func(what string) error {
		seen := observe(lines, 3*time.Second)
		say("%s: %s", what, seen)
		return nil
	}
	if err := waitFor(lines, "backend-1", 30*time.Second); err != nil {
		return err
	}
	_ = show("Client calls with one instance")

	say("Registering a second instance, backend-2 (%s, another port: mapped through its WorkloadEntry)", b2)
	if err := register(consul, "backend-2", p2); err != nil {
		return err
	}
	if err := waitFor(lines, "backend-2", 15*time.Second); err != nil {
		return err
	}
	_ = show("Client calls with two instances")
	if err := d.printObjects(); err != nil {
		return err
	}

	say("Deregistering backend-1 from Consul")
	if err := consul.Agent().ServiceDeregister("backend-1"); err != nil {
		return err
	}
	if err := waitOnly(lines, "backend-2", 15*time.Second); err != nil {
		return err
	}
	_ = show("Client calls after backend-1 left")
	return nil
}

// printObjects shows what meshbridge produced, with `meshbridge translate`
// over the same configuration.
func (d *demo) printObjects() error {
	out, err := exec.Command(d.bins.meshbridge, "translate", "--config", filepath.Join(d.dir, "meshbridge.yaml")).Output()
	if err != nil {
		return fmt.Errorf("meshbridge translate: %w", err)
	}
	say("The objects meshbridge serves (meshbridge translate --config ...):\n%s", indent(string(out)))
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (d *demo) start(name string, cmd *exec.Cmd) error {
	logf, err := os.Create(filepath.Join(d.dir, name+".log"))
	if err != nil {
		return err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	d.mu.Lock()
	d.cmds = append(d.cmds, cmd)
	d.mu.Unlock()
	return nil
}

// stopAll stops every started process by PID, newest first: SIGTERM, then
// SIGKILL after five seconds.
func (d *demo) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.cmds) - 1; i >= 0; i-- {
		cmd := d.cmds[i]
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

func (d *demo) startConsul() (*api.Client, string, error) {
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		ports[i] = p
	}
	say("Starting Consul (dev agent) on 127.0.0.1:%d", ports[0])
	cmd := exec.Command(d.bins.consul, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-advertise", "127.0.0.1", "-http-port", strconv.Itoa(ports[0]), "-serf-lan-port", strconv.Itoa(ports[1]),
		"-serf-wan-port", strconv.Itoa(ports[2]), "-server-port", strconv.Itoa(ports[3]),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-node", "demo-node")
	if err := d.start("consul", cmd); err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	client, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if leader, err := client.Status().Leader(); err == nil && leader != "" {
			return client, addr, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, "", fmt.Errorf("consul did not elect a leader within 30s (log: %s)", filepath.Join(d.dir, "consul.log"))
}

func (d *demo) startBackend(name string) (string, int, error) {
	port, err := freePort()
	if err != nil {
		return "", 0, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return addr, port, d.start(name, exec.Command(d.bins.server, "-addr", addr, "-name", name))
}

func register(c *api.Client, id string, port int) error {
	return c.Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: id, Name: "echo", Address: "127.0.0.1", Port: port,
		Meta: map[string]string{"protocol": "grpc", "zone": "zone-a"},
		Tags: []string{"version=v1"},
		Check: &api.AgentServiceCheck{
			Name: "grpc health", GRPC: fmt.Sprintf("127.0.0.1:%d", port), Interval: "1s", Status: api.HealthPassing,
		},
	})
}

func (d *demo) startBridge(consulAddr string) (string, error) {
	xdsPort, err := freePort()
	if err != nil {
		return "", err
	}
	httpPort, err := freePort()
	if err != nil {
		return "", err
	}
	debugPort, err := freePort()
	if err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`registries:
- name: consul-demo
  type: consul
  consul:
    address: %s
xds: {address: 127.0.0.1:%d}
http: {address: 127.0.0.1:%d, debugAddress: 127.0.0.1:%d}
`, consulAddr, xdsPort, httpPort, debugPort)
	path := filepath.Join(d.dir, "meshbridge.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	say("Starting meshbridge (xDS 127.0.0.1:%d, HTTP 127.0.0.1:%d) with:\n%s", xdsPort, httpPort, indent(cfg))
	if err := d.start("meshbridge", exec.Command(d.bins.meshbridge, "run", "--config", path)); err != nil {
		return "", err
	}
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				say("meshbridge is ready (%s)", ready)
				return fmt.Sprintf("127.0.0.1:%d", xdsPort), nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("meshbridge not ready within 30s (log: %s)", filepath.Join(d.dir, "meshbridge.log"))
}

func (d *demo) startClient(xdsAddr, target string) (<-chan string, error) {
	boot, err := echo.Bootstrap(xdsAddr, "meshbridge-demo-client")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(d.dir, "bootstrap.json")
	if err := os.WriteFile(path, boot, 0o644); err != nil {
		return nil, err
	}
	say("Starting the proxyless gRPC client: %s (GRPC_XDS_BOOTSTRAP=%s)", target, path)
	cmd := exec.Command(d.bins.client, "-target", target, "-interval", "100ms")
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.start("client", cmd); err != nil {
		return nil, err
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines, nil
}

// observe counts the client's results over d: "backend-1 ×12, backend-2 ×13".
func observe(lines <-chan string, d time.Duration) string {
	counts := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return "client exited"
			}
			counts[result(l)]++
		case <-ctx.Done():
			keys := make([]string, 0, len(counts))
			for k := range counts {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
			}
			return strings.Join(parts, ", ")
		}
	}
}

// result is "backend-N" for a successful call, "error" otherwise.
func result(line string) string {
	f := strings.Fields(line)
	if len(f) >= 3 && f[1] == "ok" {
		return f[2]
	}
	return "error"
}

func waitFor(lines <-chan string, backend string, d time.Duration) error {
	deadline := time.After(d)
	for {
		select {
		case l := <-lines:
			if result(l) == backend {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("the client did not reach %s within %s", backend, d)
		}
	}
}

// waitOnly waits until ten calls in a row reached backend.
func waitOnly(lines <-chan string, backend string, d time.Duration) error {
	deadline := time.After(d)
	run := 0
	for run < 10 {
		select {
		case l := <-lines:
			if result(l) == backend {
				run++
			} else {
				run = 0
			}
		case <-deadline:
			return fmt.Errorf("the client did not settle on %s within %s", backend, d)
		}
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// Command demo is `make demo`, `make demo-consul`, `make demo-nacos`,
// `make demo-eureka` and `make demo-dubbo`: it starts a service registry on
// 127.0.0.1 (meshbridge's file registry, whose YAML file it edits live; or a
// real Consul agent, the Nacos server, the Eureka server, or ZooKeeper), two
// instances of a gRPC service, meshbridge, and a proxyless gRPC client
// calling xds:///<host>:<port> through meshbridge (echo.demo.local,
// echo.service.consul, echo.default-group.public.nacos, echo.eureka, or
// org.apache.dubbo.demo.greetservice.dubbo); then registers, adds (on
// another port), takes out of service (Eureka) and deregisters instances
// and shows the client following.
// With the file registry, Consul, Nacos and Eureka the instances are the
// example echo server, registered by the demo;
// with ZooKeeper they are dubbo-go providers (Triple), which register
// themselves and whose GreetService/Greet the client calls. Every process it
// starts is stopped by PID when it exits.
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
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
	"github.com/meshbridge/meshbridge/test/harness"
)

// registry is what differs between the registries the demo runs: their
// server, how an application registers its instances there, and how
// meshbridge is pointed at it.
type registry interface {
	// start starts the registry's server through d.start and returns once it
	// serves.
	start(d *demo) error
	// name is the registry as the demo's messages name it ("Consul").
	name() string
	// registered says where and how register registers an instance
	// ("in Consul, passing").
	registered() string
	// register registers instance id of the echo service at 127.0.0.1:port.
	register(id string, port int) error
	// deregister removes instance id, as its application does when it stops.
	deregister(id string) error
	// host is the hostname meshbridge gives the echo service.
	host() string
	// config is meshbridge's registries entry for the server: one YAML list
	// item at column 0, ending in a newline.
	config() string
}

// statusOverrider is a registry whose server takes an instance out of
// service while it stays registered (Eureka's OUT_OF_SERVICE): the demo
// shows the client leaving it before it is deregistered.
type statusOverrider interface {
	// outOfService takes instance id out of service.
	outOfService(id string) error
	// outOfServiceHow says how, for the demo's message.
	outOfServiceHow() string
}

// selfServing is a registry whose instances are applications that serve
// and register themselves (dubbo-go providers): register starts one on
// 127.0.0.1:port, so the demo starts no echo server for it.
type selfServing interface {
	// clientArgs are the client's arguments that call the instances'
	// method (-method ...).
	clientArgs() []string
	// appHost is the host meshbridge gives instance id's application, or ""
	// when there is none.
	appHost(id string) string
}

type demo struct {
	bins struct{ meshbridge, server, client string }
	dir  string
	mu   sync.Mutex
	// stops stop what the demo started; stopAll runs them newest first.
	stops []func()
	// stopped is set by stopAll: onStop then runs its function at once.
	stopped bool
}

func main() {
	var d demo
	var kind, consulBin, nacosDir, eurekaDir, zkClasspath, dubboBin string
	flag.StringVar(&kind, "registry", "file", "registry to run: file (a YAML file the demo edits), consul, nacos (the Nacos server), eureka (the Eureka server), or zookeeper (with dubbo-go providers)")
	flag.StringVar(&consulBin, "consul", "", "consul binary (--registry consul)")
	flag.StringVar(&nacosDir, "nacos", "", "the Nacos server's directory from tools/build.sh nacos, with its JVM classpath in the file classpath (--registry nacos)")
	flag.StringVar(&eurekaDir, "eureka", "", "the Eureka server's directory from tools/build.sh eureka, with its JVM classpath in the file classpath (--registry eureka)")
	flag.StringVar(&zkClasspath, "zookeeper-classpath", "", "Java classpath of the ZooKeeper server, colon-separated (--registry zookeeper)")
	flag.StringVar(&dubboBin, "dubbo-provider", "", "dubbo-go test provider binary, test/dubbo/provider (--registry zookeeper)")
	flag.StringVar(&d.bins.meshbridge, "meshbridge", "bin/meshbridge", "meshbridge binary")
	flag.StringVar(&d.bins.server, "server", "bin/echo-server", "example gRPC server binary")
	flag.StringVar(&d.bins.client, "client", "bin/echo-client", "example gRPC client binary")
	flag.Parse()
	if kind == "nacos" {
		// The Nacos server's JRaft port binds every interface: the demo
		// runs again in a network namespace of its own where the machine
		// lets it.
		if code, reexeced := harness.ReexecInNetNS(); reexeced {
			os.Exit(code)
		}
	}
	var reg registry
	switch kind {
	case "file":
		reg = &fileRegistry{}
	case "consul":
		if consulBin == "" {
			fail(fmt.Errorf("--consul is required (make demo-consul builds it with tools/build.sh consul)"))
		}
		reg = &consulRegistry{bin: consulBin}
	case "nacos":
		if nacosDir == "" {
			fail(fmt.Errorf("--nacos is required (make demo-nacos builds it with tools/build.sh nacos)"))
		}
		cp, err := os.ReadFile(filepath.Join(nacosDir, "classpath"))
		if err != nil {
			fail(fmt.Errorf("--nacos %s: %w (tools/build.sh nacos writes it)", nacosDir, err))
		}
		reg = &nacosRegistry{classpath: strings.TrimSpace(string(cp))}
	case "eureka":
		if eurekaDir == "" {
			fail(fmt.Errorf("--eureka is required (make demo-eureka builds it with tools/build.sh eureka)"))
		}
		cp, err := os.ReadFile(filepath.Join(eurekaDir, "classpath"))
		if err != nil {
			fail(fmt.Errorf("--eureka %s: %w (tools/build.sh eureka writes it)", eurekaDir, err))
		}
		reg = &eurekaRegistry{classpath: strings.TrimSpace(string(cp))}
	case "zookeeper":
		if zkClasspath == "" || dubboBin == "" {
			fail(fmt.Errorf("--zookeeper-classpath and --dubbo-provider are required (make demo-dubbo finds them with tools/build.sh zookeeper dubbo)"))
		}
		reg = &zookeeperRegistry{classpath: zkClasspath, provider: dubboBin}
	default:
		fail(fmt.Errorf("--registry %q is not one of file, consul, nacos, eureka, zookeeper", kind))
	}
	dir, err := os.MkdirTemp("", "meshbridge-demo-")
	if err != nil {
		fail(err)
	}
	d.dir = dir
	// Interrupted (Ctrl-C reaches the demo, not the processes it started,
	// each in a process group of its own), it stops them before it exits.
	var interrupted atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		interrupted.Store(true)
		say("%s: stopping every process the demo started", s)
		d.stopAll()
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}()
	err = d.run(reg)
	d.stopAll()
	if interrupted.Load() {
		select {} // the signal's goroutine exits
	}
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

func (d *demo) run(reg registry) error {
	if err := reg.start(d); err != nil {
		return err
	}
	// backend-1 gets the lower port: meshbridge keeps the ServiceEntry port
	// it first saw (backend-1's), and `meshbridge translate`, starting
	// afresh, takes the lowest; so both show backend-2's port mapped through
	// its WorkloadEntry.
	p1, err := freePort()
	if err != nil {
		return err
	}
	p2 := p1
	for p2 == p1 {
		if p2, err = freePort(); err != nil {
			return err
		}
	}
	p1, p2 = min(p1, p2), max(p1, p2)
	self, selfServed := reg.(selfServing)
	var clientArgs []string
	b1, b2 := fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2)
	if selfServed {
		clientArgs = self.clientArgs()
		say("Starting backend-1 (%s) %s", b1, reg.registered())
	} else {
		if err := d.startBackend("backend-1", b1); err != nil {
			return err
		}
		if err := d.startBackend("backend-2", b2); err != nil {
			return err
		}
		say("Registering echo instance backend-1 (%s) %s", b1, reg.registered())
	}
	if err := reg.register("backend-1", p1); err != nil {
		return err
	}
	xdsAddr, err := d.startBridge(reg)
	if err != nil {
		return err
	}
	target := fmt.Sprintf("xds:///%s:%d", reg.host(), p1)
	lines, err := d.startClient(xdsAddr, target, clientArgs...)
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
	if err := reg.register("backend-2", p2); err != nil {
		return err
	}
	if err := waitFor(lines, "backend-2", 15*time.Second); err != nil {
		return err
	}
	_ = show("Client calls with two instances")
	if err := d.printObjects(); err != nil {
		return err
	}
	if selfServed {
		if host := self.appHost("backend-1"); host != "" {
			say("backend-1's application has a host of its own, %s (its ServiceEntry above)", host)
			if err := d.callOnce(fmt.Sprintf("xds:///%s:%d", host, p1), clientArgs); err != nil {
				return err
			}
		}
	}

	if o, ok := reg.(statusOverrider); ok {
		say("Taking backend-1 out of service: %s", o.outOfServiceHow())
		if err := o.outOfService("backend-1"); err != nil {
			return err
		}
		if err := waitOnly(lines, "backend-2", 15*time.Second); err != nil {
			return err
		}
		_ = show("Client calls with backend-1 OUT_OF_SERVICE")
	}

	say("Deregistering backend-1 from %s", reg.name())
	if err := reg.deregister("backend-1"); err != nil {
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

// stopGrace is how long stopAll lets a process exit after SIGTERM before it
// sends SIGKILL.
const stopGrace = 5 * time.Second

// start starts cmd in a process group of its own, with its stderr (and its
// stdout, unless the caller set one) in <dir>/<name>.log. stopAll stops it by
// its PID: SIGTERM, then SIGKILL after stopGrace, or as soon as settled
// (when not nil) reports that the rest of the process's shutdown may be cut
// short.
func (d *demo) start(name string, cmd *exec.Cmd, settled func() bool) error {
	_, err := d.startStoppable(name, cmd, settled)
	return err
}

// startStoppable is start that also returns the stop of the process, for a
// process the demo stops before the end: it stops the process as stopAll
// does, with SIGKILL after grace instead of stopGrace, once (a later call,
// stopAll's included, waits for the first).
func (d *demo) startStoppable(name string, cmd *exec.Cmd, settled func() bool) (func(grace time.Duration), error) {
	logf, err := os.Create(filepath.Join(d.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var once sync.Once
	stopOnce := func(grace time.Duration) { once.Do(func() { stop(cmd, settled, grace) }) }
	d.onStop(func() { stopOnce(stopGrace) })
	return stopOnce, nil
}

// onStop adds f to what stopAll runs; after stopAll it runs f at once.
func (d *demo) onStop(f func()) {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		f()
		return
	}
	d.stops = append(d.stops, f)
	d.mu.Unlock()
}

// stopAll stops everything the demo started, newest first.
func (d *demo) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
	d.stops = nil
}

// stop stops cmd by its PID: SIGTERM, then SIGKILL once settled reports true
// (polled every 50 ms) or after grace.
func stop(cmd *exec.Cmd, settled func() bool, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.After(grace)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if settled == nil || !settled() {
				continue
			}
		case <-deadline:
		}
		_ = cmd.Process.Kill()
		<-done
		return
	}
}

// startBackend starts an instance of the example gRPC service on addr.
func (d *demo) startBackend(name, addr string) error {
	return d.start(name, exec.Command(d.bins.server, "-addr", addr, "-name", name), nil)
}

func (d *demo) startBridge(reg registry) (string, error) {
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
%sxds: {address: 127.0.0.1:%d}
http: {address: 127.0.0.1:%d, debugAddress: 127.0.0.1:%d}
`, reg.config(), xdsPort, httpPort, debugPort)
	path := filepath.Join(d.dir, "meshbridge.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	say("Starting meshbridge (xDS 127.0.0.1:%d, HTTP 127.0.0.1:%d) with:\n%s", xdsPort, httpPort, indent(cfg))
	if err := d.start("meshbridge", exec.Command(d.bins.meshbridge, "run", "--config", path), nil); err != nil {
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

// startClient starts the example client calling target every 100 ms, with
// args added to its command line, and returns its output lines.
func (d *demo) startClient(xdsAddr, target string, args ...string) (<-chan string, error) {
	boot, err := echo.Bootstrap(xdsAddr, "meshbridge-demo-client")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(d.dir, "bootstrap.json")
	if err := os.WriteFile(path, boot, 0o644); err != nil {
		return nil, err
	}
	say("Starting the proxyless gRPC client: %s (GRPC_XDS_BOOTSTRAP=%s)", strings.Join(append([]string{target}, args...), " "), path)
	cmd := exec.Command(d.bins.client, append([]string{"-target", target, "-interval", "100ms"}, args...)...)
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.start("client", cmd, nil); err != nil {
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

// callOnce makes one call to target with a second client, through the
// bootstrap startClient wrote, and shows its output line. The client waits
// for the channel to be ready; it is killed by its PID after 30 seconds.
func (d *demo) callOnce(target string, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bins.client,
		append([]string{"-target", target, "-count", "1", "-wait-for-ready", "-timeout", "20s"}, args...)...)
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+filepath.Join(d.dir, "bootstrap.json"))
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	line := strings.TrimSpace(string(out))
	if err != nil || result(line) == "error" {
		return fmt.Errorf("one call to %s: %q (%v)", target, line, err)
	}
	say("One call to %s: %s", target, line)
	return nil
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

// result is the instance a successful call reached, "error" otherwise: the
// echo server's name ("<time> ok backend-1"), or the application a Dubbo
// provider names in its reply ("<time> ok hello meshbridge from
// backend-1@127.0.0.1:<port>").
func result(line string) string {
	f := strings.Fields(line)
	if len(f) < 3 || f[1] != "ok" {
		return "error"
	}
	if i := slices.Index(f, "from"); i >= 0 && i+1 < len(f) {
		if app, _, ok := strings.Cut(f[i+1], "@"); ok {
			return app
		}
	}
	return f[2]
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

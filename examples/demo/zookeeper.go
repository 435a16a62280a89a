package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/test/harness"
)

// Dubbo names of the demo's service: the dubbo-go test provider's
// GreetService, its Triple method, and the interface-level host meshbridge
// gives it (README "Naming conventions").
const (
	greetInterface = "org.apache.dubbo.demo.GreetService"
	greetMethod    = "/" + greetInterface + "/Greet"
	greetHost      = "org.apache.dubbo.demo.greetservice.dubbo"
	// zkRoot is Dubbo's registry root in ZooKeeper.
	zkRoot = "dubbo"
)

// zooKeeperJVMFlags keep the server's JVM small and quick to start, as the
// test harness runs it: a 256 MB heap, the serial collector, C1 only, no
// hsperfdata file in /tmp, IPv4 sockets, no AdminServer (its HTTP port).
var zooKeeperJVMFlags = []string{
	"-Xmx256m", "-XX:+UseSerialGC", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
	"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
}

// zookeeperRegistry is a standalone ZooKeeper server (Debian's, run from
// its Java classpath) on 127.0.0.1, configured as meshbridge's tests
// configure it (harness.StartZooKeeper): tickTime harness.ZooKeeperTick, so
// that ZooKeeper grants no session longer than
// harness.ZooKeeperMaxSessionTimeout (4 s) and an ephemeral node outlives
// its client's exit by at most that. Each instance is a real dubbo-go
// provider (test/dubbo/provider) that registers itself, at interface and at
// application level, and serves GreetService over Triple.
type zookeeperRegistry struct {
	classpath string // the server's Java classpath
	provider  string // the dubbo-go test provider binary
	port      int    // the client port on 127.0.0.1
	d         *demo
	conn      *zk.Conn // the demo's own client: it watches the nodes come and go
	providers map[string]*dubboProvider
}

// dubboProvider is one running provider process.
type dubboProvider struct {
	port int // its Triple port
	stop func(grace time.Duration)
}

func (z *zookeeperRegistry) name() string { return "ZooKeeper" }

func (z *zookeeperRegistry) registered() string {
	return "as a dubbo-go provider of " + greetInterface + " over Triple, which registers itself in ZooKeeper " +
		"at interface level (/" + zkRoot + "/" + greetInterface + "/providers) and application level (/services/<app>)"
}

// host is the interface-level host of GreetService (no group, no version).
func (z *zookeeperRegistry) host() string { return greetHost }

// clientArgs implements selfServing: the client calls GreetService/Greet.
func (z *zookeeperRegistry) clientArgs() []string { return []string{"-method", greetMethod} }

// appHost implements selfServing: the application-level host, <app>.dubbo.
func (z *zookeeperRegistry) appHost(id string) string { return id + ".dubbo" }

func (z *zookeeperRegistry) addr() string { return "127.0.0.1:" + strconv.Itoa(z.port) }

func (z *zookeeperRegistry) config() string {
	return fmt.Sprintf(`- name: zk-dubbo
  type: zookeeper
  zookeeper:
    servers: [%s]
    root: %s
    sessionTimeout: 4s   # this ZooKeeper grants at most 4 s (20 × tickTime)
    dubbo: {mode: both}  # interface-level and application-level hosts
`, z.addr(), zkRoot)
}

func (z *zookeeperRegistry) start(d *demo) error {
	z.d = d
	for _, p := range strings.Split(z.classpath, ":") {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("--zookeeper-classpath: %w", err)
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return errors.New("no java on PATH for ZooKeeper (Debian's zookeeper package depends on default-jre)")
	}
	if z.port, err = freePort(); err != nil {
		return err
	}
	dir := filepath.Join(d.dir, "zookeeper")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr
`, harness.ZooKeeperTick.Milliseconds(), filepath.Join(dir, "data"), z.port)), 0o644); err != nil {
		return err
	}
	say("Starting ZooKeeper on %s (tickTime %s: sessions of at most %s)", z.addr(), harness.ZooKeeperTick, harness.ZooKeeperMaxSessionTimeout)
	args := append(append([]string{}, zooKeeperJVMFlags...), "-cp", z.classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	if err := d.start("zookeeper", exec.Command(java, args...), nil); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for !z.serving() {
		if time.Now().After(deadline) {
			return fmt.Errorf("zookeeper did not serve within 60s (log: %s)", filepath.Join(d.dir, "zookeeper.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	logf, err := os.Create(filepath.Join(d.dir, "zk-client.log"))
	if err != nil {
		return err
	}
	conn, _, err := zk.Connect([]string{z.addr()}, harness.ZooKeeperMaxSessionTimeout,
		zk.WithLogger(log.New(logf, "", log.LstdFlags)))
	if err != nil {
		return err
	}
	z.conn = conn
	d.onStop(conn.Close)
	return nil
}

// serving reports whether the server answers the srvr four-letter word
// with its Mode (it answers before it serves requests otherwise).
func (z *zookeeperRegistry) serving() bool {
	c, err := net.DialTimeout("tcp", z.addr(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return false
	}
	out, _ := io.ReadAll(c)
	return strings.Contains(string(out), "\nMode:") || strings.HasPrefix(string(out), "Mode:")
}

// register starts provider id with its Triple port on 127.0.0.1:port and
// returns once it printed "provider ready": exported, and registered at both
// levels. DUBBO_IP_TO_REGISTRY=127.0.0.1 makes it register 127.0.0.1, and
// every listener it opens (Triple, its MetadataService) binds 127.0.0.1.
func (z *zookeeperRegistry) register(id string, port int) error {
	metadataPort, err := freePort()
	if err != nil {
		return err
	}
	// env sets the variable and execs the provider, which keeps env's PID.
	cmd := exec.Command("/usr/bin/env", "DUBBO_IP_TO_REGISTRY=127.0.0.1", z.provider,
		"-registry", "zookeeper://"+z.addr(), "-register", "both", "-app", id,
		"-interface", greetInterface, "-protocols", "tri", "-tri-port", strconv.Itoa(port),
		"-metadata", "local", "-metadata-port", strconv.Itoa(metadataPort))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stop, err := z.d.startStoppable(id, cmd, nil)
	if err != nil {
		return err
	}
	// stdout carries the ready line only; dubbo-go logs to stderr (<id>.log).
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "provider ready" {
				ready <- true
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		ready <- false
	}()
	logPath := filepath.Join(z.d.dir, id+".log")
	select {
	case ok := <-ready:
		if !ok {
			return fmt.Errorf("dubbo provider %s exited before it was ready (log: %s)", id, logPath)
		}
	case <-time.After(60 * time.Second):
		return fmt.Errorf("dubbo provider %s not ready within 60s (log: %s)", id, logPath)
	}
	if z.providers == nil {
		z.providers = map[string]*dubboProvider{}
	}
	z.providers[id] = &dubboProvider{port: port, stop: stop}
	return nil
}

// providerGrace is how long deregister lets a provider shut down after
// SIGTERM: dubbo-go's graceful shutdown (defaults) unregisters, serves on
// for 3 s, then for up to 3 s more until no call came in for 3 s, then
// closes its listeners and exits (about 8 s in all while a client calls it).
const providerGrace = 20 * time.Second

// deregister stops provider id as its platform would, with SIGTERM, and
// returns once it exited and both of its nodes left ZooKeeper: dubbo-go
// removes the application-level one at once; registered at both levels, it
// leaves the interface-level one to its ZooKeeper session, which expires at
// most 4 s after the exit. Until it closes its listeners it answers the
// calls that still reach it.
func (z *zookeeperRegistry) deregister(id string) error {
	p := z.providers[id]
	if p == nil {
		return fmt.Errorf("deregister %s: not running", id)
	}
	delete(z.providers, id)
	say("Stopping %s with SIGTERM: dubbo-go removes its application-level node at once, answers the calls that still "+
		"come for 3-6 s and exits; its interface-level node leaves when its ZooKeeper session expires (at most %s after the exit)",
		id, harness.ZooKeeperMaxSessionTimeout)
	begin := time.Now()
	exited := make(chan struct{})
	go func() { p.stop(providerGrace); close(exited) }()
	var appGone, ifaceGone, exitedAt time.Duration
	deadline := time.After(providerGrace + 2*harness.ZooKeeperMaxSessionTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for appGone == 0 || ifaceGone == 0 || exitedAt == 0 {
		select {
		case <-exited:
			exited, exitedAt = nil, time.Since(begin)
		case <-tick.C:
			if appGone == 0 && !z.appNode(id, p.port) {
				appGone = time.Since(begin)
			}
			if ifaceGone == 0 && !z.interfaceNode(p.port) {
				ifaceGone = time.Since(begin)
			}
		case <-deadline:
			return fmt.Errorf("%s: after %s, application-level node gone: %t, interface-level node gone: %t, exited: %t",
				id, providerGrace+2*harness.ZooKeeperMaxSessionTimeout, appGone != 0, ifaceGone != 0, exitedAt != 0)
		}
	}
	say("%s's application-level node left after %.1fs, the process exited after %.1fs, its interface-level node left after %.1fs",
		id, appGone.Seconds(), exitedAt.Seconds(), ifaceGone.Seconds())
	return nil
}

// appNode reports whether /services/<id>/127.0.0.1:<port> exists (true on
// an error: not known to be gone).
func (z *zookeeperRegistry) appNode(id string, port int) bool {
	ok, _, err := z.conn.Exists("/services/" + id + "/127.0.0.1:" + strconv.Itoa(port))
	return ok || err != nil
}

// interfaceNode reports whether a provider URL of GreetService at
// 127.0.0.1:<port> is under /dubbo/<interface>/providers (true on an error:
// not known to be gone).
func (z *zookeeperRegistry) interfaceNode(port int) bool {
	children, _, err := z.conn.Children("/" + zkRoot + "/" + greetInterface + "/providers")
	if err != nil {
		return !errors.Is(err, zk.ErrNoNode)
	}
	for _, c := range children {
		raw, err := url.QueryUnescape(c)
		if err != nil {
			continue
		}
		if u, err := url.Parse(raw); err == nil && u.Host == "127.0.0.1:"+strconv.Itoa(port) {
			return true
		}
	}
	return false
}

package harness

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file runs the dubbo-go test provider (test/dubbo/provider, a dubbo-go
// v3.3.2 application in its own Go module, found by DubboProviderBinary):
// a real Dubbo provider that registers in ZooKeeper (StartZooKeeper) or in a
// Nacos-protocol server (StartPolaris) as dubbo-go does, and serves
// GreetService (Greet and Hello) over Triple (gRPC-compatible,
// google.protobuf.StringValue in and out) and/or the Dubbo protocol
// (hessian2, a string in and out), answering
// "hello NAME from APP@127.0.0.1:PORT" ("hi ..." for Hello). The package
// comment of test/dubbo/provider lists what it registers where.
//
// The provider runs with DUBBO_IP_TO_REGISTRY=127.0.0.1, so the address it
// registers is 127.0.0.1, and every listener it opens (the protocols' ports
// and, with local metadata, the MetadataService's) binds 127.0.0.1. It is
// ready once it printed "provider ready": every service exported and
// registered, at interface and at application level.
//
// What dubbo-go v3.3.2 does that tests must expect:
//   - The methods parameter lists each method twice, first letter in either
//     case: methods=Greet,greet,Hello,hello (in ZooKeeper's URL-encoded
//     node name, Greet%2Cgreet%2CHello%2Chello). A provider URL without
//     Weight set carries weight=0 (a Nacos instance then gets weight 1).
//   - At application level, one instance is registered per protocol port
//     (/services/<app>/127.0.0.1:<port> in ZooKeeper, instances of service
//     <app> in Nacos), each listing every protocol in dubbo.endpoints.
//   - In Nacos (DEFAULT_GROUP of the namespace), the interface level is
//     service providers:<interface>:<version>:<group>, one instance per
//     protocol with the URL's parameters as metadata, registered over one
//     connection: the real Nacos server (2.x, 3.x) keeps one instance per
//     service and connection, so only the last protocol's stays, at each
//     level (Polaris keeps them all); the interface →
//     application mapping is config dataId <interface>, group mapping, and
//     remote metadata config dataId <app>, group <revision>. Providers that
//     first map one interface at the same moment race: the last one's
//     application wins.
//   - On SIGTERM (Stop) it unregisters at once, then waits 3 s for
//     consumers (up to 3 s more while calls still come), closes its listeners
//     and exits: Stop takes about 3 s idle, about 6 s under calls. With
//     Register "both" only the application level goes at once: dubbo-go
//     keeps one exporter per provider URL for both registries and
//     unregisters it from the service-discovery one only, so the interface
//     level stays until the process's registry session ends: in ZooKeeper
//     its session's expiry after the exit (ZooKeeperMaxSessionTimeout with
//     StartZooKeeper); in Nacos its connection's close at the exit. Polaris
//     sees an SDK client's deregister or disconnect only within about 5 s of
//     the registration (polaris.go): a provider stopped later stays listed
//     there, at both levels.
//   - Kill leaves every ephemeral ZooKeeper node to its session's expiry.
//   - Over Triple, a service with a version or group answers a call only
//     when it carries the tri-service-version / tri-service-group metadata
//     (Unimplemented otherwise); grpc.health.v1.Health answers SERVING for
//     "" and for the service key ("group/interface:version", the group and
//     version parts only when set).

// DubboProviderOptions configure StartDubboProvider. The zero value of every
// field but Registry has a default.
type DubboProviderOptions struct {
	// Registry is "zookeeper://127.0.0.1:PORT" (e.g. "zookeeper://" +
	// z.Address()) or "nacos://127.0.0.1:PORT", the Nacos HTTP port
	// (Polaris.NacosAddress()).
	Registry string
	// Namespace is the Nacos namespace; "" is the default one (public).
	Namespace string
	// Register is "interface", "application" or "both" ("" is "both").
	Register string
	// App is the application name; "" is "dubbo-provider".
	App string
	// Interface is the service interface; "" is
	// "org.apache.dubbo.demo.GreetService".
	Interface string
	// Group and Version are the service's group and version ("": none).
	Group, Version string
	// Protocols are "tri" and/or "dubbo"; nil is {"tri"}.
	Protocols []string
	// TriPort and DubboPort are the protocols' ports, 0 for a free one;
	// used only for a protocol in Protocols.
	TriPort, DubboPort int
	// MetadataType is "local" (the provider serves the MetadataService, over
	// the Dubbo protocol, on MetadataPort) or "remote" (the MetadataInfo goes
	// to the registry); "" is "local".
	MetadataType string
	// MetadataPort is the MetadataService's port with local metadata, 0 for
	// a free one.
	MetadataPort int
	// Weight is the provider's weight; 0 is dubbo-go's default.
	Weight int64
	// Params are extra service URL parameters (a provider's call
	// defaults: timeout, retries, loadbalance).
	Params map[string]string
	// GreetDelay delays each Triple Greet answer.
	GreetDelay time.Duration
}

// DubboProvider is a running dubbo-go test provider started by
// StartDubboProvider.
type DubboProvider struct {
	srv  server // its dir is a fresh temp dir: dubbo-provider.log, and the Nacos client's cache and log
	opts DubboProviderOptions
	// host is the address it registers and binds: 127.0.0.1 (dubbo-go),
	// NetNSAddress (Dubbo Java).
	host string
}

// StartDubboProvider starts the dubbo-go test provider with opts and returns
// it once it printed "provider ready" (every service exported and
// registered); it fails t when the provider exits or is not ready within a
// minute. Ports left 0 are picked free. The test's cleanup stops it.
func StartDubboProvider(t testing.TB, opts DubboProviderOptions) *DubboProvider {
	t.Helper()
	bin, err := filepath.Abs(DubboProviderBinary(t))
	if err != nil {
		t.Fatalf("dubbo provider binary: %v", err)
	}
	o, err := opts.resolve(t)
	if err != nil {
		t.Fatalf("dubbo provider options: %v", err)
	}
	dir := t.TempDir()
	p := &DubboProvider{
		srv: server{
			name: "dubbo-provider",
			// env sets DUBBO_IP_TO_REGISTRY and execs the provider, which
			// keeps env's PID.
			bin:       "/usr/bin/env",
			args:      append([]string{"DUBBO_IP_TO_REGISTRY=127.0.0.1", bin}, o.args()...),
			dir:       dir,
			log:       filepath.Join(dir, "dubbo-provider.log"),
			tailLines: 40,
		},
		opts: o,
		host: "127.0.0.1",
	}
	p.srv.stopAtEnd(t)
	// dubbo-go exits when a registry request fails while it starts (with
	// Nacos: its config client's first read, on a connection a busy server
	// has not registered yet); a start that exited is tried again, twice.
	for try := 1; ; try++ {
		err := p.srv.tryStart(o.Registry, p.ready)
		if err == nil {
			break
		}
		if try == dubboStartTries || !strings.Contains(err.Error(), "exited") {
			t.Fatal(err)
		}
		t.Logf("dubbo-go provider exited while starting (try %d of %d); starting it again", try, dubboStartTries)
	}
	return p
}

// dubboStartTries bounds the starts of a provider that exits while starting.
const dubboStartTries = 3

// resolve fills in the defaults and free ports, and checks the values the
// provider would refuse.
func (o DubboProviderOptions) resolve(t testing.TB) (DubboProviderOptions, error) {
	if !strings.HasPrefix(o.Registry, "zookeeper://") && !strings.HasPrefix(o.Registry, "nacos://") {
		return o, fmt.Errorf("Registry %q: want zookeeper://HOST:PORT or nacos://HOST:PORT", o.Registry)
	}
	if o.Register == "" {
		o.Register = "both"
	}
	if o.App == "" {
		o.App = "dubbo-provider"
	}
	if o.Interface == "" {
		o.Interface = "org.apache.dubbo.demo.GreetService"
	}
	if len(o.Protocols) == 0 {
		o.Protocols = []string{"tri"}
	}
	o.Protocols = append([]string(nil), o.Protocols...)
	// Distinct ports for every listener the provider may open.
	free := FreePorts(t, 3)
	for _, proto := range o.Protocols {
		switch proto {
		case "tri":
			if o.TriPort == 0 {
				o.TriPort = free[0]
			}
		case "dubbo":
			if o.DubboPort == 0 {
				o.DubboPort = free[1]
			}
		default:
			return o, fmt.Errorf("protocol %q: want tri or dubbo", proto)
		}
	}
	if o.MetadataType == "" {
		o.MetadataType = "local"
	}
	if o.MetadataType == "local" && o.MetadataPort == 0 {
		o.MetadataPort = free[2]
	}
	return o, nil
}

// args are the provider's flags for o (resolved).
func (o DubboProviderOptions) args() []string {
	a := []string{
		"-registry", o.Registry,
		"-register", o.Register,
		"-app", o.App,
		"-interface", o.Interface,
		"-protocols", strings.Join(o.Protocols, ","),
		"-metadata", o.MetadataType,
	}
	add := func(flag, v string) {
		if v != "" && v != "0" {
			a = append(a, flag, v)
		}
	}
	add("-namespace", o.Namespace)
	add("-group", o.Group)
	add("-version", o.Version)
	add("-tri-port", strconv.Itoa(o.TriPort))
	add("-dubbo-port", strconv.Itoa(o.DubboPort))
	add("-metadata-port", strconv.Itoa(o.MetadataPort))
	add("-weight", strconv.FormatInt(o.Weight, 10))
	for _, k := range slices.Sorted(maps.Keys(o.Params)) {
		a = append(a, "-param", k+"="+o.Params[k])
	}
	if o.GreetDelay > 0 {
		a = append(a, "-greet-delay", o.GreetDelay.String())
	}
	return a
}

// dubboProviderReady is the line the provider prints once it is ready.
const dubboProviderReady = "provider ready"

// ready tells whether the provider printed its ready line.
func (p *DubboProvider) ready() error {
	f, err := os.Open(p.srv.log)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if sc.Text() == dubboProviderReady {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("no %q line in %s yet", dubboProviderReady, p.srv.log)
}

// Options are the options the provider runs with: opts with the defaults
// and the picked ports filled in.
func (p *DubboProvider) Options() DubboProviderOptions {
	o := p.opts
	o.Protocols = append([]string(nil), o.Protocols...)
	return o
}

// TriAddress is the Triple port's address, "127.0.0.1:port", or "" when the
// provider does not serve Triple.
func (p *DubboProvider) TriAddress() string { return p.address("tri", p.opts.TriPort) }

// DubboAddress is the Dubbo protocol port's address, "127.0.0.1:port", or
// "" when the provider does not serve the Dubbo protocol.
func (p *DubboProvider) DubboAddress() string { return p.address("dubbo", p.opts.DubboPort) }

// MetadataAddress is the MetadataService's address, "127.0.0.1:port", or ""
// with remote metadata.
func (p *DubboProvider) MetadataAddress() string {
	if p.opts.MetadataType != "local" {
		return ""
	}
	return net.JoinHostPort(p.host, strconv.Itoa(p.opts.MetadataPort))
}

func (p *DubboProvider) address(proto string, port int) string {
	for _, q := range p.opts.Protocols {
		if q == proto {
			return net.JoinHostPort(p.host, strconv.Itoa(port))
		}
	}
	return ""
}

// Dir is the provider's working directory: its log, dubbo-provider.log.
func (p *DubboProvider) Dir() string { return p.srv.dir }

// Pid is the provider process's PID, or 0 when it is not running.
func (p *DubboProvider) Pid() int { return p.srv.pid() }

// Stop stops the provider by its PID: SIGTERM, which starts dubbo-go's
// graceful shutdown (unregister, 3 s for consumers and up to 3 s more while
// calls come, close: 3 to 6 s in all), then SIGKILL after 10 s. It returns once the process
// exited, and is a no-op when it is not running.
func (p *DubboProvider) Stop() { p.srv.stop() }

// Kill ends the provider with SIGKILL at once, unregistering nothing: its
// ephemeral ZooKeeper nodes stay until its sessions expire. It returns once
// the process exited, and is a no-op when it is not running.
func (p *DubboProvider) Kill() { p.srv.kill() }

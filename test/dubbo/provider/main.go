// Command dubbo-provider is a dubbo-go (v3.3.2) provider that meshbridge's
// tests run against real ZooKeeper and Nacos-protocol registries: it
// registers itself the way a dubbo-go application does and serves a
// GreetService, so that what the registry holds is what dubbo-go writes, not
// what a test imagines it writes.
//
// It serves GreetService (default interface org.apache.dubbo.demo.GreetService)
// with two methods, Greet and Hello, each taking a name and answering
// "hello NAME from APP@127.0.0.1:PORT" ("hi ..." for Hello), PORT being the
// port of the protocol the call came in on:
//   - over Triple (tri), a gRPC-compatible protocol, with
//     google.protobuf.StringValue in and out: a plain gRPC client calls
//     /org.apache.dubbo.demo.GreetService/Greet. With -version or -group set,
//     a call must carry the tri-service-version / tri-service-group metadata.
//     grpc.health.v1.Health is served on the same port.
//   - over the Dubbo protocol (dubbo, hessian2), with a string in and out.
//
// dubbo-go lists each method in the provider URL's methods parameter twice,
// with its first letter in either case: methods=Greet,greet,Hello,hello.
//
// Flags:
//
//	-registry ADDR     zookeeper://127.0.0.1:PORT or nacos://127.0.0.1:PORT
//	                   (Nacos: the HTTP port; the client dials gRPC at +1000)
//	-namespace NS      Nacos namespace ("" is the default, public)
//	-register MODE     interface (provider URLs under /dubbo/<interface>/
//	                   providers, or one Nacos service per interface),
//	                   application (one instance per protocol port under
//	                   /services/<app>, or in Nacos service <app>, plus the
//	                   interface → application mapping), or both
//	-app NAME          application name (default dubbo-provider)
//	-interface NAME    service interface (default org.apache.dubbo.demo.GreetService)
//	-group G, -version V  service group and version (default none)
//	-protocols LIST    comma-separated tri and/or dubbo (default tri)
//	-tri-port P, -dubbo-port P  the protocols' ports (required for each
//	                   protocol served)
//	-metadata TYPE     local (MetadataService served by this process on
//	                   -metadata-port) or remote (MetadataInfo written to the
//	                   registry, for ZooKeeper under /dubbo/<app>/<revision>)
//	-metadata-port P   the MetadataService's port with -metadata local
//	                   (required then)
//	-weight W          provider weight (the URL's weight parameter; Nacos
//	                   instance weight); 0 leaves dubbo-go's default
//	-log-level L       dubbo-go's log level: debug, info, warn, error (default info)
//
// Every listener binds 127.0.0.1. The address registered is 127.0.0.1 when
// the environment sets DUBBO_IP_TO_REGISTRY=127.0.0.1 (the test harness
// does); otherwise dubbo-go registers the host's first non-loopback address.
//
// Output: the line "provider ready" on stdout once every service is exported
// and registered (interface and application level) and the MetadataService
// is up; dubbo-go's log goes to stderr. On SIGTERM or SIGINT dubbo-go shuts
// down gracefully: it unregisters from the registries at once, waits 3 s
// for consumers (its default), closes the listeners and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/common/extension"
	_ "dubbo.apache.org/dubbo-go/v3/imports"
	"dubbo.apache.org/dubbo-go/v3/logger"
	_ "dubbo.apache.org/dubbo-go/v3/logger/core/logrus"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/protocol/base"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/server"
)

// loopback is the address every listener binds.
const loopback = "127.0.0.1"

type config struct {
	registry, namespace, register    string
	app, iface, group, version       string
	protocols                        []string
	triPort, dubboPort, metadataPort int
	metadata, logLevel               string
	weight                           int64
	// params are extra service URL parameters (-param k=v: a Dubbo
	// provider's call defaults, timeout=200); greetDelay delays each
	// Triple Greet answer.
	params     map[string]string
	greetDelay time.Duration
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbo-provider:", err)
		os.Exit(2)
	}
	// dubbo-go's loggers write to os.Stdout; stdout is kept for the ready
	// line alone.
	stdout := os.Stdout
	os.Stdout = os.Stderr
	if err := run(cfg, stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dubbo-provider:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("dubbo-provider", flag.ContinueOnError)
	c := &config{}
	var protocols string
	fs.StringVar(&c.registry, "registry", "", "zookeeper://127.0.0.1:PORT or nacos://127.0.0.1:PORT")
	fs.StringVar(&c.namespace, "namespace", "", "Nacos namespace (default: public)")
	fs.StringVar(&c.register, "register", "both", "interface, application or both")
	fs.StringVar(&c.app, "app", "dubbo-provider", "application name")
	fs.StringVar(&c.iface, "interface", "org.apache.dubbo.demo.GreetService", "service interface")
	fs.StringVar(&c.group, "group", "", "service group")
	fs.StringVar(&c.version, "version", "", "service version")
	fs.StringVar(&protocols, "protocols", "tri", "comma-separated: tri, dubbo")
	fs.IntVar(&c.triPort, "tri-port", 0, "Triple port")
	fs.IntVar(&c.dubboPort, "dubbo-port", 0, "Dubbo protocol port")
	fs.StringVar(&c.metadata, "metadata", "local", "metadata storage type: local or remote")
	fs.IntVar(&c.metadataPort, "metadata-port", 0, "MetadataService port (with -metadata local)")
	fs.Int64Var(&c.weight, "weight", 0, "provider weight (0: dubbo-go's default)")
	fs.StringVar(&c.logLevel, "log-level", "info", "dubbo-go log level")
	fs.Func("param", "service URL parameter k=v (repeatable), e.g. timeout=200", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not k=v", v)
		}
		if c.params == nil {
			c.params = map[string]string{}
		}
		c.params[k] = val
		return nil
	})
	fs.DurationVar(&c.greetDelay, "greet-delay", 0, "delay of each Triple Greet answer")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !strings.HasPrefix(c.registry, "zookeeper://") && !strings.HasPrefix(c.registry, "nacos://") {
		return nil, fmt.Errorf("-registry %q: want zookeeper://HOST:PORT or nacos://HOST:PORT", c.registry)
	}
	switch c.register {
	case "interface", "application", "both":
	default:
		return nil, fmt.Errorf("-register %q: want interface, application or both", c.register)
	}
	for _, p := range strings.Split(protocols, ",") {
		switch p = strings.TrimSpace(p); p {
		case "tri":
			if c.triPort <= 0 {
				return nil, fmt.Errorf("protocol tri needs -tri-port")
			}
		case "dubbo":
			if c.dubboPort <= 0 {
				return nil, fmt.Errorf("protocol dubbo needs -dubbo-port")
			}
		default:
			return nil, fmt.Errorf("-protocols: unknown protocol %q (want tri, dubbo)", p)
		}
		c.protocols = append(c.protocols, p)
	}
	switch c.metadata {
	case "local":
		if c.metadataPort <= 0 {
			return nil, fmt.Errorf("-metadata local needs -metadata-port")
		}
	case "remote":
	default:
		return nil, fmt.Errorf("-metadata %q: want local or remote", c.metadata)
	}
	if c.weight < 0 {
		return nil, fmt.Errorf("-weight %d: want 0 or more", c.weight)
	}
	return c, nil
}

func run(c *config, stdout *os.File) error {
	bindLoopbackWhenUnset(constant.DubboProtocol)

	regOpts := []registry.Option{registry.WithAddress(c.registry)}
	switch c.register {
	case "interface":
		regOpts = append(regOpts, registry.WithRegisterInterface())
	case "application":
		regOpts = append(regOpts, registry.WithRegisterService())
	case "both":
		regOpts = append(regOpts, registry.WithRegisterServiceAndInterface())
	}
	if c.namespace != "" {
		regOpts = append(regOpts, registry.WithNamespace(c.namespace))
	}
	insOpts := []dubbo.InstanceOption{
		dubbo.WithName(c.app),
		dubbo.WithRegistry(regOpts...),
		// logrus writes no colour codes to a file (dubbo-go's zap does).
		dubbo.WithLogger(logger.WithLogrus(), logger.WithLevel(c.logLevel)),
	}
	if c.metadata == "remote" {
		insOpts = append(insOpts, dubbo.WithRemoteMetadata())
	} else {
		insOpts = append(insOpts, dubbo.WithMetadataServicePort(c.metadataPort))
	}
	for _, p := range c.protocols {
		if p == "tri" {
			insOpts = append(insOpts, dubbo.WithProtocol(protocol.WithTriple(), protocol.WithID("tri"),
				protocol.WithIp(loopback), protocol.WithPort(c.triPort)))
		} else {
			insOpts = append(insOpts, dubbo.WithProtocol(protocol.WithDubbo(), protocol.WithID("dubbo"),
				protocol.WithIp(loopback), protocol.WithPort(c.dubboPort)))
		}
	}
	ins, err := dubbo.NewInstance(insOpts...)
	if err != nil {
		return fmt.Errorf("dubbo instance: %w", err)
	}
	var srvOpts []server.ServerOption
	if c.weight > 0 {
		srvOpts = append(srvOpts, func(o *server.ServerOptions) { o.Provider.Weight = c.weight })
	}
	srv, err := ins.NewServer(srvOpts...)
	if err != nil {
		return fmt.Errorf("dubbo server: %w", err)
	}
	svcOpts := []server.ServiceOption{server.WithInterface(c.iface)}
	if c.group != "" {
		svcOpts = append(svcOpts, server.WithGroup(c.group))
	}
	if c.version != "" {
		svcOpts = append(svcOpts, server.WithVersion(c.version))
	}
	for k, v := range c.params {
		svcOpts = append(svcOpts, server.WithParam(k, v))
	}
	for _, p := range c.protocols {
		opts := append(svcOpts[:len(svcOpts):len(svcOpts)], onlyProtocol(p))
		if p == "tri" {
			err = srv.Register(&TripleGreetService{from: from(c.app, c.triPort), delay: c.greetDelay}, tripleGreetServiceInfo(c.iface), opts...)
		} else {
			err = srv.Register(&DubboGreetService{from: from(c.app, c.dubboPort)}, nil, opts...)
		}
		if err != nil {
			return fmt.Errorf("register %s over %s: %w", c.iface, p, err)
		}
	}

	ctx := newStartedContext(context.Background())
	go func() {
		<-ctx.started
		fmt.Fprintln(stdout, "provider ready")
	}()
	// Serve returns once graceful shutdown is over, on SIGTERM or SIGINT;
	// dubbo-go's signal handler then exits the process itself.
	return srv.ServeContext(ctx)
}

func from(app string, port int) string {
	return app + "@" + net.JoinHostPort(loopback, strconv.Itoa(port))
}

// onlyProtocol exports a service over protocol id alone. (dubbo-go's
// server.WithProtocolIDs sets the list only when it is empty.)
func onlyProtocol(id string) server.ServiceOption {
	return func(o *server.ServiceOptions) { o.Service.ProtocolIDs = []string{id} }
}

// startedContext is ServeContext's context. dubbo-go v3.3.2's ServeContext
// calls only Err while it exports and registers, and calls Done first once
// everything is exported and registered, to wait for shutdown: that first
// call closes started.
type startedContext struct {
	context.Context
	once    sync.Once
	started chan struct{}
}

func newStartedContext(parent context.Context) *startedContext {
	return &startedContext{Context: parent, started: make(chan struct{})}
}

func (c *startedContext) Done() <-chan struct{} {
	c.once.Do(func() { close(c.started) })
	return c.Context.Done()
}

// bindLoopbackWhenUnset wraps protocol name so that an export whose URL has
// no IP listens on 127.0.0.1 instead of on every interface. dubbo-go builds
// the local MetadataService's URL without an IP (its listener would bind
// :PORT); the services' own URLs carry the protocol's IP and are unchanged.
func bindLoopbackWhenUnset(name string) {
	inner := extension.GetProtocol(name)
	extension.SetProtocol(name, func() base.Protocol { return loopbackProtocol{inner} })
}

type loopbackProtocol struct{ base.Protocol }

func (p loopbackProtocol) Export(invoker base.Invoker) base.Exporter {
	if u := invoker.GetURL(); u.Ip == "" {
		u.Ip = loopback
		u.Location = net.JoinHostPort(loopback, u.Port)
	}
	return p.Protocol.Export(invoker)
}

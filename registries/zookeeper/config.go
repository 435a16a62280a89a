package zookeeper

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// Defaults of the zookeeper block (README "Configuration").
const (
	DefaultServer = "127.0.0.1:2181"
	DefaultRoot   = "dubbo"
	// DefaultSpringCloudRoot is the root of layout spring-cloud: Spring
	// Cloud Zookeeper's spring.cloud.zookeeper.discovery.root default.
	DefaultSpringCloudRoot = "/services"
	// DefaultSpringCloudHostTemplate names the services of layout
	// spring-cloud (the registry's hostTemplate): <application>.zookeeper.
	DefaultSpringCloudHostTemplate = "{{.Service}}.zookeeper"
	DefaultSessionTimeout          = 10 * time.Second
	// ServicesRoot is where Dubbo 3 application-level instances live
	// (Curator ServiceDiscovery's base path in Dubbo and dubbo-go).
	ServicesRoot = "/services"
	// MappingDir is the child of the root that holds interface → application
	// mappings, not an interface.
	MappingDir = "mapping"
)

// Layouts: how services are laid out in ZooKeeper (Block.Layout).
const (
	// LayoutDubbo: Dubbo's providers under /<root> and Dubbo 3
	// application-level instances under /services.
	LayoutDubbo = "dubbo"
	// LayoutSpringCloud: Spring Cloud Zookeeper discovery (Curator
	// x-discovery), one ServiceInstance JSON per instance at
	// /<root>/<application>/<id> (spring.go).
	LayoutSpringCloud = "spring-cloud"
)

// Session timeouts outside this range are refused: ZooKeeper clamps what it
// grants to [2, 20] × its tickTime (2 s by default, so 4-40 s), and a
// session shorter than a second would expire on any pause.
const (
	minSessionTimeout = time.Second
	maxSessionTimeout = 10 * time.Minute
)

// dubboHostsFrom names what names a layout dubbo registry's services.
const dubboHostsFrom = "zookeeper.dubbo.interfaceHostTemplate and applicationHostTemplate"

// Type is the registry type "zookeeper" (registries.Types). With layout
// dubbo (the default) it emits Dubbo services, named by the dubbo block's
// host templates (HostsFrom; Block.HostsFrom lifts it for layout
// spring-cloud); with layout spring-cloud, Spring Cloud Zookeeper
// applications, named by the registry's hostTemplate, default
// HostTemplate. Dubbo services carry their host, so HostTemplate never
// applies to them.
func Type() registries.Type {
	return registries.Type{
		Name:         "zookeeper",
		HostTemplate: DefaultSpringCloudHostTemplate,
		HostsFrom:    dubboHostsFrom,
		// fail's reasons (auth becomes forbidden when ZooKeeper refuses the
		// credentials), outage's, and the liveness probe's.
		ErrorReasons: []string{"read", "auth", "forbidden", "unavailable", registries.ReasonHung},
		NewConfig:    func() registries.Config { return &Block{} },
	}
}

// Auth is the auth block: ZooKeeper digest authentication.
type Auth struct {
	// Scheme is "digest", the one ZooKeeper scheme a client authenticates
	// with by credentials; "" means no authentication.
	Scheme string `json:"scheme,omitempty"`
	// Credentials are "user:password"; CredentialsFile holds them instead
	// (trailing whitespace trimmed). One or the other.
	Credentials     string `json:"credentials,omitempty"`
	CredentialsFile string `json:"credentialsFile,omitempty"`
}

// Block is the zookeeper block of a registry's configuration.
type Block struct {
	// Servers are the ensemble's client addresses, host:port (default
	// 127.0.0.1:2181).
	Servers []string `json:"servers,omitempty"`
	// Layout is dubbo (default) or spring-cloud (LayoutDubbo,
	// LayoutSpringCloud).
	Layout string `json:"layout,omitempty"`
	// Root, with layout dubbo, is Dubbo's registry root (default
	// "dubbo"): interface-level providers are under
	// /<root>/<interface>/providers, mappings under /<root>/mapping, remote
	// metadata under /<root>/metadata/<application> (Dubbo Java) or
	// /<root>/<application> (dubbo-go). With layout spring-cloud it is
	// Spring's discovery root (default "/services"): instances are at
	// /<root>/<application>/<id>.
	Root string `json:"root,omitempty"`
	// SessionTimeout is the session timeout asked of ZooKeeper (default
	// 10s; the server clamps it to [2, 20] × tickTime).
	SessionTimeout strict.Duration `json:"sessionTimeout"`
	Auth           Auth            `json:"auth"`
	// Dubbo configures layout dubbo; layout spring-cloud refuses it.
	Dubbo dubbo.Config `json:"dubbo"`
}

// springCloud reports whether the block reads layout spring-cloud.
func (b *Block) springCloud() bool { return b.Layout == LayoutSpringCloud }

// HostsFrom says what names the registry's services instead of its
// hostTemplate: the dubbo block's templates with layout dubbo (and an
// unknown one, which Validate refuses), nothing with layout spring-cloud,
// whose services the registry's hostTemplate names. The configuration
// loader (cmd/bridge) asks the block before registries.Type.HostsFrom.
func (b *Block) HostsFrom() string {
	if b.springCloud() {
		return ""
	}
	return dubboHostsFrom
}

var _ registries.Config = (*Block)(nil)

// Default implements registries.Config.
func (b *Block) Default() {
	if len(b.Servers) == 0 {
		b.Servers = []string{DefaultServer}
	}
	if b.Layout == "" {
		b.Layout = LayoutDubbo
	}
	if b.Root == "" {
		b.Root = DefaultRoot
		if b.springCloud() {
			b.Root = DefaultSpringCloudRoot
		}
	}
	b.SessionTimeout.Default(DefaultSessionTimeout)
	// Layout spring-cloud leaves the dubbo block as written: Validate
	// refuses it when it is set.
	if b.Layout == LayoutDubbo {
		b.Dubbo.Default()
	}
}

// dubboSet reports whether the dubbo block sets anything.
func dubboSet(c dubbo.Config) bool {
	return c.Enabled != nil || c.Mode != "" || len(c.DropParams) > 0 || c.InterfaceHostTemplate != "" || c.ApplicationHostTemplate != ""
}

// Validate implements registries.Config.
func (b *Block) Validate() []error {
	var errs []error
	for i, s := range b.Servers {
		host, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			errs = append(errs, registries.Invalid(fmt.Sprintf("servers[%d]", i), "%q is not host:port", s))
		}
	}
	if root := strings.Trim(b.Root, "/"); root == "" || strings.ContainsAny(root, " \t\n") {
		errs = append(errs, registries.Invalid("root", "%q is not a ZooKeeper path", b.Root))
	}
	if d := b.SessionTimeout.Duration; d < minSessionTimeout || d > maxSessionTimeout {
		errs = append(errs, registries.Invalid("sessionTimeout", "%s is outside %s-%s", d, minSessionTimeout, maxSessionTimeout))
	}
	switch b.Auth.Scheme {
	case "":
		if b.Auth.Credentials != "" || b.Auth.CredentialsFile != "" {
			errs = append(errs, registries.Invalid("auth.scheme", "required with credentials (digest)"))
		}
	case "digest":
		switch {
		case b.Auth.Credentials != "" && b.Auth.CredentialsFile != "":
			errs = append(errs, registries.Invalid("auth", "set credentials or credentialsFile, not both"))
		case b.Auth.Credentials == "" && b.Auth.CredentialsFile == "":
			errs = append(errs, registries.Invalid("auth", "digest needs credentials or credentialsFile (user:password)"))
		case b.Auth.Credentials != "" && !strings.Contains(b.Auth.Credentials, ":"):
			errs = append(errs, registries.Invalid("auth.credentials", "not user:password"))
		}
	default:
		errs = append(errs, registries.Invalid("auth.scheme", "%q is not supported (digest)", b.Auth.Scheme))
	}
	switch b.Layout {
	case LayoutDubbo:
		if b.Dubbo.Enabled != nil && !*b.Dubbo.Enabled {
			errs = append(errs, registries.Invalid("dubbo.enabled", "a zookeeper registry of layout dubbo reads Dubbo providers only; remove the key"))
		}
		for _, err := range b.Dubbo.Validate() {
			errs = append(errs, registries.Nested("dubbo", err))
		}
	case LayoutSpringCloud:
		if dubboSet(b.Dubbo) {
			errs = append(errs, registries.Invalid("dubbo", "layout spring-cloud reads Spring Cloud Zookeeper instances, not Dubbo providers: "+
				"remove the dubbo block, or read Dubbo with a registry of layout dubbo"))
		}
	default:
		errs = append(errs, registries.Invalid("layout", "%q is not one of %s, %s", b.Layout, LayoutDubbo, LayoutSpringCloud))
	}
	return errs
}

// Files implements registries.Config: the credentials file must be
// readable when the configuration loads.
func (b *Block) Files() []registries.File {
	return []registries.File{{Key: "auth.credentialsFile", Path: &b.Auth.CredentialsFile, MustExist: true}}
}

// Redacted implements registries.Config: the credentials are replaced.
func (b *Block) Redacted() registries.Config {
	c := *b
	if c.Auth.Credentials != "" {
		c.Auth.Credentials = registries.Redacted
	}
	return &c
}

// New implements registries.Config.
func (b *Block) New(name string, log *slog.Logger) (registries.Registry, error) {
	c := *b
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	creds := c.Auth.Credentials
	if c.Auth.CredentialsFile != "" {
		data, err := os.ReadFile(c.Auth.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("auth.credentialsFile: %w", err)
		}
		creds = strings.TrimSpace(string(data))
		if !strings.Contains(creds, ":") {
			return nil, fmt.Errorf("auth.credentialsFile %s: not user:password", c.Auth.CredentialsFile)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	var builder *dubbo.Builder
	if !c.springCloud() {
		var err error
		if builder, err = dubbo.NewBuilder(c.Dubbo); err != nil { // validated above
			return nil, fmt.Errorf("dubbo: %w", err)
		}
	}
	return newRegistry(name, c, creds, builder, log.With("registry", name)), nil
}

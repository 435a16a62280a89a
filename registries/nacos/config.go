package nacos

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// Defaults applied to zero fields of Config.
const (
	DefaultAddress           = "127.0.0.1:8848"
	DefaultContextPath       = "/nacos"
	DefaultNamespace         = "public"
	DefaultGroup             = "DEFAULT_GROUP"
	DefaultRelistInterval    = 10 * time.Second
	DefaultReconcileInterval = 5 * time.Minute

	// grpcPortOffset is where Nacos 2.x listens for gRPC relative to its
	// HTTP port (Nacos docs "Nacos 2.0 compatibility": 9848 = 8848 + 1000;
	// nacos-sdk-go constant.RpcPortOffset).
	grpcPortOffset = 1000
	// minInterval is the shortest relist or reconcile interval accepted: a
	// floor that keeps a typo ("10ms") from hammering the server.
	minInterval = time.Second
)

// Environment variables read when the corresponding fields are empty.
const (
	EnvUsername = "NACOS_USERNAME"
	EnvPassword = "NACOS_PASSWORD"
)

// TLSConfig configures TLS to the Nacos server, for its gRPC port and for the
// HTTP login. Any field set turns TLS on. New reads every file, so a missing
// or unreadable one is an error naming its key (nacos-sdk-go v2.3.5 would
// call log.Fatalf on an unreadable client certificate and silently ignore an
// unreadable CA file).
type TLSConfig struct {
	// CAFile is a PEM bundle of CAs that verify the server's certificate,
	// added to the system roots; empty means the system roots only.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are the PEM client certificate and its key; set
	// both or neither.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

func (t TLSConfig) enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Config configures one Nacos registry. Zero values take the defaults above;
// the README's "Configuration" block documents the same keys.
type Config struct {
	// Name is the registry name, a DNS-1123 label.
	Name string
	// Addresses are the Nacos servers' HTTP addresses, host:port (default
	// 127.0.0.1:8848). The gRPC port is GRPCPort, or each HTTP port + 1000.
	Addresses []string
	// GRPCPort, when not 0, is the gRPC port of every address: set it behind
	// a load balancer that maps ports, where HTTP port + 1000 is wrong.
	GRPCPort int
	// ContextPath is the HTTP API's path prefix (default /nacos), used for
	// the login and the server-version probe only: the naming reads go over
	// gRPC.
	ContextPath string
	// Namespaces are namespace IDs; "" and "public" are the default
	// namespace (default ["public"]).
	Namespaces []string
	// Groups are the groups read in every namespace (default
	// ["DEFAULT_GROUP"]).
	Groups []string
	// Clusters, when set, keeps only instances of these Nacos clusters.
	Clusters []string
	// Services is an allow-list of path.Match globs on the service name;
	// empty means every service.
	Services []string
	// Username and Password (or PasswordFile, whose content is trimmed of
	// surrounding white space) log in to a Nacos server with auth enabled;
	// when Username is empty it is $NACOS_USERNAME, when Password and
	// PasswordFile are empty the password is $NACOS_PASSWORD. Never logged.
	Username     string
	Password     string
	PasswordFile string
	// AccessKey and SecretKey (or SecretKeyFile) sign requests for Alibaba
	// Cloud MSE (nacos-sdk-go's RAM auth). The secret key is never logged.
	AccessKey     string
	SecretKey     string
	SecretKeyFile string
	TLS           TLSConfig
	// RelistInterval is how often every namespace and group's service list
	// is read (Nacos 2.x has no watch on it); at least 1s.
	RelistInterval time.Duration
	// ReconcileInterval is how often every subscribed service is queried
	// from the server, to catch a push the SDK or the server lost; at least
	// 1s. Each round starts after the interval ±10 %.
	ReconcileInterval time.Duration
	// CacheDir is the directory handed to nacos-sdk-go as its cache and log
	// directory (default <os.TempDir()>/meshbridge-nacos/<Name>). This
	// registry reads every service from the server and keeps nothing on
	// disk (doc.go rule 9).
	CacheDir string
	// Dubbo is the dubbo block (doc.go rule 8): with Enabled false (the
	// default) Dubbo services are skipped and counted; with true they are
	// read as Dubbo services.
	Dubbo  dubbo.Config
	Logger *slog.Logger

	// explicitDurations: a zero duration was given on purpose and is
	// refused, instead of taking the default (set by Block).
	explicitDurations bool
}

var (
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// nameRE is the character set Nacos accepts in namespace IDs, groups
	// and clusters (Nacos NamingUtils / ParamUtils: letters, digits, "-",
	// "_", ".", ":"), which also keeps "@@" (its group separator) out.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
)

// withDefaults returns c with zero fields set to their defaults and the
// environment fallbacks applied; "" namespaces become "public".
func (c Config) withDefaults(getenv func(string) string) Config {
	if len(c.Addresses) == 0 {
		c.Addresses = []string{DefaultAddress}
	}
	if c.ContextPath == "" {
		c.ContextPath = DefaultContextPath
	}
	if len(c.Namespaces) == 0 {
		c.Namespaces = []string{DefaultNamespace}
	}
	c.Namespaces = slices.Clone(c.Namespaces)
	for i, ns := range c.Namespaces {
		if ns == "" {
			c.Namespaces[i] = DefaultNamespace
		}
	}
	if len(c.Groups) == 0 {
		c.Groups = []string{DefaultGroup}
	}
	if c.Username == "" && c.Password == "" && c.PasswordFile == "" {
		c.Username, c.Password = getenv(EnvUsername), getenv(EnvPassword)
	}
	if !c.explicitDurations {
		if c.RelistInterval == 0 {
			c.RelistInterval = DefaultRelistInterval
		}
		if c.ReconcileInterval == 0 {
			c.ReconcileInterval = DefaultReconcileInterval
		}
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(os.TempDir(), "meshbridge-nacos", c.Name)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Dubbo.Default()
	return c
}

// validate reports every invalid field, each a *registries.FieldError
// ("grpcPort: 70000 is outside 0-65535") naming the configuration block's
// key, or a plain error naming the keys it is about.
// Secrets never appear in them.
func (c Config) validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, registries.Invalid(field, format, args...))
	}
	addKeys := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !labelRE.MatchString(c.Name) || len(c.Name) > 63 {
		add("name", "%q must be a DNS-1123 label", c.Name)
	}
	if c.GRPCPort < 0 || c.GRPCPort > 65535 {
		add("grpcPort", "%d is outside 0-65535 (0 = each HTTP port + %d)", c.GRPCPort, grpcPortOffset)
	}
	for i, a := range c.Addresses {
		if _, err := parseAddress(a, c.GRPCPort); err != nil {
			add(fmt.Sprintf("addresses[%d]", i), "%w", err)
		}
	}
	if !strings.HasPrefix(c.ContextPath, "/") {
		add("contextPath", "%q must start with \"/\"", c.ContextPath)
	}
	checkNames := func(key string, names []string, allowEmpty bool) {
		seen := map[string]bool{}
		for i, n := range names {
			switch {
			case n == "" && allowEmpty:
			case !nameRE.MatchString(n):
				add(fmt.Sprintf("%s[%d]", key, i), "%q must be letters, digits, \"-\", \"_\", \".\" or \":\"", n)
			case seen[n]:
				add(fmt.Sprintf("%s[%d]", key, i), "%q is listed twice", n)
			}
			seen[n] = true
		}
	}
	checkNames("namespaces", c.Namespaces, false)
	checkNames("groups", c.Groups, false)
	checkNames("clusters", c.Clusters, true)
	for i, p := range c.Services {
		if _, err := path.Match(p, ""); err != nil {
			add(fmt.Sprintf("services[%d]", i), "%q is not a valid glob (path.Match): %v", p, err)
		}
	}
	if c.Password != "" && c.PasswordFile != "" {
		addKeys("password and passwordFile: set one of them")
	}
	if (c.Password != "" || c.PasswordFile != "") && c.Username == "" {
		add("username", "required with a password")
	}
	if c.Username != "" && c.Password == "" && c.PasswordFile == "" {
		add("password", "required with username %q (password or passwordFile; or %s with %s)", c.Username, EnvPassword, EnvUsername)
	}
	if c.SecretKey != "" && c.SecretKeyFile != "" {
		addKeys("secretKey and secretKeyFile: set one of them")
	}
	hasSecret := c.SecretKey != "" || c.SecretKeyFile != ""
	if c.AccessKey != "" && !hasSecret {
		add("secretKey", "required with accessKey (secretKey or secretKeyFile)")
	}
	if hasSecret && c.AccessKey == "" {
		add("accessKey", "required with a secret key")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		addKeys("tls.certFile and tls.keyFile: set both or neither")
	}
	checkInterval := func(key string, d time.Duration) {
		if d < minInterval {
			add(key, "%s is below the minimum %s", d, minInterval)
		}
	}
	checkInterval("relistInterval", c.RelistInterval)
	checkInterval("reconcileInterval", c.ReconcileInterval)
	for _, err := range c.Dubbo.Validate() {
		errs = append(errs, registries.Nested("dubbo", err))
	}
	return errors.Join(errs...)
}

// server is one Nacos server to connect to.
type server struct {
	host     string
	httpPort int
	grpcPort int
}

// httpAddress is host:httpPort.
func (s server) httpAddress() string { return net.JoinHostPort(s.host, strconv.Itoa(s.httpPort)) }

// grpcAddress is host:grpcPort.
func (s server) grpcAddress() string { return net.JoinHostPort(s.host, strconv.Itoa(s.grpcPort)) }

// parseAddress splits a host:port address and derives its gRPC port.
func parseAddress(a string, grpcPort int) (server, error) {
	if strings.Contains(a, "://") {
		return server{}, fmt.Errorf("%q: write host:port without a scheme (TLS settings choose https)", a)
	}
	host, portStr, err := net.SplitHostPort(a)
	if err != nil {
		return server{}, fmt.Errorf("%q is not host:port: %v", a, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return server{}, fmt.Errorf("%q is not host:port with a port in 1-65535", a)
	}
	s := server{host: host, httpPort: port, grpcPort: grpcPort}
	if s.grpcPort == 0 {
		s.grpcPort = port + grpcPortOffset
		if s.grpcPort > 65535 {
			return server{}, fmt.Errorf("%q: its gRPC port %d (HTTP port + %d) is outside 1-65535; set grpcPort", a, s.grpcPort, grpcPortOffset)
		}
	}
	return s, nil
}

// secrets are the credentials New read, from fields, files or the
// environment.
type secrets struct {
	username, password   string
	accessKey, secretKey string
}

// values returns the secret values to redact from every text that leaves
// the registry.
func (s secrets) values() []string {
	var out []string
	for _, v := range []string{s.password, s.secretKey} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// readSecrets reads the password and secret key files. Errors name the key
// and the path, never the content.
func readSecrets(c Config) (secrets, error) {
	s := secrets{username: c.Username, password: c.Password, accessKey: c.AccessKey, secretKey: c.SecretKey}
	read := func(key, file string, into *string) error {
		if file == "" {
			return nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return fmt.Errorf("%s: %s is empty", key, file)
		}
		*into = v
		return nil
	}
	return s, errors.Join(read("passwordFile", c.PasswordFile, &s.password), read("secretKeyFile", c.SecretKeyFile, &s.secretKey))
}

// clientTLS reads the TLS files and returns the client configuration, or nil
// when TLS is off. The CA bundle is added to the system roots, the way
// nacos-sdk-go's gRPC transport uses it, so that HTTPS login and gRPC trust
// the same servers.
func clientTLS(t TLSConfig) (*tls.Config, error) {
	if !t.enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.caFile: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.caFile: %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.certFile %s and tls.keyFile %s: %w", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

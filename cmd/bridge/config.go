package main

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/translate"
)

// Config is the operator's YAML configuration. Its keys are a contract
// documented in the README ("Configuration"); keep them stable.
type Config struct {
	Registries []RegistryConfig `json:"registries"`
	Output     OutputConfig     `json:"output"`
	XDS        XDSConfig        `json:"xds"`
	HTTP       HTTPConfig       `json:"http"`
	Debounce   DebounceConfig   `json:"debounce"`
	Sync       SyncConfig       `json:"sync"`
	MCP        MCPConfig        `json:"mcp"`
	Kubernetes KubernetesConfig `json:"kubernetes"`
}

// KubernetesConfig turns on the Kubernetes output: the aggregate
// registry's objects written as networking.istio.io/v1 CRDs into
// output.namespace.
type KubernetesConfig struct {
	// Enabled writes the objects; default false.
	Enabled bool `json:"enabled"`
	// Kubeconfig is a kubeconfig file; "" uses the in-cluster config
	// (the pod's service account).
	Kubeconfig string `json:"kubeconfig"`
	// QPS and Burst are the client's rate limit (default 50 and 100).
	QPS   float32 `json:"qps"`
	Burst int     `json:"burst"`
	// ResyncPeriod is how often the writer lists its objects to
	// garbage-collect and correct drift; default 5m.
	ResyncPeriod   Duration             `json:"resyncPeriod"`
	LeaderElection LeaderElectionConfig `json:"leaderElection"`
}

// LeaderElectionConfig is the writer's Lease (client-go leaderelection).
type LeaderElectionConfig struct {
	// Enabled defaults to true; with it off every replica writes.
	Enabled *bool `json:"enabled,omitempty"`
	// LeaseName defaults to "meshbridge"; LeaseNamespace to output.namespace.
	LeaseName      string `json:"leaseName"`
	LeaseNamespace string `json:"leaseNamespace"`
	// LeaseDuration (15s), RenewDeadline (10s), RetryPeriod (2s).
	LeaseDuration Duration `json:"leaseDuration"`
	RenewDeadline Duration `json:"renewDeadline"`
	RetryPeriod   Duration `json:"retryPeriod"`
}

// MCPConfig turns on MCP-over-xDS for istiod (README "MCP for istiod").
type MCPConfig struct {
	// Enabled serves the aggregate registry's ServiceEntries and
	// WorkloadEntries to istiod (MeshConfig configSources "xds://"); default
	// false.
	Enabled bool `json:"enabled"`
	// Address, when set, serves MCP on its own listener instead of
	// xds.address. istiod's xds:// client does server-verified TLS at most,
	// never mTLS, so a bridge whose xDS port requires client certificates
	// serves istiod here.
	Address string `json:"address,omitempty"`
	// TLS serves Address over server-only TLS (istiod's tlsSettings
	// {mode: SIMPLE}); only with Address.
	TLS *ServerTLSConfig `json:"tls,omitempty"`
}

// ServerTLSConfig is a listener's certificate and key (PEM files, re-read
// when they change) and, where the listener supports mTLS, the CA that
// client certificates must chain to.
type ServerTLSConfig struct {
	CertFile     string `json:"certFile"`
	KeyFile      string `json:"keyFile"`
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// RegistryConfig is one registry.
type RegistryConfig struct {
	Name         string        `json:"name"`
	Type         string        `json:"type"`
	HostTemplate string        `json:"hostTemplate,omitempty"`
	ServicePort  uint32        `json:"servicePort,omitempty"`
	Resolution   string        `json:"resolution,omitempty"`
	Consul       *ConsulConfig `json:"consul,omitempty"`
	File         *FileConfig   `json:"file,omitempty"`
}

// ConsulConfig is the consul block of a registry.
type ConsulConfig struct {
	// Address is host:port or an http(s) URL; "" means $CONSUL_HTTP_ADDR,
	// else 127.0.0.1:8500, as Consul's own tools do.
	Address     string    `json:"address,omitempty"`
	Datacenter  string    `json:"datacenter,omitempty"`
	Token       string    `json:"token,omitempty"`
	TokenFile   string    `json:"tokenFile,omitempty"`
	TLS         TLSConfig `json:"tls"`
	HealthyOnly *bool     `json:"healthyOnly,omitempty"`
	Services    []string  `json:"services,omitempty"`
	MaxWatches  int       `json:"maxWatches,omitempty"`
}

// TLSConfig is a client TLS configuration. Any field set means https.
type TLSConfig struct {
	CAFile             string `json:"caFile,omitempty"`
	CertFile           string `json:"certFile,omitempty"`
	KeyFile            string `json:"keyFile,omitempty"`
	ServerName         string `json:"serverName,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
}

// FileConfig is the file block of a registry.
type FileConfig struct {
	Path string `json:"path"`
}

// OutputConfig says how objects are produced.
type OutputConfig struct {
	Namespace string `json:"namespace"`
	Endpoints string `json:"endpoints"`
	Revision  string `json:"revision,omitempty"`
	// AllowLabels lets registry labels under reserved prefixes through
	// (translate.ReservedLabel: meshbridge.io, istio.io, kubernetes.io,
	// k8s.io and their subdomains): each entry an exact key or a prefix
	// ending in "/". Ownership and selection keys can never be allowed.
	AllowLabels []string `json:"allowLabels,omitempty"`
}

// XDSConfig is the xDS server's listener.
type XDSConfig struct {
	Address string `json:"address"`
	// TLS, when set, serves the port over TLS, and mTLS with clientCAFile
	// (clients must present a certificate it signed); plaintext is the
	// default, for loopback.
	TLS *ServerTLSConfig `json:"tls,omitempty"`
}

// HTTPConfig is the operator HTTP listeners.
type HTTPConfig struct {
	// Address serves /metrics, /healthz and /readyz.
	Address string `json:"address"`
	// DebugAddress serves /debug/* and pprof; default 127.0.0.1:15015.
	// They show every object served and the running configuration (secrets
	// redacted) and can profile the process: keep this on loopback.
	DebugAddress string `json:"debugAddress"`
}

// DebounceConfig is the push debounce (DESIGN.md §5).
type DebounceConfig struct {
	After Duration `json:"after"`
	Max   Duration `json:"max"`
	EDS   *bool    `json:"eds,omitempty"`
}

// SyncConfig bounds the wait for every registry's first listing.
type SyncConfig struct {
	Timeout Duration `json:"timeout"`
}

// Duration is a time.Duration written as a Go duration string ("100ms").
// A key that is absent takes its default; a key that is present keeps its
// value, zero included ("0s" turns the debounce off), and validation refuses
// a zero where it means nothing.
type Duration struct {
	time.Duration
	set bool
}

// UnmarshalJSON accepts "100ms"-style strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"100ms\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	d.Duration, d.set = v, true
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// redactedSecret replaces a secret's value in Redacted.
const redactedSecret = "<redacted>"

// Redacted returns a deep enough copy of c with every secret value (Consul
// tokens) replaced by "<redacted>", for /debug/config. Paths of secret files
// are kept: they are not secrets.
func (c *Config) Redacted() *Config {
	out := *c
	out.Registries = slices.Clone(c.Registries)
	for i := range out.Registries {
		if cc := out.Registries[i].Consul; cc != nil {
			cp := *cc
			if cp.Token != "" {
				cp.Token = redactedSecret
			}
			out.Registries[i].Consul = &cp
		}
	}
	return &out
}

// LoadConfig reads, defaults and validates a configuration file. Relative
// paths in it (file.path, consul.tokenFile, consul.tls files) are resolved
// against the file's directory, as Prometheus does, so a configuration and
// the files it names can move together.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var errs []error
	for _, f := range c.files() {
		if *f.path != "" && !filepath.IsAbs(*f.path) {
			*f.path = filepath.Join(dir, *f.path)
		}
		if err := f.check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.key, err))
		}
	}
	if len(errs) == 0 {
		errs = c.checkKeyPairs()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// checkKeyPairs loads every certificate and key pair the configuration
// names, so that a key that does not match its certificate is an error at
// load that names the keys, not a handshake failure later.
func (c *Config) checkKeyPairs() []error {
	var errs []error
	pair := func(key, cert, keyFile string) {
		if cert == "" || keyFile == "" {
			return
		}
		if _, err := tls.LoadX509KeyPair(cert, keyFile); err != nil {
			errs = append(errs, fmt.Errorf("%s: certFile and keyFile: %w", key, err))
		}
	}
	if t := c.XDS.TLS; t != nil {
		pair("xds.tls", t.CertFile, t.KeyFile)
	}
	if t := c.MCP.TLS; t != nil {
		pair("mcp.tls", t.CertFile, t.KeyFile)
	}
	for i, r := range c.Registries {
		if r.Consul != nil {
			pair("registries["+strconv.Itoa(i)+"].consul.tls", r.Consul.TLS.CertFile, r.Consul.TLS.KeyFile)
		}
	}
	return errs
}

// configFile is a path in the configuration: its key, and whether it must be
// readable when the configuration loads.
type configFile struct {
	key  string
	path *string
	// mustExist: a credential or certificate the bridge needs to start.
	// A registry's data file may appear later (the file registry waits).
	mustExist bool
	// pem: the file must hold at least one PEM block.
	pem bool
}

func (f configFile) check() error {
	if *f.path == "" || !f.mustExist {
		return nil
	}
	st, err := os.Stat(*f.path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", *f.path)
	}
	data, err := os.ReadFile(*f.path)
	if err != nil {
		return err
	}
	if f.pem {
		if block, _ := pem.Decode(data); block == nil {
			return fmt.Errorf("%s holds no PEM data", *f.path)
		}
	}
	return nil
}

// files lists every path the configuration names, for resolving relative
// paths (against the configuration's directory, as Prometheus does, so a
// configuration and the files it names move together) and for checking at
// load that credentials and certificates can be read.
func (c *Config) files() []configFile {
	fs := []configFile{{key: "kubernetes.kubeconfig", path: &c.Kubernetes.Kubeconfig, mustExist: c.Kubernetes.Enabled}}
	server := func(key string, t *ServerTLSConfig) {
		if t != nil {
			fs = append(fs,
				configFile{key: key + ".certFile", path: &t.CertFile, mustExist: true, pem: true},
				configFile{key: key + ".keyFile", path: &t.KeyFile, mustExist: true, pem: true},
				configFile{key: key + ".clientCAFile", path: &t.ClientCAFile, mustExist: true, pem: true})
		}
	}
	server("xds.tls", c.XDS.TLS)
	server("mcp.tls", c.MCP.TLS)
	for i := range c.Registries {
		r := &c.Registries[i]
		p := "registries[" + strconv.Itoa(i) + "]"
		if r.File != nil {
			fs = append(fs, configFile{key: p + ".file.path", path: &r.File.Path})
		}
		if r.Consul != nil {
			t := &r.Consul.TLS
			fs = append(fs,
				configFile{key: p + ".consul.tokenFile", path: &r.Consul.TokenFile, mustExist: true},
				configFile{key: p + ".consul.tls.caFile", path: &t.CAFile, mustExist: true, pem: true},
				configFile{key: p + ".consul.tls.certFile", path: &t.CertFile, mustExist: true, pem: true},
				configFile{key: p + ".consul.tls.keyFile", path: &t.KeyFile, mustExist: true, pem: true})
		}
	}
	return fs
}

// ParseConfig decodes, defaults and validates configuration YAML. Errors
// name the field path ("registries[0].consul.maxWatches: ...").
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := strict.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.setDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &c, nil
}

func (c *Config) setDefaults() {
	setIf(&c.Output.Namespace, "meshbridge")
	setIf(&c.Output.Endpoints, "workloadentry")
	setIf(&c.XDS.Address, "127.0.0.1:15010")
	setIf(&c.HTTP.Address, "127.0.0.1:15014")
	setIf(&c.HTTP.DebugAddress, "127.0.0.1:15015")
	durIf(&c.Debounce.After, 100*time.Millisecond)
	durIf(&c.Debounce.Max, 10*time.Second)
	durIf(&c.Sync.Timeout, 30*time.Second)
	if c.Debounce.EDS == nil {
		c.Debounce.EDS = ptr(true)
	}
	k := &c.Kubernetes
	if k.QPS == 0 {
		k.QPS = 50
	}
	if k.Burst == 0 {
		k.Burst = 100
	}
	durIf(&k.ResyncPeriod, 5*time.Minute)
	le := &k.LeaderElection
	if le.Enabled == nil {
		le.Enabled = ptr(true)
	}
	setIf(&le.LeaseName, "meshbridge")
	setIf(&le.LeaseNamespace, c.Output.Namespace)
	durIf(&le.LeaseDuration, 15*time.Second)
	durIf(&le.RenewDeadline, 10*time.Second)
	durIf(&le.RetryPeriod, 2*time.Second)
	for i := range c.Registries {
		r := &c.Registries[i]
		setIf(&r.Resolution, "STATIC")
		if r.Consul != nil {
			if r.Consul.HealthyOnly == nil {
				r.Consul.HealthyOnly = ptr(true)
			}
			if r.Consul.MaxWatches == 0 {
				r.Consul.MaxWatches = 100
			}
		}
	}
}

func setIf(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func durIf(d *Duration, v time.Duration) {
	if !d.set {
		d.Duration, d.set = v, true
	}
}

func ptr[T any](v T) *T { return &v }

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func (c *Config) validate() error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if len(c.Registries) == 0 {
		add("registries", "at least one registry is required")
	}
	names := map[string]int{}
	for i, r := range c.Registries {
		p := "registries[" + strconv.Itoa(i) + "]"
		if !dns1123Label.MatchString(r.Name) || len(r.Name) > 63 {
			add(p+".name", "%q is not a DNS-1123 label (lower-case alphanumerics and '-', at most 63)", r.Name)
		} else if j, dup := names[r.Name]; dup {
			add(p+".name", "%q is already used by registries[%d]", r.Name, j)
		}
		names[r.Name] = i
		validateRegistry(p, r, add)
	}
	if !dns1123Label.MatchString(c.Output.Namespace) {
		add("output.namespace", "%q is not a DNS-1123 label", c.Output.Namespace)
	}
	if c.Output.Endpoints != "workloadentry" && c.Output.Endpoints != "inline" {
		add("output.endpoints", "%q is not one of workloadentry, inline", c.Output.Endpoints)
	}
	checkHostPort("xds.address", c.XDS.Address, add)
	if t := c.XDS.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "") {
		add("xds.tls", "certFile and keyFile are both required (clientCAFile adds mTLS)")
	}
	validateMCP(c, add)
	checkHostPort("http.address", c.HTTP.Address, add)
	checkHostPort("http.debugAddress", c.HTTP.DebugAddress, add)
	if c.HTTP.DebugAddress == c.HTTP.Address {
		add("http.debugAddress", "%q is http.address too: the debug endpoints need their own listener (keep it on loopback)", c.HTTP.DebugAddress)
	}
	if err := translate.ValidateAllowLabels(c.Output.AllowLabels); err != nil {
		add("output.allowLabels", "%v", err)
	}
	// An explicit 0s turns the debounce off; negative durations mean nothing.
	if c.Debounce.After.Duration < 0 {
		add("debounce.after", "must not be negative (0s pushes without a quiet period)")
	}
	if c.Debounce.Max.Duration < c.Debounce.After.Duration {
		add("debounce.max", "%s is shorter than debounce.after (%s)", c.Debounce.Max, c.Debounce.After)
	}
	if c.Sync.Timeout.Duration <= 0 {
		add("sync.timeout", "must be positive: it bounds the wait for every registry's first listing before the xDS port opens")
	}
	validateKubernetes(&c.Kubernetes, add)
	return errors.Join(errs...)
}

// validateMCP checks mcp.address and mcp.tls: istiod's xds:// config-source
// client does server-verified TLS at most (Istio
// pilot/pkg/bootstrap/configcontroller.go), so the MCP listener cannot ask
// for client certificates.
func validateMCP(c *Config, add func(path, format string, args ...any)) {
	m := c.MCP
	if m.Address != "" {
		if !m.Enabled {
			add("mcp.address", "set, but mcp.enabled is false")
		}
		checkHostPort("mcp.address", m.Address, add)
		if m.Address == c.XDS.Address {
			add("mcp.address", "%q is xds.address too: leave mcp.address empty to serve MCP on the xDS port", m.Address)
		}
	}
	if t := m.TLS; t != nil {
		if m.Address == "" {
			add("mcp.tls", "needs mcp.address: without it MCP is served on xds.address, with xds.tls")
		}
		if t.CertFile == "" || t.KeyFile == "" {
			add("mcp.tls", "certFile and keyFile are both required")
		}
		if t.ClientCAFile != "" {
			add("mcp.tls.clientCAFile", "istiod's xds:// client cannot present a client certificate (it supports SIMPLE TLS only): protect the MCP port with a NetworkPolicy instead")
		}
	}
}

func validateKubernetes(k *KubernetesConfig, add func(path, format string, args ...any)) {
	if k.QPS < 0 {
		add("kubernetes.qps", "must not be negative")
	}
	if k.Burst < 0 {
		add("kubernetes.burst", "must not be negative")
	}
	if k.ResyncPeriod.Duration <= 0 {
		add("kubernetes.resyncPeriod", "must be positive")
	}
	le := k.LeaderElection
	if !dns1123Label.MatchString(le.LeaseName) {
		add("kubernetes.leaderElection.leaseName", "%q is not a DNS-1123 label", le.LeaseName)
	}
	if !dns1123Label.MatchString(le.LeaseNamespace) {
		add("kubernetes.leaderElection.leaseNamespace", "%q is not a DNS-1123 label", le.LeaseNamespace)
	}
	// client-go's own rules (leaderelection.NewLeaderElector), checked here
	// so the error names the keys.
	if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
		add("kubernetes.leaderElection.leaseDuration", "%s must be longer than renewDeadline (%s)", le.LeaseDuration, le.RenewDeadline)
	}
	if float64(le.RenewDeadline.Duration) <= 1.2*float64(le.RetryPeriod.Duration) {
		add("kubernetes.leaderElection.renewDeadline", "%s must be longer than 1.2 × retryPeriod (%s)", le.RenewDeadline, le.RetryPeriod)
	}
	if le.RetryPeriod.Duration <= 0 {
		add("kubernetes.leaderElection.retryPeriod", "must be positive")
	}
}

func validateRegistry(p string, r RegistryConfig, add func(path, format string, args ...any)) {
	if r.Resolution != "STATIC" && r.Resolution != "DNS" {
		add(p+".resolution", "%q is not one of STATIC, DNS", r.Resolution)
	}
	if r.ServicePort > 65535 {
		add(p+".servicePort", "%d is not a port (0 derives it, else 1-65535)", r.ServicePort)
	}
	switch r.Type {
	case "consul":
		if r.File != nil {
			add(p+".file", "not allowed for type consul")
		}
		if r.Consul == nil {
			add(p+".consul", "required for type consul")
			return
		}
		tlsSet := r.Consul.TLS != (TLSConfig{})
		switch u, err := url.Parse(r.Consul.Address); {
		case r.Consul.Address == "":
			// $CONSUL_HTTP_ADDR, else 127.0.0.1:8500 (package consul).
		case err == nil && (u.Scheme == "http" || u.Scheme == "https"):
			if u.Host == "" {
				add(p+".consul.address", "%q has no host", r.Consul.Address)
			}
			if u.Scheme == "http" && tlsSet {
				add(p+".consul.address", "%q is plain http, but consul.tls is set: use https:// or a host:port (any tls field means https)", r.Consul.Address)
			}
		default:
			checkHostPort(p+".consul.address", r.Consul.Address, add)
		}
		if r.Consul.Token != "" && r.Consul.TokenFile != "" {
			add(p+".consul.tokenFile", "set either token or tokenFile, not both")
		}
		if r.Consul.MaxWatches < 1 || r.Consul.MaxWatches > 190 {
			add(p+".consul.maxWatches", "%d is outside 1-190 (a Consul agent allows 200 connections per client)", r.Consul.MaxWatches)
		}
		if (r.Consul.TLS.CertFile == "") != (r.Consul.TLS.KeyFile == "") {
			add(p+".consul.tls", "certFile and keyFile go together")
		}
	case "file":
		if r.Consul != nil {
			add(p+".consul", "not allowed for type file")
		}
		if r.File == nil || r.File.Path == "" {
			add(p+".file.path", "required for type file")
		}
	default:
		add(p+".type", "%q is not one of consul, file", r.Type)
	}
}

func checkHostPort(path, addr string, add func(path, format string, args ...any)) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		add(path, "%q is not host:port", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		add(path, "%q has an invalid port", addr)
	}
	_ = host
}

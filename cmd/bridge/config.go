package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/meshbridge/meshbridge/internal/strict"
)

// Config is the operator's YAML configuration. Its keys are a contract
// (issue #2) documented in the README; keep them stable.
type Config struct {
	Registries []RegistryConfig `json:"registries"`
	Output     OutputConfig     `json:"output"`
	XDS        XDSConfig        `json:"xds"`
	HTTP       AddressConfig    `json:"http"`
	Debounce   DebounceConfig   `json:"debounce"`
	Sync       SyncConfig       `json:"sync"`
	MCP        MCPConfig        `json:"mcp"`
	Kubernetes KubernetesConfig `json:"kubernetes"`
}

// KubernetesConfig turns on the Kubernetes output (issue 4): the aggregate
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
	// garbage-collect and correct drift; default 5m. (Not in issue 4's key
	// list; added because operators tune it.)
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

// MCPConfig turns on MCP-over-xDS for istiod on the xDS port (issue 5).
type MCPConfig struct {
	// Enabled serves the aggregate registry's ServiceEntries and
	// WorkloadEntries to istiod (MeshConfig configSources "xds://"); default
	// false.
	Enabled bool `json:"enabled"`
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
	Address     string    `json:"address"`
	Datacenter  string    `json:"datacenter,omitempty"`
	Token       string    `json:"token,omitempty"`
	TokenFile   string    `json:"tokenFile,omitempty"`
	TLS         TLSConfig `json:"tls"`
	HealthyOnly *bool     `json:"healthyOnly,omitempty"`
	Services    []string  `json:"services,omitempty"`
	MaxWatches  int       `json:"maxWatches,omitempty"`
}

// TLSConfig is a client TLS configuration.
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
}

// XDSConfig is the xDS server's listener.
type XDSConfig struct {
	Address string `json:"address"`
	// TLS, when set, serves the port over TLS (mTLS with clientCAFile);
	// plaintext is the default for loopback.
	TLS *XDSTLSConfig `json:"tls,omitempty"`
}

// XDSTLSConfig names PEM files; they are re-read when they change.
type XDSTLSConfig struct {
	CertFile     string `json:"certFile"`
	KeyFile      string `json:"keyFile"`
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// AddressConfig is a listen address.
type AddressConfig struct {
	Address string `json:"address"`
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
type Duration struct{ time.Duration }

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
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

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
	c.resolvePaths(filepath.Dir(path))
	return c, nil
}

// resolvePaths makes relative paths relative to dir.
func (c *Config) resolvePaths(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Kubernetes.Kubeconfig)
	if t := c.XDS.TLS; t != nil {
		abs(&t.CertFile)
		abs(&t.KeyFile)
		abs(&t.ClientCAFile)
	}
	for i := range c.Registries {
		r := &c.Registries[i]
		if r.File != nil {
			abs(&r.File.Path)
		}
		if r.Consul != nil {
			abs(&r.Consul.TokenFile)
			abs(&r.Consul.TLS.CAFile)
			abs(&r.Consul.TLS.CertFile)
			abs(&r.Consul.TLS.KeyFile)
		}
	}
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
	if d.Duration == 0 {
		d.Duration = v
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
	checkHostPort("http.address", c.HTTP.Address, add)
	if c.Debounce.After.Duration < 0 {
		add("debounce.after", "must not be negative")
	}
	if c.Debounce.Max.Duration < c.Debounce.After.Duration {
		add("debounce.max", "%s is shorter than debounce.after (%s)", c.Debounce.Max, c.Debounce.After)
	}
	if c.Sync.Timeout.Duration < 0 {
		add("sync.timeout", "must not be negative")
	}
	validateKubernetes(&c.Kubernetes, add)
	return errors.Join(errs...)
}

func validateKubernetes(k *KubernetesConfig, add func(path, format string, args ...any)) {
	if k.QPS < 0 {
		add("kubernetes.qps", "must not be negative")
	}
	if k.Burst < 0 {
		add("kubernetes.burst", "must not be negative")
	}
	if k.ResyncPeriod.Duration < 0 {
		add("kubernetes.resyncPeriod", "must not be negative")
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
		if r.Consul.Address == "" {
			add(p+".consul.address", "required")
		} else if u, err := url.Parse(r.Consul.Address); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			if u.Host == "" {
				add(p+".consul.address", "%q has no host", r.Consul.Address)
			}
		} else {
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

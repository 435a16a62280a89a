package main

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
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
	// Outage is every registry's outage policy; a registry's own outage
	// block overrides the keys it sets.
	Outage OutageConfig `json:"outage"`
	State  StateConfig  `json:"state"`
	// ConflictPolicy decides a host several registries produce: merge (the
	// default: one ServiceEntry, every registry's instances) or first.
	ConflictPolicy string `json:"conflictPolicy"`
	// Log is the logging of meshbridge run; the --log-level and
	// --log-format flags, when given, override it.
	Log LogConfig `json:"log"`
	// Policy is the traffic policy served to proxyless clients over
	// direct xDS (README "Traffic policy").
	Policy PolicyConfig `json:"policy"`
}

// PolicyConfig is where traffic policy comes from (package policy).
type PolicyConfig struct {
	// Files are globs of YAML files of Istio DestinationRules and
	// VirtualServices, read in order and followed; a relative one is
	// resolved against the configuration's directory.
	Files []string `json:"files,omitempty"`
	// Kubernetes reads them from a cluster too. Neither set: no policy.
	Kubernetes PolicyKubernetesConfig `json:"kubernetes"`
}

// PolicyKubernetesConfig reads DestinationRules and VirtualServices from
// the cluster the kubernetes block connects to (kubernetes.kubeconfig, or
// in-cluster; kubernetes.qps and burst), with get, list and watch on them
// (the chart's RBAC when policy.kubernetes is on).
type PolicyKubernetesConfig struct {
	Enabled bool `json:"enabled"`
	// Namespaces are the namespaces read; empty reads every namespace
	// (a ClusterRole), else one Role per namespace.
	Namespaces []string `json:"namespaces,omitempty"`
}

// LogConfig is the log level and format.
type LogConfig struct {
	// Level is debug, info (the default), warn or error; it changes on a
	// reload.
	Level string `json:"level"`
	// Format is text (the default) or json.
	Format string `json:"format"`
}

// StateConfig is where meshbridge persists each registry's last complete
// listing, to serve it when a registry cannot be read at start (README
// "Outages"). meshbridge translate never persists.
type StateConfig struct {
	// Dir is a directory meshbridge creates (0700) if missing; "" (the
	// default) persists nothing.
	Dir string `json:"dir,omitempty"`
}

// OutageConfig is an outage policy (syncer.OutagePolicy; README
// "Outages"): hold-down of disappearances read after a reconnection, and
// the delete guard.
type OutageConfig struct {
	// HoldDown (default 10s; 0s turns it off).
	HoldDown Duration `json:"holdDown"`
	// MaxDeleteRatio (default 0.5, in (0, 1]; 1 turns the guard off) and
	// DeleteGuardFloor (default 10): a listing that would remove more than
	// both is held.
	MaxDeleteRatio   *float64 `json:"maxDeleteRatio,omitempty"`
	DeleteGuardFloor *int     `json:"deleteGuardFloor,omitempty"`
	// DeleteGuardTimeout (default 5m, > 0): a held listing applies after it.
	DeleteGuardTimeout Duration `json:"deleteGuardTimeout"`
}

// over returns base with the keys o sets.
func (o *OutageConfig) over(base syncer.OutagePolicy) syncer.OutagePolicy {
	if o == nil {
		return base
	}
	if o.HoldDown.IsSet() {
		base.HoldDown = o.HoldDown.Duration
	}
	if o.MaxDeleteRatio != nil {
		base.MaxDeleteRatio = *o.MaxDeleteRatio
	}
	if o.DeleteGuardFloor != nil {
		base.DeleteGuardFloor = *o.DeleteGuardFloor
	}
	if o.DeleteGuardTimeout.IsSet() {
		base.DeleteGuardTimeout = o.DeleteGuardTimeout.Duration
	}
	return base
}

// validate reports the invalid keys, named under path.
func (o *OutageConfig) validate(path string, add func(path, format string, args ...any)) {
	if o == nil {
		return
	}
	if o.HoldDown.Duration < 0 {
		add(path+".holdDown", "must not be negative")
	}
	if r := o.MaxDeleteRatio; r != nil && (*r <= 0 || *r > 1) {
		add(path+".maxDeleteRatio", "%v is outside (0, 1] (1 turns the delete guard off)", *r)
	}
	if f := o.DeleteGuardFloor; f != nil && *f < 0 {
		add(path+".deleteGuardFloor", "must not be negative")
	}
	if o.DeleteGuardTimeout.IsSet() && o.DeleteGuardTimeout.Duration <= 0 {
		add(path+".deleteGuardTimeout", "must be positive")
	}
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

// RegistryConfig is one registry: the keys every type shares, and the block
// named by its type (registries[i].consul, registries[i].file, ...), which
// the type's own package defines, defaults and validates (registries.Type,
// listed in registryTypes).
type RegistryConfig struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	HostTemplate string `json:"hostTemplate,omitempty"`
	ServicePort  uint32 `json:"servicePort,omitempty"`
	Resolution   string `json:"resolution,omitempty"`
	// Outage overrides the global outage policy's keys it sets.
	Outage *OutageConfig `json:"outage,omitempty"`
	// Block is the type's configuration block; a block left out is the
	// type's defaults.
	Block registries.Config `json:"-"`
}

// registryCommon is RegistryConfig without its JSON methods.
type registryCommon RegistryConfig

// UnmarshalJSON decodes the shared keys and the block named by type, with
// errors naming the field ("consul.adress: unknown field"); a block of
// another type is an error.
func (r *RegistryConfig) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	common := make(map[string]json.RawMessage, len(raw))
	var blocks []string
	for k, v := range raw {
		if _, ok := registryTypes.Lookup(k); ok {
			blocks = append(blocks, k)
		} else {
			common[k] = v
		}
	}
	js, err := json.Marshal(common)
	if err != nil {
		return err
	}
	if err := strict.UnmarshalJSON(js, (*registryCommon)(r)); err != nil {
		return err
	}
	t, ok := registryTypes.Lookup(r.Type)
	if !ok {
		return &strict.PathError{Path: "type", Err: fmt.Errorf("%q is not one of %s", r.Type, registryTypes.Names())}
	}
	slices.Sort(blocks)
	for _, k := range blocks {
		if k != r.Type {
			return &strict.PathError{Path: k, Err: fmt.Errorf("not allowed for type %s", r.Type)}
		}
	}
	r.Block = t.NewConfig()
	if block, ok := raw[r.Type]; ok {
		if err := strict.UnmarshalJSON(block, r.Block); err != nil {
			var pe *strict.PathError
			if errors.As(err, &pe) {
				return &strict.PathError{Path: r.Type + "." + pe.Path, Err: pe.Err}
			}
			return &strict.PathError{Path: r.Type, Err: err}
		}
	}
	return nil
}

// MarshalJSON writes the shared keys, then the block under its type's key.
func (r RegistryConfig) MarshalJSON() ([]byte, error) {
	common, err := marshalPlain(registryCommon(r))
	if err != nil || r.Block == nil {
		return common, err
	}
	block, err := marshalPlain(r.Block)
	if err != nil {
		return nil, err
	}
	key, _ := json.Marshal(r.Type)
	out := append(common[:len(common)-1:len(common)-1], ',')
	out = append(append(append(out, key...), ':'), block...)
	return append(out, '}'), nil
}

// marshalPlain is json.Marshal without HTML escaping ("<redacted>" stays
// readable) and without the trailing newline.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
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
	// Instance, when set, is written as label meshbridge.io/instance on
	// every object, and the Kubernetes writer owns only objects carrying
	// it: bridges sharing a namespace with different instances never touch
	// each other's objects.
	Instance string `json:"instance,omitempty"`
}

// XDSConfig is the xDS server's listener.
type XDSConfig struct {
	Address string `json:"address"`
	// TLS, when set, serves the port over TLS, and mTLS with clientCAFile
	// (clients must present a certificate it signed); plaintext is the
	// default, for loopback.
	TLS *ServerTLSConfig `json:"tls,omitempty"`
	// DNSRefreshRate is how often the DNS names of endpoints (instances
	// registered by hostname, under resolution AUTO or DNS) are resolved again for
	// direct xDS, which serves the addresses they resolve to (package
	// xds/dns, dns.Options.RefreshRate); default 30s.
	DNSRefreshRate Duration `json:"dnsRefreshRate"`
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

// DebounceConfig is the push debounce (docs/design.md §5).
type DebounceConfig struct {
	After Duration `json:"after"`
	Max   Duration `json:"max"`
	// EDSMax caps the wait of EDS-only pushes (xds.Debounce.EDSMax); absent,
	// 500ms kept within [after, max].
	EDSMax Duration `json:"edsMax"`
	EDS    *bool    `json:"eds,omitempty"`
}

// SyncConfig bounds the wait for every registry's first listing.
type SyncConfig struct {
	Timeout Duration `json:"timeout"`
}

// Duration is a configured duration: an absent key takes its default, a
// present one keeps its value, zero included (strict.Duration).
type Duration = strict.Duration

// Redacted returns a deep enough copy of c with every secret value (Consul
// tokens, ...: registries.Config.Redacted) replaced by "<redacted>", for
// /debug/config. Paths of secret files
// are kept: they are not secrets.
func (c *Config) Redacted() *Config {
	out := *c
	out.Registries = slices.Clone(c.Registries)
	for i := range out.Registries {
		if b := out.Registries[i].Block; b != nil {
			out.Registries[i].Block = b.Redacted()
		}
	}
	return &out
}

// LoadConfig reads, defaults and validates a configuration file. Relative
// paths in it (file.path, consul.tokenFile, consul.tls files) are resolved
// against the file's directory, as Prometheus does, so a configuration and
// the files it names can move together.
func LoadConfig(path string) (*Config, error) {
	c, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, f := range c.files() {
		if err := checkFile(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Key, err))
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

// readConfig reads, defaults and validates a configuration file and
// resolves its relative paths, without reading the files it names: what
// meshbridge bootstrap needs of it (the xds block), which runs where the
// registries' secrets are not.
func readConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for _, f := range c.files() {
		if *f.Path != "" && !filepath.IsAbs(*f.Path) {
			*f.Path = filepath.Join(dir, *f.Path)
		}
	}
	return c, nil
}

// checkKeyPairs loads every certificate and key pair the configuration
// names, so that a key that does not match its certificate is an error at
// load that names the keys, not a handshake failure later. Registries are
// built (not started) for the same reason.
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
		if err := checkCAFile(t.ClientCAFile); err != nil {
			errs = append(errs, fmt.Errorf("xds.tls.clientCAFile: %w", err))
		}
	}
	if t := c.MCP.TLS; t != nil {
		pair("mcp.tls", t.CertFile, t.KeyFile)
	}
	// A registry's own files (a client certificate and its key, ...) are
	// checked by building it once: its constructor reads them.
	for i, r := range c.Registries {
		if _, err := r.Block.New(r.Name, slog.New(slog.DiscardHandler)); err != nil {
			errs = append(errs, fmt.Errorf("registries[%d]: %w", i, err))
		}
	}
	return errs
}

// checkCAFile checks that a CA file ("" is none) holds a certificate: a
// key or a certificate request there would otherwise stop the xDS
// listener when it starts, after every registry synced.
func checkCAFile(path string) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil
	}
	var found []string
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		found = append(found, block.Type)
	}
	return fmt.Errorf("%s holds no CA certificate (PEM blocks found: %s)", path, cmp.Or(strings.Join(found, ", "), "none"))
}

// checkFile reads a file the configuration names when it must exist at
// load (registries.File).
func checkFile(f registries.File) error {
	if *f.Path == "" || !f.MustExist {
		return nil
	}
	st, err := os.Stat(*f.Path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", *f.Path)
	}
	data, err := os.ReadFile(*f.Path)
	if err != nil {
		return err
	}
	if f.PEM {
		if block, _ := pem.Decode(data); block == nil {
			return fmt.Errorf("%s holds no PEM data", *f.Path)
		}
	}
	return nil
}

// files lists every path the configuration names, for resolving relative
// paths (against the configuration's directory, as Prometheus does, so a
// configuration and the files it names move together) and for checking at
// load that credentials and certificates can be read.
func (c *Config) files() []registries.File {
	fs := []registries.File{
		{Key: "kubernetes.kubeconfig", Path: &c.Kubernetes.Kubeconfig, MustExist: c.Kubernetes.Enabled || c.Policy.Kubernetes.Enabled},
		{Key: "state.dir", Path: &c.State.Dir},
	}
	for i := range c.Policy.Files {
		fs = append(fs, registries.File{Key: "policy.files[" + strconv.Itoa(i) + "]", Path: &c.Policy.Files[i]})
	}
	server := func(key string, t *ServerTLSConfig) {
		if t != nil {
			fs = append(fs,
				registries.File{Key: key + ".certFile", Path: &t.CertFile, MustExist: true, PEM: true},
				registries.File{Key: key + ".keyFile", Path: &t.KeyFile, MustExist: true, PEM: true},
				registries.File{Key: key + ".clientCAFile", Path: &t.ClientCAFile, MustExist: true, PEM: true})
		}
	}
	server("xds.tls", c.XDS.TLS)
	server("mcp.tls", c.MCP.TLS)
	for i, r := range c.Registries {
		if r.Block == nil {
			continue
		}
		p := "registries[" + strconv.Itoa(i) + "]." + r.Type + "."
		for _, f := range r.Block.Files() {
			f.Key = p + f.Key
			fs = append(fs, f)
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
	durIf(&c.XDS.DNSRefreshRate, 30*time.Second)
	durIf(&c.Debounce.After, 100*time.Millisecond)
	durIf(&c.Debounce.Max, 10*time.Second)
	durIf(&c.Debounce.EDSMax, xds.ClampEDSMax(500*time.Millisecond, c.Debounce.After.Duration, c.Debounce.Max.Duration))
	durIf(&c.Sync.Timeout, 30*time.Second)
	setIf(&c.ConflictPolicy, syncer.ConflictMerge)
	setIf(&c.Log.Level, "info")
	setIf(&c.Log.Format, "text")
	o := &c.Outage
	durIf(&o.HoldDown, syncer.DefaultOutagePolicy.HoldDown)
	durIf(&o.DeleteGuardTimeout, syncer.DefaultOutagePolicy.DeleteGuardTimeout)
	if o.MaxDeleteRatio == nil {
		o.MaxDeleteRatio = ptr(syncer.DefaultOutagePolicy.MaxDeleteRatio)
	}
	if o.DeleteGuardFloor == nil {
		o.DeleteGuardFloor = ptr(syncer.DefaultOutagePolicy.DeleteGuardFloor)
	}
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
		setIf(&r.Resolution, string(translate.ResolutionAuto))
		if r.Block != nil {
			r.Block.Default()
		}
	}
}

func setIf(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func durIf(d *Duration, v time.Duration) { d.Default(v) }

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
		r.Outage.validate(p+".outage", add)
	}
	c.Outage.validate("outage", add)
	if c.ConflictPolicy != syncer.ConflictMerge && c.ConflictPolicy != syncer.ConflictFirst {
		add("conflictPolicy", "%q is not one of merge, first", c.ConflictPolicy)
	}
	if !dns1123Label.MatchString(c.Output.Namespace) {
		add("output.namespace", "%q is not a DNS-1123 label", c.Output.Namespace)
	}
	if v := c.Output.Instance; v != "" && len(validation.IsValidLabelValue(v)) > 0 {
		add("output.instance", "%q is not a valid label value: %s", v, strings.Join(validation.IsValidLabelValue(v), "; "))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Log.Level)); err != nil {
		add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if f := c.Log.Format; f != "text" && f != "json" {
		add("log.format", "%q is not one of text, json", f)
	}
	if err := translate.ValidateLabelValue(c.Output.Revision); err != nil {
		add("output.revision", "%v", err)
	}
	if c.Output.Endpoints != "workloadentry" && c.Output.Endpoints != "inline" {
		add("output.endpoints", "%q is not one of workloadentry, inline", c.Output.Endpoints)
	}
	checkHostPort("xds.address", c.XDS.Address, add)
	if t := c.XDS.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "") {
		add("xds.tls", "certFile and keyFile are both required (clientCAFile adds mTLS)")
	}
	if c.XDS.DNSRefreshRate.Duration < time.Second {
		add("xds.dnsRefreshRate", "%s is under 1s: every DNS name of an endpoint is looked up at this rate", c.XDS.DNSRefreshRate)
	}
	validateMCP(c, add)
	checkHostPort("http.address", c.HTTP.Address, add)
	checkHostPort("http.debugAddress", c.HTTP.DebugAddress, add)
	checkDistinctListeners(c, add)
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
	if d := c.Debounce; d.EDSMax.Duration < d.After.Duration || d.EDSMax.Duration > d.Max.Duration {
		add("debounce.edsMax", "%s is not within debounce.after (%s) and debounce.max (%s)", d.EDSMax, d.After, d.Max)
	}
	if c.Sync.Timeout.Duration <= 0 {
		add("sync.timeout", "must be positive: it bounds the wait for every registry's first listing before the xDS port opens")
	}
	validateKubernetes(&c.Kubernetes, add)
	for i, g := range c.Policy.Files {
		if err := policy.ValidateGlob(g); err != nil {
			add("policy.files["+strconv.Itoa(i)+"]", "%v", err)
		}
	}
	seen := map[string]bool{}
	for i, ns := range c.Policy.Kubernetes.Namespaces {
		key := "policy.kubernetes.namespaces[" + strconv.Itoa(i) + "]"
		switch {
		case !c.Policy.Kubernetes.Enabled:
			add(key, "is set but policy.kubernetes.enabled is false")
		case len(validation.IsDNS1123Label(ns)) > 0:
			add(key, "%q is not a namespace name (a DNS-1123 label)", ns)
		case seen[ns]:
			add(key, "%q is listed twice", ns)
		}
		seen[ns] = true
	}
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
	if r.Resolution != string(translate.ResolutionAuto) && r.Resolution != "STATIC" && r.Resolution != "DNS" {
		add(p+".resolution", "%q is not one of AUTO, STATIC, DNS", r.Resolution)
	}
	if r.ServicePort > 65535 {
		add(p+".servicePort", "%d is not a port (0 derives it, else 1-65535)", r.ServicePort)
	}
	if r.Block == nil {
		add(p+".type", "required: one of %s", registryTypes.Names())
		return
	}
	// A block that names its hosts by a setting of its own (a zookeeper
	// block's layout) says so itself, over its type's HostsFrom.
	t, _ := registryTypes.Lookup(r.Type)
	hostsFrom := t.HostsFrom
	if b, ok := r.Block.(interface{ HostsFrom() string }); ok {
		hostsFrom = b.HostsFrom()
	}
	if r.HostTemplate != "" && hostsFrom != "" {
		add(p+".hostTemplate", "a %s registry names its services with %s, not hostTemplate", r.Type, hostsFrom)
	}
	if r.HostTemplate != "" {
		if _, err := translate.New(translate.Options{Registry: "r", Namespace: "ns", HostTemplate: r.HostTemplate}); err != nil {
			_, msg := fieldOf(err)
			add(p+".hostTemplate", "%s", msg)
		}
	}
	// Credentials in a URL are refused, and never echoed: the block's own
	// errors show such a URL with its user info redacted.
	hide := userInfoURLs(r.Block)
	var redact []string
	for _, u := range hide {
		add(p+"."+r.Type+"."+u.key, "%q carries user info: meshbridge sends no credentials from an address "+
			"(they would be dropped before any request, and shown wherever the address is); use the registry's "+
			"credential keys (a token or tokenFile, username and passwordFile) instead", u.redacted)
		redact = append(redact, u.raw, u.redacted)
	}
	scrub := strings.NewReplacer(redact...)
	// A *registries.FieldError names its key inside the block: the path is
	// the block's, then the key; any other error is the block's.
	for _, err := range r.Block.Validate() {
		field, msg := fieldOf(err)
		add(strings.TrimSuffix(p+"."+r.Type+"."+field, "."), "%s", scrub.Replace(msg.Error()))
	}
}

// fieldOf splits a *registries.FieldError into its key and what is wrong;
// any other error has no key ("").
func fieldOf(err error) (string, error) {
	var fe *registries.FieldError
	if errors.As(err, &fe) {
		return fe.Field, fe.Err
	}
	return "", err
}

// userInfoURL is an address in a registry block that carries user info:
// its key relative to the block ("address", "addresses[1]"), its value,
// and the value with the user info replaced by "<redacted>".
type userInfoURL struct{ key, raw, redacted string }

// addressKey matches the names of the keys whose values are addresses
// (address, addresses, servers, a URL), besides any value with a scheme.
var addressKey = regexp.MustCompile(`(?i)(address|addresses|servers?|urls?|endpoints?)$`)

// userInfoURLs returns the values of block that carry user info
// ("http://user:password@host", "user@host:port"): every string of an
// address key, or of any key when it has a scheme ("scheme://"), in key
// order. The rule holds for every registry type, present and future.
func userInfoURLs(block registries.Config) []userInfoURL {
	data, err := json.Marshal(block)
	if err != nil {
		return nil
	}
	var tree any
	if json.Unmarshal(data, &tree) != nil {
		return nil
	}
	var out []userInfoURL
	var walk func(key, name string, v any)
	walk = func(key, name string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(strings.TrimPrefix(key+"."+k, "."), k, v[k])
			}
		case []any:
			for i, e := range v {
				walk(key+"["+strconv.Itoa(i)+"]", name, e)
			}
		case string:
			withScheme := strings.Contains(v, "://")
			if !withScheme && !addressKey.MatchString(name) {
				return
			}
			ref := v
			if !withScheme {
				ref = "//" + v
			}
			u, err := url.Parse(ref)
			if err != nil || u.User == nil {
				return
			}
			// The user info ends at the authority's last "@".
			scheme, rest, _ := strings.Cut(v, "://")
			if !withScheme {
				scheme, rest = "", v
			}
			authority := rest
			if i := strings.IndexAny(rest, "/?#"); i >= 0 {
				authority = rest[:i]
			}
			at := strings.LastIndex(authority, "@")
			redacted := registries.Redacted + rest[at:]
			if withScheme {
				redacted = scheme + "://" + redacted
			}
			out = append(out, userInfoURL{key: key, raw: v, redacted: redacted})
		}
	}
	walk("", "", tree)
	return out
}

// checkDistinctListeners reports a listener whose address another listener
// takes (the same port on the same host, or on every interface), which
// would fail to bind: found here, with both keys named, rather than when
// the second one listens.
func checkDistinctListeners(c *Config, add func(path, format string, args ...any)) {
	listeners := []struct{ key, addr, hint string }{
		{"xds.address", c.XDS.Address, ""},
		{"http.address", c.HTTP.Address, ""},
		{"http.debugAddress", c.HTTP.DebugAddress, ": the debug endpoints need their own listener (keep it on loopback)"},
		{"mcp.address", c.MCP.Address, ": leave mcp.address empty to serve MCP on the xDS port"},
	}
	for i, l := range listeners {
		for _, other := range listeners[:i] {
			if sameListener(l.addr, other.addr) {
				add(l.key, "%q is %s too%s", l.addr, other.key, l.hint)
				break
			}
		}
	}
}

// sameListener reports whether two listen addresses would take the same
// port: equal ports other than 0, on equal hosts or where one host is
// every interface.
func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" || pa == "" {
		return false
	}
	everyInterface := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	return ha == hb || everyInterface(ha) || everyInterface(hb)
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

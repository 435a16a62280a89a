package nacos

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// redacted replaces a secret in every text that leaves the registry.
const redacted = registries.Redacted

// Registry follows the configured namespaces and groups of one Nacos
// deployment. Create it with New; Run it once.
type Registry struct {
	cfg     Config
	logger  *slog.Logger
	servers []server
	secrets secrets
	tls     *tls.Config // nil without TLS
	agent   *httpAgent
	health  *registries.Health
	dubbo   *dubbo.Builder // Dubbo services, under cfg.Dubbo (doc.go rule 8)

	mu         sync.Mutex // guards status, namespaces and session
	status     Status
	namespaces map[string]*nsStatus
	// session is the running Run's; nil before Run.
	session *registries.Session
}

var (
	_ registries.Registry       = (*Registry)(nil)
	_ registries.HealthReporter = (*Registry)(nil)
)

// Status is what /debug/registryz shows for a Nacos registry: the Nacos view
// and the read health (registries.HealthStatus: up, since, lastSuccess,
// errors, lastError, lastErrorTime; zero times omitted). It never holds a
// password or secret key.
type Status struct {
	Registry string `json:"registry"`
	// Addresses are the servers' HTTP addresses; GRPCAddresses the gRPC
	// addresses dialled.
	Addresses     []string `json:"addresses"`
	GRPCAddresses []string `json:"grpcAddresses"`
	Username      string   `json:"username,omitempty"`
	Synced        bool     `json:"synced"`
	// Services and Instances count what was emitted and not removed.
	Services  int `json:"services"`
	Instances int `json:"instances"`
	// Subscribed counts the services whose pushes the server sends now.
	Subscribed int `json:"subscribed"`
	// Skipped counts the services left out on purpose (Dubbo services
	// while dubbo.enabled is false), also counted in
	// meshbridge_registry_skipped_total.
	Skipped int `json:"skipped"`
	// ReconcileCorrections counts reconcile queries that changed a service
	// no push had updated (doc.go rule 5).
	ReconcileCorrections uint64 `json:"reconcileCorrections"`
	// Protected counts the services whose last read reached their protect
	// threshold: the server lists all their enabled instances as healthy,
	// and all are served (doc.go rule 6); also
	// meshbridge_registry_protected_services.
	Protected int `json:"protected"`
	// Namespaces shows each namespace's connection.
	Namespaces []NamespaceStatus `json:"namespaces"`
	registries.HealthStatus
}

// NamespaceStatus is one namespace's connection.
type NamespaceStatus struct {
	Namespace string `json:"namespace"`
	// Connected is true while the namespace's gRPC connection is up.
	Connected bool `json:"connected"`
	// Reconnects counts connections after the first.
	Reconnects int `json:"reconnects"`
}

// nsStatus is the mutable part of a NamespaceStatus; conn reports
// Connected live.
type nsStatus struct {
	reconnects int
	conn       func() *conn
}

// New validates cfg, applies defaults and the environment fallbacks (see
// Config), reads the secret and TLS files and returns a Registry. Errors
// name the invalid fields, e.g. `tls.caFile: open ca.pem: no such file or
// directory`; secrets never appear in them.
func New(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults(os.Getenv)
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("nacos registry %q: %w", cfg.Name, err)
	}
	sec, err := readSecrets(cfg)
	if err != nil {
		return nil, fmt.Errorf("nacos registry %q: %w", cfg.Name, err)
	}
	tlsCfg, err := clientTLS(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("nacos registry %q: %w", cfg.Name, err)
	}
	builder, err := dubbo.NewBuilder(cfg.Dubbo) // validate checked its templates
	if err != nil {
		return nil, fmt.Errorf("nacos registry %q: dubbo: %w", cfg.Name, err)
	}
	servers := make([]server, len(cfg.Addresses))
	st := Status{Registry: cfg.Name, Username: sec.username}
	for i, a := range cfg.Addresses {
		servers[i], _ = parseAddress(a, cfg.GRPCPort) // validate checked it
		st.Addresses = append(st.Addresses, servers[i].httpAddress())
		st.GRPCAddresses = append(st.GRPCAddresses, servers[i].grpcAddress())
	}
	logger := cfg.Logger.With("component", "nacos", "registry", cfg.Name)
	return &Registry{
		cfg:        cfg,
		logger:     logger,
		servers:    servers,
		secrets:    sec,
		tls:        tlsCfg,
		agent:      newHTTPAgent(tlsCfg, sec.username),
		health:     registries.NewHealth(cfg.Name, logger),
		dubbo:      builder,
		namespaces: map[string]*nsStatus{},
		status:     st,
	}, nil
}

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.cfg.Name }

// Run implements registries.Registry: it follows every configured namespace
// until ctx is done and returns nil then, after every goroutine it started
// has stopped and every connection is closed. Connection and read failures
// are reported through the Sink and Health, and retried.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	attachSDKLog(r, r.logger, r.redactions)
	defer detachSDKLog(r)
	r.logger.Info("Started watching Nacos", "addresses", r.status.Addresses, "grpcAddresses", r.status.GRPCAddresses,
		"namespaces", r.cfg.Namespaces, "groups", r.cfg.Groups)
	var scopes []registries.Scope
	for _, ns := range r.cfg.Namespaces {
		for _, g := range r.cfg.Groups {
			scopes = append(scopes, registries.ScopeOf(ns, g))
		}
	}
	session := registries.NewSession(r.health, registries.ReporterConfig{Registry: r.cfg.Name, Sink: sink, Scopes: scopes,
		ReconnectGrace: reconnectGrace(r.cfg), Logger: r.logger})
	r.mu.Lock()
	r.session = session
	registries.SetProtected(r.cfg.Name, r.status.Protected)
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, ns := range r.cfg.Namespaces {
		w := newNSWatcher(r, session, ns)
		r.mu.Lock()
		r.namespaces[ns] = &nsStatus{conn: w.getConn}
		r.mu.Unlock()
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	r.logger.Info("Stopped watching Nacos")
	return nil
}

// Status returns a copy of the registry's current status.
func (r *Registry) Status() Status {
	r.mu.Lock()
	st := r.status
	st.Addresses = append([]string(nil), st.Addresses...)
	st.GRPCAddresses = append([]string(nil), st.GRPCAddresses...)
	st.Namespaces = nil
	for _, ns := range r.cfg.Namespaces {
		n := r.namespaces[ns]
		if n == nil {
			st.Namespaces = append(st.Namespaces, NamespaceStatus{Namespace: ns})
			continue
		}
		c := n.conn()
		st.Namespaces = append(st.Namespaces, NamespaceStatus{
			Namespace: ns, Connected: c != nil && c.connected(), Reconnects: n.reconnects,
		})
	}
	rep := r.session
	r.mu.Unlock()
	if rep != nil {
		st.Services, st.Instances = rep.Counts()
		st.Synced = rep.Synced()
	}
	st.HealthStatus = r.Health()
	return st
}

// Health implements registries.HealthReporter: the running watcher's
// (registries.Session.Health, with its failing readers).
func (r *Registry) Health() registries.HealthStatus {
	r.mu.Lock()
	s := r.session
	r.mu.Unlock()
	return s.Health(r.health)
}

// WatcherStatus implements registries.StatusReporter: Status.
func (r *Registry) WatcherStatus() any { return r.Status() }

// Readers, for registries.Session.
const readerLogin = "login"

func connectReader(ns string) string     { return "connect/" + ns }
func livenessReader(ns string) string    { return "liveness/" + ns }
func listReader(ns, group string) string { return "list/" + ns + "/" + group }
func serviceReader(ns, group, name string) string {
	return "service/" + ns + "/" + group + "/" + name
}

// Error reasons for meshbridge_registry_errors_total. Low-cardinality.
const (
	reasonConnect   = "connect"
	reasonList      = "list"
	reasonRead      = "read"
	reasonLogin     = "login"
	reasonForbidden = "forbidden"
)

// noteReconnect counts a namespace's reconnection.
func (r *Registry) noteReconnect(ns string) {
	r.mu.Lock()
	if n := r.namespaces[ns]; n != nil {
		n.reconnects++
	}
	r.mu.Unlock()
}

// noteCounts moves the Status counters the Reporter does not keep by the
// given deltas.
func (r *Registry) noteCounts(subscribed, skipped int, corrections uint64) {
	r.mu.Lock()
	r.status.Subscribed += subscribed
	r.status.Skipped += skipped
	r.status.ReconcileCorrections += corrections
	r.mu.Unlock()
}

// noteProtected moves Status.Protected and its gauge by delta.
func (r *Registry) noteProtected(delta int) {
	r.mu.Lock()
	r.status.Protected += delta
	registries.SetProtected(r.cfg.Name, r.status.Protected)
	r.mu.Unlock()
}

// redact removes every configured secret from an error's text, as a second
// line of defence (secrets travel in request bodies and headers, never in
// an error the registry builds). The result still unwraps to err.
func (r *Registry) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := redactSecrets(err.Error(), r.redactions())
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

// redactions are the values redacted from every text that leaves the
// registry: the configured secrets and the access tokens logins returned.
func (r *Registry) redactions() []string {
	return append(r.secrets.values(), r.agent.secrets()...)
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// serverConfigs are the SDK's server list: HTTP (https with TLS) for the
// login, gRPC at each server's gRPC port.
func (r *Registry) serverConfigs() []constant.ServerConfig {
	scheme := "http"
	if r.tls != nil {
		scheme = "https"
	}
	out := make([]constant.ServerConfig, len(r.servers))
	for i, s := range r.servers {
		out[i] = constant.ServerConfig{
			Scheme: scheme, ContextPath: r.cfg.ContextPath, IpAddr: s.host,
			Port: uint64(s.httpPort), GrpcPort: uint64(s.grpcPort),
		}
	}
	return out
}

// clientConfig is the SDK's client configuration for one namespace.
// TLSCfg.Appointed keeps the nacos_remote_client_rpc_tls_* environment
// variables from overriding it (rpc.GrpcClient.getEnvTLSConfig).
func (r *Registry) clientConfig(namespace string) constant.ClientConfig {
	return constant.ClientConfig{
		NamespaceId:         namespace,
		TimeoutMs:           requestTimeoutMs,
		AppName:             appName,
		Username:            r.secrets.username,
		Password:            r.secrets.password,
		AccessKey:           r.secrets.accessKey,
		SecretKey:           r.secrets.secretKey,
		CacheDir:            r.cfg.CacheDir,
		LogDir:              r.cfg.CacheDir,
		NotLoadCacheAtStart: true,
		// Unused by this registry's reads (it keeps no SDK cache), set in
		// case an SDK path consults it: an empty list is a list.
		UpdateCacheWhenEmpty: true,
		TLSCfg: constant.TLSConfig{
			Appointed: true,
			Enable:    r.tls != nil,
			CaFile:    r.cfg.TLS.CAFile,
			CertFile:  r.cfg.TLS.CertFile,
			KeyFile:   r.cfg.TLS.KeyFile,
		},
	}
}

// baseURL is a server's HTTP API base, <scheme>://<host:port><contextPath>.
func (r *Registry) baseURL(s server) string {
	u := url.URL{Scheme: "http", Host: s.httpAddress(), Path: strings.TrimSuffix(r.cfg.ContextPath, "/")}
	if r.tls != nil {
		u.Scheme = "https"
	}
	return u.String()
}

// diagnose explains why a namespace's connection did not come up: a server
// whose HTTP API says it is Nacos 1.x is a permanent error naming it
// (errNacos1), anything else a transient one naming the gRPC addresses.
func (r *Registry) diagnose(ctx context.Context) error {
	var grpcAddrs []string
	for _, s := range r.servers {
		grpcAddrs = append(grpcAddrs, s.grpcAddress())
		v, err := r.agent.probeVersion(ctx, r.baseURL(s))
		if err == nil && strings.HasPrefix(v, "1.") {
			return registries.Permanent(fmt.Errorf("Nacos at %s is version %s: %w, and this registry reads Nacos over gRPC "+
				"(Nacos 2.x, gRPC port %s); upgrade the server, or set grpcPort if a 2.x server's gRPC port is mapped elsewhere",
				s.httpAddress(), v, errNacos1, strconv.Itoa(s.grpcPort)))
		}
	}
	if err := r.probeGRPCPorts(ctx); err != nil {
		return fmt.Errorf("cannot connect to the Nacos gRPC port: %w", err)
	}
	return fmt.Errorf("cannot connect to the Nacos gRPC port at %s", strings.Join(grpcAddrs, ", "))
}

// probeGRPCPorts probes every server's gRPC port (probeGRPC) and returns
// the first failure, naming its address, or nil when every port answers.
func (r *Registry) probeGRPCPorts(ctx context.Context) error {
	for _, s := range r.servers {
		if err := r.probeGRPC(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s.grpcAddress(), err)
		}
	}
	return nil
}

// grpcProbeTimeout bounds diagnose's own connection to a gRPC port.
const grpcProbeTimeout = 3 * time.Second

// probeGRPC connects to s's gRPC port as the SDK would, with TLS when
// configured (a handshake that verifies the server as the SDK's does), and
// returns why it fails: what the SDK only logs, e.g. "x509: certificate
// signed by unknown authority" or "connection refused". nil when the port
// answers.
func (r *Registry) probeGRPC(ctx context.Context, s server) error {
	ctx, cancel := context.WithTimeout(ctx, grpcProbeTimeout)
	defer cancel()
	dial := (&net.Dialer{}).DialContext
	if r.tls != nil {
		cfg := r.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = s.host
		}
		dial = (&tls.Dialer{Config: cfg}).DialContext
	}
	c, err := dial(ctx, "tcp", s.grpcAddress())
	if err == nil {
		c.Close()
	}
	return err
}

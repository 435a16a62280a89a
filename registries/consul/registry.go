package consul

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
)

// Registry follows one Consul datacenter. Create it with New; Run it once.
type Registry struct {
	cfg    Config
	logger *slog.Logger
	ep     endpoint
	tls    *tls.Config // nil for plain HTTP
	health *registries.Health
	// anonymous is true when no token is configured anywhere (fields or
	// environment): the agent applies its anonymous token.
	anonymous bool

	mu     sync.Mutex // guards status and session
	status Status
	// session is the running watcher's; nil before Run.
	session *registries.Session
}

// Readers, for registries.Session: the catalog loop (with the datacenter
// lookup), the state/any loop, and each service's reads (its watch or its
// re-reads).
const (
	readerCatalog = reasonCatalog
	readerState   = reasonState
)

func serviceReader(name string) string { return "service/" + name }

var (
	_ registries.Registry       = (*Registry)(nil)
	_ registries.HealthReporter = (*Registry)(nil)
)

// Status is what /debug/registryz shows for a Consul registry: the Consul
// view and the read health (registries.HealthStatus: up, lastSuccess,
// errors, lastError, lastErrorTime; zero times omitted). It never holds the
// ACL token.
type Status struct {
	Registry string `json:"registry"`
	// Address is the agent's address as used: scheme://host:port.
	Address    string `json:"address"`
	Datacenter string `json:"datacenter,omitempty"`
	Synced     bool   `json:"synced"`
	Services   int    `json:"services"`
	Instances  int    `json:"instances"`
	// Watched and Polled count the followed services with their own
	// blocking query and those followed through /v1/health/state/any.
	Watched int `json:"watched"`
	Polled  int `json:"polled"`
	// ACLFiltered is true while the last catalog listing was cut by ACLs:
	// the agent said it filtered results (X-Consul-Results-Filtered-By-ACLs),
	// or it listed nothing to a registry without a token under a deny
	// default policy (X-Consul-Default-ACL-Policy).
	ACLFiltered bool `json:"aclFiltered"`
	registries.HealthStatus
}

// New validates cfg, applies defaults and the environment fallbacks (see
// Config), reads the TLS files and returns a Registry. Errors name the
// invalid fields or variables, e.g. `tls.caFile: open ca.pem: no such file
// or directory`; the token never appears in them.
func New(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults(os.Getenv)
	ep, epErr := resolveEndpoint(cfg, os.Getenv)
	if err := errors.Join(cfg.validate(), epErr); err != nil {
		return nil, fmt.Errorf("consul registry %q: %w", cfg.Name, err)
	}
	tlsCfg, err := clientTLS(ep)
	if err != nil {
		return nil, fmt.Errorf("consul registry %q: %w", cfg.Name, err)
	}
	logger := cfg.Logger.With("component", "consul", "registry", cfg.Name)
	address := ep.scheme + "://" + ep.hostport
	return &Registry{
		cfg:    cfg,
		logger: logger,
		ep:     ep,
		tls:    tlsCfg,
		health: registries.NewHealth(cfg.Name, logger),
		anonymous: cfg.Token == "" && cfg.TokenFile == "" &&
			os.Getenv(api.HTTPTokenEnvName) == "" && os.Getenv(api.HTTPTokenFileEnvName) == "",
		status: Status{Registry: cfg.Name, Address: address, Datacenter: cfg.Datacenter},
	}, nil
}

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.cfg.Name }

// Run implements registries.Registry: it watches Consul until ctx is done and
// returns nil then, after every goroutine it started has stopped. It returns
// an error only when the API client cannot be built (e.g. an unreadable token
// file).
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	tr := newTransport(r.cfg, r.tls)
	client, err := newClient(r.cfg, r.ep, tr)
	if err != nil {
		return fmt.Errorf("consul registry %q: build API client: %w", r.cfg.Name, err)
	}
	probe, err := newProbeClient(r.cfg, r.ep, tr)
	if err != nil {
		return fmt.Errorf("consul registry %q: build API client: %w", r.cfg.Name, err)
	}
	r.logger.Info("Started watching Consul", "address", r.status.Address, "maxWatches", r.cfg.MaxWatches)
	w := newWatcher(r, client, sink)
	w.run(ctx, probe)
	r.logger.Info("Stopped watching Consul")
	return nil
}

// Status returns a copy of the registry's current status.
func (r *Registry) Status() Status {
	r.mu.Lock()
	st := r.status
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

// noteSession makes Status count what the session sent.
func (r *Registry) noteSession(s *registries.Session) {
	r.mu.Lock()
	r.session = s
	r.mu.Unlock()
}

// noteReaders records how many services are watched and polled.
func (r *Registry) noteReaders(watched, polled int) {
	r.mu.Lock()
	r.status.Watched, r.status.Polled = watched, polled
	r.mu.Unlock()
}

// aclPolicy is the README's policy for the registry's token ("Consul ACL
// policy"), quoted in the ACL warning.
const aclPolicy = `service_prefix "" { policy = "read" } node_prefix "" { policy = "read" } agent_prefix "" { policy = "read" }`

// noteACL records whether a catalog listing of listed services (after the
// kind filter, before the allow-list) was cut by ACLs, and logs when that
// starts and when it ends, never per read. With an allow-list the token is
// expected to be narrowed to it (README), so a filtered listing is logged at
// info; without one, or when the anonymous token sees nothing, at warn.
func (r *Registry) noteACL(meta *api.QueryMeta, listed int) {
	anonymousDenied := r.anonymous && listed == 0 && meta.DefaultACLPolicy == "deny"
	hidden := anonymousDenied || meta.ResultsFilteredByACLs
	r.mu.Lock()
	was := r.status.ACLFiltered
	r.status.ACLFiltered = hidden
	r.mu.Unlock()
	switch {
	case hidden == was:
	case !hidden:
		r.logger.Info("Consul ACLs no longer hide services from this registry")
	case anonymousDenied:
		r.logger.Warn("Consul lists no service: no ACL token is configured and the agent's default ACL policy is deny; "+
			"set consul.token or consul.tokenFile to a token with the README's Consul ACL policy",
			"policy", aclPolicy)
	case len(r.cfg.Services) > 0:
		r.logger.Info("Consul ACLs hide some services from this registry's token; expected when the token is narrowed to consul.services",
			"policy", aclPolicy)
	default:
		r.logger.Warn("Consul ACLs hide some services from this registry's token; they are not served. "+
			"Give the token the README's Consul ACL policy",
			"policy", aclPolicy)
	}
}

// redact removes the configured token from an error's text, as a second
// line of defence: the API client sends the token in a header, never in a
// URL. The result still unwraps to err (its status code, its permanence).
func (r *Registry) redact(err error) error {
	if r.cfg.Token == "" || !strings.Contains(err.Error(), r.cfg.Token) {
		return err
	}
	return redactedError{msg: strings.ReplaceAll(err.Error(), r.cfg.Token, "<redacted>"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

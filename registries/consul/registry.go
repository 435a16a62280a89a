package consul

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

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

	mu     sync.Mutex // guards status and failing
	status Status
	// failing holds the readers whose last read failed: readerCatalog,
	// readerState, serviceReader(name).
	failing map[string]bool
	// recovered is closed, and replaced, when a failing reader gets through
	// while others still fail: they stop waiting out their backoff.
	recovered chan struct{}
	// rep is the running watcher's Reporter; nil before Run.
	rep *registries.Reporter
}

// Readers, for Registry.failing: the catalog loop (with the datacenter
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
		cfg:       cfg,
		logger:    logger,
		ep:        ep,
		tls:       tlsCfg,
		health:    registries.NewHealth(cfg.Name, logger),
		failing:   map[string]bool{},
		recovered: make(chan struct{}),
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
	sink = r.health.Track(sink)
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
	rep := r.rep
	r.mu.Unlock()
	if rep != nil {
		st.Services, st.Instances = rep.Counts()
		st.Synced = rep.Synced()
	}
	st.HealthStatus = r.health.Status()
	return st
}

// Health implements registries.HealthReporter.
func (r *Registry) Health() registries.HealthStatus { return r.health.Status() }

// WatcherStatus implements registries.StatusReporter: Status.
func (r *Registry) WatcherStatus() any { return r.Status() }

// noteFailure records a failed read by loop (reasonCatalog, reasonState,
// or reasonHealth for a read of service) with Health, and returns err marked
// permanent when retrying cannot fix it and with the token redacted: the
// error to put in a Snapshot.
func (r *Registry) noteFailure(loop, service string, err error) error {
	reader := loop
	if service != "" {
		reader = serviceReader(service)
	}
	err = r.redact(classify(withoutQuery(err)))
	logged := err
	if service != "" {
		logged = fmt.Errorf("read Consul service %q: %w", service, err)
	}
	r.noteFailureSince(reader, errorReason(loop, err), logged, time.Time{})
	return err
}

// noteFailureSince records a failed read by reader with Health, under
// reason, as of since (registries.Health.FailSince).
func (r *Registry) noteFailureSince(reader, reason string, err error, since time.Time) {
	r.mu.Lock()
	r.failing[reader] = true
	r.mu.Unlock()
	r.health.FailSince(reason, r.redact(err), since)
}

// withoutQuery drops the query string from the URL of a failed request's
// error: it holds the blocking query's index and wait, which change from
// one failed read to the next, and an error's text is what tells one
// failure from another (registries.Reporter sends a registry-wide error
// once per run of the same text).
func withoutQuery(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil || u.RawQuery == "" {
		return err
	}
	u.RawQuery = ""
	return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
}

// noteOK records a successful read by reader. The registry is up again
// (registries.Health.OK) only when no reader's last read failed: a read that
// succeeds says nothing about the others, and a stopping agent answers some
// endpoints while it fails others (its streaming health queries first), so
// reporting every success would log the registry up and down several times
// in one outage.
//
// A reader that failed and now got through wakes the other failing readers
// (see recovery), so that the registry catches up within one round trip of
// the agent's return rather than after the longest backoff (10 s).
func (r *Registry) noteOK(reader string) {
	r.mu.Lock()
	recovered := r.failing[reader]
	delete(r.failing, reader)
	up := len(r.failing) == 0
	if recovered && !up {
		close(r.recovered)
		r.recovered = make(chan struct{})
	}
	r.mu.Unlock()
	if up {
		r.health.OK()
	}
}

// recovery returns a channel closed when a failing reader next gets
// through. A reader takes it before each read and waits on it with its
// backoff after a failure.
func (r *Registry) recovery() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recovered
}

// forgetReader drops a reader that stopped for good (its service left the
// catalog or the allow-list) from the failing ones.
func (r *Registry) forgetReader(reader string) {
	r.mu.Lock()
	delete(r.failing, reader)
	r.mu.Unlock()
}

// noteReporter makes Status count what rep sent.
func (r *Registry) noteReporter(rep *registries.Reporter) {
	r.mu.Lock()
	r.rep = rep
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

package consul

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// Registry follows one Consul datacenter. Create it with New; Run it once.
type Registry struct {
	cfg    Config
	logger *slog.Logger

	mu     sync.Mutex // guards status
	status Status
}

var _ registries.Registry = (*Registry)(nil)

// Status is what /debug/registryz shows for a Consul registry. It never holds
// the ACL token.
type Status struct {
	Registry      string    `json:"registry"`
	Address       string    `json:"address"`
	Datacenter    string    `json:"datacenter,omitempty"`
	Synced        bool      `json:"synced"`
	LastSync      time.Time `json:"lastSync"` // last successful read of any kind
	Services      int       `json:"services"`
	Instances     int       `json:"instances"`
	Errors        uint64    `json:"errors"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime"`
}

// New validates cfg, applies defaults and returns a Registry. Errors name the
// invalid fields.
func New(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("consul registry %q: %w", cfg.Name, err)
	}
	return &Registry{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "consul", "registry", cfg.Name),
		status: Status{Registry: cfg.Name, Address: cfg.Address, Datacenter: cfg.Datacenter},
	}, nil
}

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.cfg.Name }

// Run implements registries.Registry: it watches Consul until ctx is done and
// returns nil then, after every goroutine it started has stopped. It returns
// an error only when the API client cannot be built (e.g. an unreadable token
// file or CA file).
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	client, err := newClient(r.cfg)
	if err != nil {
		return fmt.Errorf("consul registry %q: build API client: %w", r.cfg.Name, err)
	}
	r.logger.Info("Started watching Consul", "address", r.cfg.Address, "maxWatches", r.cfg.MaxWatches)
	w := newWatcher(r, client, sink)
	w.run(ctx)
	r.logger.Info("Stopped watching Consul")
	return nil
}

// Status returns a copy of the registry's current status.
func (r *Registry) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// noteRead records a successful read.
func (r *Registry) noteRead(at time.Time) {
	r.mu.Lock()
	r.status.LastSync = at
	r.mu.Unlock()
}

// noteError counts a failed read under its reason and logs it.
func (r *Registry) noteError(loop, service string, err error) {
	reason := errorReason(loop, err)
	errorsTotal.WithLabelValues(r.cfg.Name, reason).Inc()
	msg := r.redact(err.Error())
	r.mu.Lock()
	r.status.Errors++
	r.status.LastError = msg
	r.status.LastErrorTime = time.Now()
	r.mu.Unlock()
	r.logger.Warn("Failed to read Consul", "reason", reason, "service", service, "err", msg)
}

// noteCounts moves the service and instance counts by the given deltas.
func (r *Registry) noteCounts(services, instances int) {
	if services == 0 && instances == 0 {
		return
	}
	r.mu.Lock()
	r.status.Services += services
	r.status.Instances += instances
	r.mu.Unlock()
}

func (r *Registry) noteSynced() {
	r.mu.Lock()
	r.status.Synced = true
	r.mu.Unlock()
	r.logger.Info("Synced Consul services")
}

// redact removes the configured token from text that may echo a request,
// as a second line of defence: the API client sends the token in a header.
func (r *Registry) redact(s string) string {
	if r.cfg.Token != "" {
		s = strings.ReplaceAll(s, r.cfg.Token, "<redacted>")
	}
	return s
}

package registries

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// DefaultReminder is how often Health repeats, at warn level, that a registry
// is still down.
const DefaultReminder = time.Minute

// Health tracks whether one registry's reads succeed, and makes an outage
// visible without flooding the log (docs/design.md §8, "one log line down and one
// up"):
//
//  1. The first failed read after a success (or before any) logs one warning
//     and sets meshbridge_registry_up to 0. The warning says what is served
//     meanwhile: nothing of the registry before its first complete listing
//     (Listed), its last-known-good state after. It names no cause it cannot
//     know ("unreachable" would be false of a file with a typo): the reason
//     and the error do. While the registry stays down, further failures log
//     at debug, with one warning reminder per Reminder that counts them.
//  2. The first successful read after a failure logs one info line with the
//     outage's duration and failure count and sets meshbridge_registry_up to
//     1.
//  3. Every failure is counted in meshbridge_registry_errors_total under its
//     reason, whatever is logged.
//
// A registry's Session (session.go) calls OK when none of its readers is
// failing and Fail after every failed read, from any goroutine; a watcher
// never calls Health itself. Health does not decide what is served: the
// consumer keeps last-known-good state on a Snapshot with Err.
type Health struct {
	registry string
	log      *slog.Logger
	// Reminder is the interval of the "still down" warning; DefaultReminder
	// when 0. Set it before the first call.
	Reminder time.Duration
	// now is time.Now; tests replace it.
	now func() time.Time

	mu           sync.Mutex
	st           HealthStatus
	down         bool // a failure was logged and no success followed
	listed       bool // the registry delivered a complete listing (Listed)
	downSince    time.Time
	failures     int // failed reads since downSince
	lastReminder time.Time
}

// HealthStatus is a registry's read health as /debug/registryz shows it.
type HealthStatus struct {
	// Up is true once a read succeeded and no read failed since.
	Up bool `json:"up"`
	// Since is when the registry last went up or down; zero before the first
	// read finished.
	Since time.Time `json:"since,omitzero"`
	// LastSuccess is the time of the last successful read; zero if none.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// Errors counts failed reads since the registry started.
	Errors uint64 `json:"errors"`
	// LastError is the error of the last failed read while the registry is
	// down; it clears when a read succeeds. LastErrorTime stays, so the last
	// failure's time is kept.
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
	// Failing names the readers whose last read failed, sorted, for a
	// registry read by several (Session.Health: Consul's catalog, state,
	// liveness and service/<name> readers, Nacos's per namespace and
	// group): what keeps the registry down.
	Failing []string `json:"failing,omitempty"`
}

// HealthReporter is implemented by registries that track their read health;
// /debug/registryz and /readyz show it.
type HealthReporter interface {
	Health() HealthStatus
}

// StatusReporter is implemented by registries that show their own state on
// /debug/registryz (under "watcher"): a JSON-encodable value that holds no
// secret.
type StatusReporter interface {
	WatcherStatus() any
}

// NewHealth returns the Health of the named registry, logging to log (with a
// "registry" attribute already set or not: NewHealth adds none).
func NewHealth(registry string, log *slog.Logger) *Health {
	if log == nil {
		log = slog.Default()
	}
	// A new registry is down until its first read; a registry rebuilt with
	// a new configuration (a reload) keeps its state until the new watcher
	// reads, and one built by a reload that then fails is never run: its
	// series stays the running registry's.
	if _, known := upSeries.LoadOrStore(registry, struct{}{}); !known {
		registryUp.WithLabelValues(registry).Set(0)
	}
	_, listed := listedRegistries.Load(registry)
	return &Health{registry: registry, log: log, now: time.Now, listed: listed}
}

// listedRegistries are the registries that delivered a complete listing
// since they were configured: a registry rebuilt by a reload keeps serving
// its services until its new watcher lists them.
var listedRegistries sync.Map // registry name → struct{}

// track returns sink, telling h when the registry delivered its first
// complete listing (Sink.Synced): from then on a failed read serves its
// last-known-good state. NewSession runs a registry's Sink through it.
func (h *Health) track(sink Sink) Sink { return trackedSink{Sink: sink, h: h} }

// trackedSink is a Sink whose Synced also calls Health.Listed.
type trackedSink struct {
	Sink
	h *Health
}

func (s trackedSink) Synced(registry string) {
	s.h.Listed()
	s.Sink.Synced(registry)
}

// Listed records that the registry delivered its first complete listing
// (the Sink track returns calls it): from then on a failed read serves its last-known-good
// state. Before, nothing of it is served.
func (h *Health) Listed() {
	listedRegistries.Store(h.registry, struct{}{})
	h.mu.Lock()
	h.listed = true
	h.mu.Unlock()
}

// OK records a successful read.
func (h *Health) OK() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.st.LastSuccess = now
	if h.st.Up {
		return
	}
	h.st.Up, h.st.Since, h.st.LastError = true, now, ""
	registryUp.WithLabelValues(h.registry).Set(1)
	if h.down {
		h.log.Info("Registry read succeeded again", "downFor", now.Sub(h.downSince).Round(time.Millisecond),
			"failedReads", h.failures)
	}
	h.down, h.failures = false, 0
}

// Fail records a failed read: reason is a low-cardinality label for
// meshbridge_registry_errors_total ("catalog", "health", "read", "parse",
// "forbidden", ...), err the cause. A registry whose errors may echo a secret
// redacts err before passing it.
func (h *Health) Fail(reason string, err error) { h.FailSince(reason, err, time.Time{}) }

// FailSince is Fail for a failure known to have started before it was
// seen, at since (a hung server found by a probe that went unanswered,
// Liveness): the outage counts from the earliest since of its failures
// (one that comes after another failure took the registry down moves the
// start earlier), so that the "reachable again" line's downFor is the
// outage's true duration. A zero since, or one in the future, is now.
func (h *Health) FailSince(reason string, err error, since time.Time) {
	RegistryErrors.WithLabelValues(h.registry, reason).Inc()
	msg := err.Error()
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.st.Errors++
	h.st.LastError, h.st.LastErrorTime = msg, now
	h.failures++
	if since.IsZero() || since.After(now) {
		since = now
	}
	if !h.down {
		h.down, h.downSince, h.lastReminder = true, since, now
		h.st.Up, h.st.Since = false, since
		registryUp.WithLabelValues(h.registry).Set(0)
		if !h.listed {
			h.log.Warn("Cannot read the registry; none of its services is served until it delivers a complete "+
				"listing (with state.dir, its persisted listing is, once sync.timeout passed)",
				"reason", reason, "err", msg, "permanent", IsPermanent(err))
		} else {
			attrs := []any{"reason", reason, "err", msg}
			if !h.st.LastSuccess.IsZero() { // zero: rebuilt by a reload, its predecessor's listing served
				attrs = append(attrs, "lastSuccess", h.st.LastSuccess)
			}
			h.log.Warn("Registry read failed; serving its last-known-good state until a read succeeds", attrs...)
		}
		return
	}
	if since.Before(h.downSince) {
		// A probe sent earlier than the failure that took the registry
		// down went unanswered: the outage started then.
		h.downSince, h.st.Since = since, since
	}
	reminder := h.Reminder
	if reminder <= 0 {
		reminder = DefaultReminder
	}
	if now.Sub(h.lastReminder) >= reminder {
		h.lastReminder = now
		h.log.Warn("Registry reads still fail", "downFor", now.Sub(h.downSince).Round(time.Second),
			"failedReads", h.failures, "reason", reason, "err", msg)
		return
	}
	h.log.Debug("Registry read failed", "reason", reason, "err", msg)
}

// Status returns a copy of the current status.
func (h *Health) Status() HealthStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

// permanentError marks an error that retrying will not fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying will not fix without an
// operator: a 403 from the registry, a registry file that does not exist or
// is a directory, a certificate the server refuses. A running bridge keeps
// retrying it (the operator may fix it); a one-shot read (meshbridge
// translate) stops at once and reports it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

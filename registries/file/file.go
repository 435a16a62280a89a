package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/meshbridge/meshbridge/registries"
)

// Config configures a file Registry.
type Config struct {
	// Name is the registry's name.
	Name string
	// Path is the YAML file to read.
	Path string
	// Resync is how often the file is re-read even without a change
	// notification; default 30s.
	Resync time.Duration
	Logger *slog.Logger
}

// Registry is a registries.Registry backed by a YAML file.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	health *registries.Health
	last   map[string]registries.Service // by name: what was emitted last; nil before the first good read
	sum    [sha256.Size]byte
	parser itemParser // parses the file, reusing the last good read's unchanged services
	// failed is the text of the error snapshot sent for the current run of
	// failures; "" while reads succeed.
	failed string
}

var (
	_ registries.Registry       = (*Registry)(nil)
	_ registries.HealthReporter = (*Registry)(nil)
)

// New returns a file registry. It fails when Name or Path is empty; the file
// itself is first read by Run.
func New(cfg Config) (*Registry, error) {
	if cfg.Name == "" {
		return nil, errors.New("file registry: name is required")
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("file registry %q: file.path is required", cfg.Name)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", "file", "registry", cfg.Name)
	return &Registry{cfg: cfg, log: log, health: registries.NewHealth(cfg.Name, log)}, nil
}

// Health implements registries.HealthReporter: up while the last read of
// the file succeeded; lastError is the last failure's, cleared by the next
// good read.
func (r *Registry) Health() registries.HealthStatus { return r.health.Status() }

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.cfg.Name }

// Run implements registries.Registry. The registry counts as synced after
// the first successful read; until then, read errors are retried at every
// change notification and resync. A directory that cannot be watched (it
// does not exist yet, say) is retried at every resync, the file read at
// each. Run returns an error only when no watcher can be created at all.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file registry %q: watch: %w", r.cfg.Name, err)
	}
	defer w.Close()
	dir := filepath.Dir(r.cfg.Path)
	watching, warned := false, false
	watch := func() {
		if watching {
			return
		}
		err := w.Add(dir)
		switch {
		case err == nil:
			watching = true
		case errors.Is(err, fs.ErrNotExist):
			// The read reports the missing path; retried at each resync.
		case !warned:
			warned = true
			r.log.Warn("Cannot watch the registry file's directory; relying on periodic re-reads",
				"dir", dir, "resync", r.cfg.Resync, "err", err)
		}
	}
	watch()
	synced := false
	reload := func() {
		if r.reload(sink) && !synced {
			synced = true
			sink.Synced(r.cfg.Name)
		}
	}
	reload()
	tick := time.NewTicker(r.cfg.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			// A ConfigMap swaps "..data"; an editor renames over the file.
			if base := filepath.Base(ev.Name); base == filepath.Base(r.cfg.Path) || base == "..data" {
				reload()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Warn("File watch reported an error; relying on periodic re-reads", "err", err)
		case <-tick.C:
			watch()
			reload()
		}
	}
}

// reload reads the file and emits what changed. It reports whether the file
// was read successfully.
func (r *Registry) reload(sink registries.Sink) bool {
	data, err := readFile(r.cfg.Path)
	if err != nil {
		r.fail(sink, "read", err)
		return false
	}
	sum := sha256.Sum256(data)
	if r.last != nil && bytes.Equal(sum[:], r.sum[:]) {
		r.ok()
		return true
	}
	services, err := r.parser.parse(data)
	if err != nil {
		r.fail(sink, "parse", fmt.Errorf("%s: %w", r.cfg.Path, err))
		return false
	}
	r.sum = sum
	now := time.Now()
	keys := make([]string, len(services))
	for i, svc := range services {
		keys[i] = svc.Key()
	}
	sink.Listing(r.cfg.Name, "", keys)
	next := make(map[string]registries.Service, len(services))
	for _, svc := range services {
		next[svc.Name] = svc
		if prev, ok := r.last[svc.Name]; ok && reflect.DeepEqual(prev, svc) {
			continue
		}
		sink.Snapshot(registries.Snapshot{Registry: r.cfg.Name, Service: svc, Observed: now})
	}
	for name, prev := range r.last {
		if _, ok := next[name]; !ok {
			sink.Snapshot(registries.Snapshot{Registry: r.cfg.Name, Service: prev, Removed: true, Observed: now})
		}
	}
	r.last = next
	r.ok()
	r.log.Info("Read registry file", "count", len(services))
	return true
}

// readFile reads path, marking with registries.Permanent the failures that
// only an operator fixes: the path does not exist, is a directory, or may
// not be read. Other errors (a transient I/O error) are retried as they are.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return nil, registries.Permanent(err)
	}
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		return nil, registries.Permanent(fmt.Errorf("%s is a directory; file.path names a YAML file", path))
	}
	return nil, err
}

func (r *Registry) ok() {
	r.failed = ""
	r.health.OK()
}

// fail records a failed read with Health (one log line when the registry
// goes down, see registries.Health) and sends the registry-wide error
// snapshot (an empty Service.Name) once per run of failures with the same
// error: the last good listing, if any, stays.
func (r *Registry) fail(sink registries.Sink, reason string, err error) {
	r.health.Fail(reason, err)
	if msg := err.Error(); msg != r.failed {
		r.failed = msg
		sink.Snapshot(registries.Snapshot{Registry: r.cfg.Name, Err: err, Observed: time.Now()})
	}
}

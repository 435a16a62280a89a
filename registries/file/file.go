package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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
	cfg  Config
	log  *slog.Logger
	last map[string]registries.Service // by name: what was emitted last
	sum  [sha256.Size]byte
}

var _ registries.Registry = (*Registry)(nil)

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
	return &Registry{cfg: cfg, log: cfg.Logger.With("component", "file", "registry", cfg.Name)}, nil
}

// Name implements registries.Registry.
func (r *Registry) Name() string { return r.cfg.Name }

// Run implements registries.Registry. The registry counts as synced after
// the first successful read; until then, read errors are retried at every
// change notification and resync.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file registry %q: watch: %w", r.cfg.Name, err)
	}
	defer w.Close()
	dir := filepath.Dir(r.cfg.Path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("file registry %q: watch directory %s: %w", r.cfg.Name, dir, err)
	}
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
			reload()
		}
	}
}

// reload reads the file and emits what changed. It reports whether the file
// was read successfully.
func (r *Registry) reload(sink registries.Sink) bool {
	data, err := os.ReadFile(r.cfg.Path)
	if err != nil {
		r.fail(sink, "read", err)
		return false
	}
	sum := sha256.Sum256(data)
	if r.last != nil && bytes.Equal(sum[:], r.sum[:]) {
		return true
	}
	services, err := Parse(data)
	if err != nil {
		r.fail(sink, "parse", fmt.Errorf("%s: %w", r.cfg.Path, err))
		return false
	}
	r.sum = sum
	now := time.Now()
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
	r.log.Info("Read registry file", "count", len(services))
	return true
}

func (r *Registry) fail(sink registries.Sink, reason string, err error) {
	registries.RegistryErrors.WithLabelValues(r.cfg.Name, reason).Inc()
	r.log.Error("Kept the last good listing; the registry file could not be used", "reason", reason, "err", err)
	sink.Snapshot(registries.Snapshot{Registry: r.cfg.Name, Err: err, Observed: time.Now()})
}

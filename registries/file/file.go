package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/meshbridge/meshbridge/internal/filewatch"
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
	// Settle is how long the file must go without a change notification
	// before it is read (doc.go rule 4): a writer that rewrites the file in
	// place (truncate, then write) is done by then. Default DefaultSettle.
	Settle time.Duration
	// MaxSize is the largest file read, in bytes; a larger one is a read
	// error naming both sizes. Default DefaultMaxSize.
	MaxSize int64
	Logger  *slog.Logger
}

// DefaultMaxSize is Config.MaxSize's default (file.maxSize, 32Mi): about
// 13,000 services of ten labelled instances, whose read peaks at about
// 290 MB of resident memory (measured on bench_test.go's layout), within
// the chart's 512Mi limit.
const DefaultMaxSize = 32 << 20

// DefaultSettle is Config.Settle's default: far longer than cp, a shell
// redirection or an editor takes to rewrite a file of thousands of
// services, short enough to add little to a change's latency.
const DefaultSettle = 200 * time.Millisecond

// Registry is a registries.Registry backed by a YAML file.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	health *registries.Health
	read   bool // a read succeeded; sum is its content's
	sum    [sha256.Size]byte
	// failing: the last read failed, so the next good one is reported
	// even when its content is the last good read's.
	failing bool
	parser  itemParser // parses the file, reusing the last good read's unchanged services
	// skipped are the services the last good read skipped (noteSkipped),
	// by host and reason.
	skipped map[string]bool
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
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
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
// change notification and resync. The file is followed by
// internal/filewatch's loop (doc.go rule 4). Run returns an error only
// when no watcher can be created at all.
func (r *Registry) Run(ctx context.Context, sink registries.Sink) error {
	rep := registries.NewSession(r.health, registries.ReporterConfig{Registry: r.cfg.Name, Sink: sink, Logger: r.log})
	loop := filewatch.Loop{
		Dirs:   []string{filepath.Dir(r.cfg.Path)},
		Match:  func(base string) bool { return base == filepath.Base(r.cfg.Path) },
		Settle: r.cfg.Settle, Resync: r.cfg.Resync,
		Read:   func() { r.reload(rep) },
		Logger: r.log,
	}
	if err := loop.Run(ctx); err != nil {
		return fmt.Errorf("file registry %q: %w", r.cfg.Name, err)
	}
	return nil
}

// reload reads the file and reports what it lists. It reports whether the
// file was read successfully.
func (r *Registry) reload(rep *registries.Session) bool {
	now := time.Now()
	data, err := readFile(r.cfg.Path, r.cfg.MaxSize)
	if err != nil {
		r.fail(rep, "read", err, now)
		return false
	}
	sum := sha256.Sum256(data)
	if r.read && !r.failing && bytes.Equal(sum[:], r.sum[:]) {
		rep.ReadOK(readerFile)
		return true
	}
	services, skipped, err := r.parser.parse(data)
	if err != nil {
		err = fmt.Errorf("%s: %w", r.cfg.Path, err)
		if !errors.Is(err, ErrIncomplete) {
			// Only an edit of the file fixes it (doc.go rule 1).
			err = registries.Permanent(err)
		}
		r.fail(rep, "parse", err, now)
		return false
	}
	r.noteSkipped(skipped)
	r.sum, r.read, r.failing = sum, true, false
	keys := make([]registries.ServiceKey, len(services))
	for i, svc := range services {
		keys[i] = svc.Key()
	}
	rep.Listing(registries.Scope{}, keys, now)
	for _, svc := range services {
		rep.Read(svc, now)
	}
	rep.ReadOK(readerFile)
	r.log.Info("Read registry file", "count", len(services))
	return true
}

// noteSkipped logs and counts (meshbridge_registry_skipped_total, reason
// invalid) each skipped service of a read that the last read did not skip
// for the same reason, and remembers this read's.
func (r *Registry) noteSkipped(skipped []Skipped) {
	next := make(map[string]bool, len(skipped))
	for _, s := range skipped {
		key := s.Host + "\x00" + s.Reason
		if s.Host == "" {
			key = s.String()
		}
		next[key] = true
		if r.skipped[key] {
			continue
		}
		registries.RegistrySkipped.WithLabelValues(r.cfg.Name, skippedInvalid).Inc()
		r.log.Warn("Skipped an invalid service of the registry file; its other services are served",
			"service", s.Host, "reason", s.String(), "path", r.cfg.Path)
	}
	r.skipped = next
}

// skippedInvalid is the reason label of meshbridge_registry_skipped_total
// for a service of the file that is not served (Skipped).
const skippedInvalid = "invalid"

// readFile reads path, at most maxSize bytes (0: no limit), marking with
// registries.Permanent the failures that only an operator fixes: the path
// does not exist, is a directory, may not be read, is a symbolic link loop,
// or names a file larger than maxSize. Other errors (a transient I/O error)
// are retried as they are.
func readFile(path string, maxSize int64) ([]byte, error) {
	data, err := readAtMost(path, maxSize)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ELOOP),
		errors.Is(err, errTooLarge):
		return nil, registries.Permanent(err)
	}
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		return nil, registries.Permanent(fmt.Errorf("%s is a directory; file.path names a YAML file", path))
	}
	return nil, err
}

// errTooLarge marks a file over Config.MaxSize.
var errTooLarge = errors.New("file.maxSize")

// readAtMost reads path, refusing one larger than maxSize bytes (0: no
// limit) without reading it: a read costs about 9 times the file's size in
// memory.
func readAtMost(path string, maxSize int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := func(size int64) error {
		return fmt.Errorf("%s is %d bytes, over %w (%d bytes): raise it or split the registry into several files",
			path, size, errTooLarge, maxSize)
	}
	if st, err := f.Stat(); err == nil && maxSize > 0 && st.Mode().IsRegular() && st.Size() > maxSize {
		return nil, tooLarge(st.Size())
	}
	r := io.Reader(f)
	if maxSize > 0 {
		r = io.LimitReader(f, maxSize+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if maxSize > 0 && int64(len(data)) > maxSize {
		return nil, tooLarge(int64(len(data)))
	}
	return data, nil
}

// fail records a failed read and reports it (registries.Session.ListingFailed:
// one log line when the registry goes down, the registry-wide error snapshot
// once per run of the same failure, the last good listing, if any, kept).
func (r *Registry) fail(rep *registries.Session, reason string, err error, now time.Time) {
	r.failing = true
	rep.ListingFailed(readerFile, reason, registries.Scope{}, err, now)
}

// readerFile is the registry's one reader (registries.Session).
const readerFile = "file"

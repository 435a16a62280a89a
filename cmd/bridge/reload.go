package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/pipeline"
	"github.com/meshbridge/meshbridge/xds"
)

// Configuration reload (README "Reloading the configuration").
//
// Rules:
//  1. SIGHUP, and a change of the configuration file (written in place,
//     renamed over, or a ConfigMap's ..data swap), reload it; so does a
//     change of a file a registry names (a key ending in "File", such as
//     tokenFile or passwordFile), which restarts that registry.
//  2. A registry is restarted when anything it is built from changed: its
//     block, the global outage policy, output.revision, output.allowLabels
//     or the content of a file it names. Added registries start; removed
//     ones stop and their services leave the store (through the delete
//     guard). A registry that did not change keeps running: no push.
//  3. debounce.*, log.level and kubernetes.qps/burst apply live. Any other
//     key (liveKeys) makes the reload fail, naming the keys: they need a
//     restart.
//  4. A reload that fails (unreadable file, invalid YAML or configuration,
//     a key that cannot change, a registry that cannot be built) changes
//     nothing: the running configuration stays, and the failure is logged,
//     counted (meshbridge_config_reloads_total{result="failure"}) and shown
//     on /debug/config until the next reload.
//  5. A failure is logged and counted once: a reload of the same inputs
//     (the configuration file and the files the running configuration
//     names, byte for byte) is not tried again, so an edit followed by a
//     SIGHUP gives one error, and the SIGHUP one line saying nothing
//     changed since.

// configReloads is meshbridge_config_reloads_total.
var configReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "meshbridge_config_reloads_total",
	Help: "Configuration reloads (SIGHUP or a change of the configuration file or a file it names), by result: success or failure (the running configuration is kept).",
}, []string{"result"})

// liveKeys are the configuration keys (dotted paths, and prefixes ending in
// ".") a reload may change besides registries.
var liveKeys = []string{"debounce.", "log.level", "kubernetes.qps", "kubernetes.burst", "outage.",
	"output.revision", "output.allowLabels"}

// reloadStatus is the last reload, shown on /debug/config.
type reloadStatus struct {
	Time    time.Time `json:"time,omitzero"`
	Trigger string    `json:"trigger,omitempty"`
	Result  string    `json:"result,omitempty"`
	Error   string    `json:"error,omitempty"`
	// Added, Removed and Restarted name the registries the reload changed.
	Added     []string `json:"added,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	Restarted []string `json:"restarted,omitempty"`
}

// configPage is /debug/config: the running configuration (secrets
// redacted) and the last reload.
type configPage struct {
	Config     *Config      `json:"config"`
	LastReload reloadStatus `json:"lastReload"`
}

func (b *bridge) configPage() configPage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return configPage{Config: b.cfg.Redacted(), LastReload: b.lastLoad}
}

// watchConfig reloads on SIGHUP and on changes of the configuration file
// and the files its registries name (rule 1), until ctx is done.
func (b *bridge) watchConfig(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		b.log.Warn("Cannot watch the configuration file; reload with SIGHUP", "err", err)
	} else {
		defer w.Close()
	}
	watched := map[string]bool{} // directories
	files := map[string]bool{}   // base names that trigger a reload
	rewatch := func() {
		if w == nil || b.flags.config == "" {
			return
		}
		paths := append([]string{b.flags.config}, namedFiles(b.config())...)
		clear(files)
		files["..data"] = true
		for _, p := range paths {
			files[filepath.Base(p)] = true
			dir := filepath.Dir(p)
			if watched[dir] {
				continue
			}
			if err := w.Add(dir); err != nil {
				b.log.Warn("Cannot watch a configuration directory; reload with SIGHUP", "dir", dir, "err", err)
				continue
			}
			watched[dir] = true
		}
	}
	rewatch()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	// Editors and ConfigMap updates make several events per change: reload
	// once they pause.
	const settle = 200 * time.Millisecond
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			b.log.Info("Received SIGHUP: reloading the configuration", "path", b.flags.config)
			if err := b.reload("SIGHUP"); errors.Is(err, errUnchangedSinceFailure) {
				b.log.Warn("The configuration has not changed since its reload failed; the running configuration "+
					"is kept (/debug/config shows the error)", "path", b.flags.config, "failedAt", b.lastReload().Time)
			}
			rewatch()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if files[filepath.Base(ev.Name)] && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
				timer = time.After(settle)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			b.log.Warn("Configuration file watch reported an error", "err", err)
		case <-timer:
			timer = nil
			_ = b.reload("file change")
			rewatch()
		}
	}
}

// errUnchangedSinceFailure is reload's answer when its inputs are those
// of the last reload, which failed (rule 5).
var errUnchangedSinceFailure = errors.New("the configuration has not changed since its reload failed")

// lastReload returns the last reload's status.
func (b *bridge) lastReload() reloadStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastLoad
}

// reloadInputs digests what a reload reads: the configuration file and
// the files the running configuration names (rule 5).
func (b *bridge) reloadInputs() string {
	h := sha256.New()
	for _, path := range append([]string{b.flags.config}, namedFiles(b.config())...) {
		data, err := os.ReadFile(path)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		fmt.Fprintf(h, "%s %x\n", path, sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// reload reads the configuration file again and applies it (rules 2-5).
func (b *bridge) reload(trigger string) (err error) {
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	inputs := b.reloadInputs()
	if inputs == b.failedInputs {
		b.log.Debug("Skipped a reload: the configuration has not changed since its reload failed", "trigger", trigger)
		return errUnchangedSinceFailure
	}
	st := reloadStatus{Time: time.Now(), Trigger: trigger, Result: "success"}
	defer func() {
		b.failedInputs = ""
		if err != nil {
			st.Result, st.Error = "failure", err.Error()
			b.failedInputs = inputs
			b.log.Error("Configuration reload failed; the running configuration is kept", "trigger", trigger, "err", err)
		}
		configReloads.WithLabelValues(st.Result).Inc()
		b.mu.Lock()
		b.lastLoad = st
		b.mu.Unlock()
	}()
	if b.flags.config == "" {
		return errors.New("no configuration file to reload")
	}
	next, err := LoadConfig(b.flags.config)
	if err != nil {
		return err
	}
	old := b.config()
	if keys := fixedChanges(old, next); len(keys) > 0 {
		return fmt.Errorf("keys that cannot change without a restart changed: %s", strings.Join(keys, ", "))
	}

	// Build every added or changed registry before changing anything; an
	// unchanged one keeps its running watcher.
	running := map[string]pipeline.Registry{}
	for _, r := range b.pipe.Registries() {
		running[r.Name()] = r
	}
	b.mu.Lock()
	fingerprints := maps.Clone(b.fingerprints)
	b.mu.Unlock()
	regs := make([]pipeline.Registry, 0, len(next.Registries))
	nextPrints := make(map[string]string, len(next.Registries))
	for i, rc := range next.Registries {
		fp := registryFingerprint(next, i)
		nextPrints[rc.Name] = fp
		if cur, ok := running[rc.Name]; ok && fingerprints[rc.Name] == fp {
			regs = append(regs, cur)
			continue
		}
		reg, err := buildRegistry(next, i, b.log)
		if err != nil {
			return err
		}
		regs = append(regs, reg)
	}

	// The pipeline removes, reorders, restarts and adds (the Kubernetes
	// writer hears of an added registry first: pipeline.OnAdd).
	res := b.pipe.Configure(regs)
	st.Added, st.Removed, st.Restarted = res.Added, res.Removed, res.Restarted
	b.mu.Lock()
	b.fingerprints = nextPrints
	b.mu.Unlock()
	b.applyLive(next)
	b.mu.Lock()
	b.cfg = next
	b.mu.Unlock()
	b.log.Info("Configuration reloaded", "trigger", trigger, "added", st.Added, "removed", st.Removed,
		"restarted", st.Restarted, "unchanged", len(next.Registries)-len(st.Added)-len(st.Restarted))
	b.warnExposedDebug(next)
	return nil
}

// applyLive applies the keys that change without a restart (rule 3).
func (b *bridge) applyLive(next *Config) {
	d := next.Debounce
	b.xds.SetDebounce(xds.Debounce{After: d.After.Duration, Max: d.Max.Duration, EDSMax: d.EDSMax.Duration, EDS: *d.EDS})
	if b.level != nil && !b.flags.levelSet {
		var level slog.Level
		if err := level.UnmarshalText([]byte(next.Log.Level)); err == nil {
			b.level.Set(level)
		}
	}
	if b.kube != nil {
		for _, l := range b.kube.limiters {
			l.Set(next.Kubernetes.QPS, next.Kubernetes.Burst)
		}
	}
}

// fixedChanges returns the keys, other than registries and liveKeys, whose
// values differ between a and b, as sorted dotted paths (rule 3).
func fixedChanges(a, b *Config) []string {
	flat := func(c *Config) map[string]any {
		cc := *c
		cc.Registries = nil
		out := map[string]any{}
		data, _ := json.Marshal(&cc)
		var m map[string]any
		_ = json.Unmarshal(data, &m)
		flatten("", m, out)
		return out
	}
	fa, fb := flat(a), flat(b)
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(fa)) {
		if !reflect.DeepEqual(fa[k], fb[k]) && !isLive(k) {
			keys = append(keys, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fb)) {
		if _, ok := fa[k]; !ok && !isLive(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func isLive(key string) bool {
	for _, l := range liveKeys {
		if key == l || (strings.HasSuffix(l, ".") && strings.HasPrefix(key, l)) {
			return true
		}
	}
	return false
}

// flatten writes the leaves of v under dotted paths into out; an empty
// object has none (a key set in it shows as added).
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = v
		return
	}
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, child, out)
	}
}

// registryFingerprint identifies everything registries[i] is built from
// (rule 2): its configuration, the global keys its translator and outage
// policy take, and the content of the files it names. Two equal
// fingerprints build the same registry.
func registryFingerprint(cfg *Config, i int) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(cfg.Registries[i])
	_ = enc.Encode(cfg.Outage)
	_ = enc.Encode(cfg.Output)
	for _, path := range registryFiles(cfg.Registries[i]) {
		data, err := os.ReadFile(path)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(h, "%s %x\n", path, sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// namedFiles returns the files every registry of cfg names (rule 1).
func namedFiles(cfg *Config) []string {
	var out []string
	for _, rc := range cfg.Registries {
		out = append(out, registryFiles(rc)...)
	}
	return out
}

// registryFiles returns the values of the keys of rc's configuration whose
// names end in "File" (tokenFile, passwordFile, caFile, ...), sorted. The
// file registry's file is not among them: the registry follows it itself.
func registryFiles(rc RegistryConfig) []string {
	data, err := json.Marshal(rc)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	flat := map[string]any{}
	flatten("", m, flat)
	var out []string
	for k, v := range flat {
		last := k[strings.LastIndex(k, ".")+1:]
		if s, ok := v.(string); ok && s != "" && strings.HasSuffix(last, "File") {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/filewatch"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// FilesConfig configures Files.
type FilesConfig struct {
	// Globs are the file patterns read, in order (config key
	// policy.files; filepath.Match syntax). The directory part of a glob
	// is a directory, not a pattern.
	Globs []string
	// Settle and Resync are internal/filewatch's; default 200ms and 30s.
	Settle, Resync time.Duration
	// OnChange is called with the rules after each read that changes
	// them (and after the first read), from Run's goroutine.
	OnChange func(*Rules)
	Logger   *slog.Logger
}

// ValidateGlob says why g is not a glob Files follows: empty, a malformed
// pattern, or a pattern in its directory part (a directory is watched,
// not searched); nil when it is one.
func ValidateGlob(g string) error {
	switch {
	case g == "":
		return errors.New("empty")
	case strings.ContainsAny(filepath.Dir(g), "*?["):
		return fmt.Errorf("%q: the directory part may not be a pattern", g)
	}
	if _, err := filepath.Match(filepath.Base(g), ""); err != nil {
		return fmt.Errorf("%q: %w", g, err)
	}
	return nil
}

// Files reads DestinationRules from the files its globs match and follows
// them (package rules).
type Files struct {
	cfg FilesConfig
	log *slog.Logger

	// kept is what each file held at its last good read, by path (rule
	// 2: a file that cannot be read keeps it).
	kept map[string][]Object
	// valid is the last valid version of each rule, by ID (rule 2).
	valid map[string]*networking.DestinationRule
	// logged are the versions whose unserved fields were logged (rule 6).
	logged map[*networking.DestinationRule]bool
	rules  *Rules

	mu     sync.Mutex
	status Status
}

// Status is what /debug/policyz shows: each rule's state as last read.
type Status struct {
	// Rules are served, Rejected not (a rejected rule whose last valid
	// version serves is in both).
	Rules    []RuleStatus `json:"rules"`
	Rejected []RuleStatus `json:"rejected"`
	Ignored  []Ignored    `json:"ignored"`
	// FileErrors are the files that could not be read or parsed, and why.
	FileErrors map[string]string `json:"fileErrors,omitempty"`
}

// RuleStatus is one rule.
type RuleStatus struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Host   string `json:"host,omitempty"`
	// Unserved are the fields no proxyless client is served (gen.Unserved).
	Unserved []string `json:"unserved,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}

// NewFiles returns the source of cfg, or an error naming a glob that is
// not one (ValidateGlob).
func NewFiles(cfg FilesConfig) (*Files, error) {
	for i, g := range cfg.Globs {
		if err := ValidateGlob(g); err != nil {
			return nil, fmt.Errorf("policy.files[%d]: %w", i, err)
		}
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 200 * time.Millisecond
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Files{cfg: cfg, log: cfg.Logger, kept: map[string][]Object{}, valid: map[string]*networking.DestinationRule{},
		logged: map[*networking.DestinationRule]bool{}}, nil
}

// Run reads the files and follows them until ctx is done (rule 7).
func (f *Files) Run(ctx context.Context) error {
	dirs := map[string]bool{}
	for _, g := range f.cfg.Globs {
		dirs[filepath.Dir(g)] = true
	}
	loop := filewatch.Loop{
		Dirs: slices.Sorted(maps.Keys(dirs)),
		Match: func(base string) bool {
			return slices.ContainsFunc(f.cfg.Globs, func(g string) bool {
				ok, _ := filepath.Match(filepath.Base(g), base)
				return ok
			})
		},
		Settle: f.cfg.Settle, Resync: f.cfg.Resync,
		Read:   f.Read,
		Logger: f.log,
	}
	return loop.Run(ctx)
}

// Read reads every file the globs match once, and calls OnChange when the
// rules changed (or on the first read).
func (f *Files) Read() {
	var objs []Object
	var ignored []Ignored
	fileErrors := map[string]string{}
	seen := map[string]bool{}
	for _, g := range f.cfg.Globs {
		paths, _ := filepath.Glob(g) // ValidateGlob checked the pattern
		slices.Sort(paths)
		for _, p := range paths {
			if seen[p] {
				continue
			}
			seen[p] = true
			o, ig, err := readFile(p)
			if err != nil {
				fileErrors[p] = err.Error()
				if f.kept[p] != nil {
					f.log.Warn("Could not read a policy file; its rules as last read keep serving", "path", p, "err", err)
				} else {
					f.log.Warn("Could not read a policy file", "path", p, "err", err)
				}
				objs = append(objs, f.kept[p]...)
				continue
			}
			f.kept[p] = o
			objs = append(objs, o...)
			ignored = append(ignored, ig...)
		}
	}
	for p := range f.kept {
		if !seen[p] {
			delete(f.kept, p) // the file is gone: so are its rules
		}
	}
	rules, st := f.decide(objs)
	st.Ignored, st.FileErrors = ignored, fileErrors
	policyRules.WithLabelValues("served").Set(float64(len(st.Rules)))
	policyRules.WithLabelValues("rejected").Set(float64(len(st.Rejected)))
	f.mu.Lock()
	f.status = st
	f.mu.Unlock()
	if f.rules != nil && sameRules(f.rules, rules) {
		return
	}
	f.rules = rules
	f.log.Info("Traffic policy read", "rules", rules.Len(), "rejected", len(st.Rejected), "ignored", len(st.Ignored))
	if f.cfg.OnChange != nil {
		f.cfg.OnChange(rules)
	}
}

// readFile reads and parses one file.
func readFile(path string) ([]Object, []Ignored, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return Parse(path, data)
}

// decide turns the objects read, in order, into the rules served (rules
// 2, 3, 5 and 6), keeping the last valid version of each rule.
func (f *Files) decide(objs []Object) (*Rules, Status) {
	var st Status
	hosts := map[string]string{} // host → ID of the rule that has it
	ids := map[string]bool{}
	var served []*networking.DestinationRule
	valid := map[string]*networking.DestinationRule{}
	for _, o := range objs {
		id := o.ID()
		rule, reason := o.Rule, ""
		switch {
		case ids[id]:
			rule, reason = nil, fmt.Sprintf("a rule %s comes before", id)
		case o.Err != nil:
			rule, reason = f.valid[id], o.Err.Error()
		}
		ids[id] = true
		if reason != "" {
			st.Rejected = append(st.Rejected, RuleStatus{ID: id, Source: o.Source, Reason: reason})
			f.log.Warn("Rejected a DestinationRule", "rule", id, "source", o.Source, "reason", reason,
				"keptLastValid", rule != nil)
		}
		if rule == nil {
			continue
		}
		if prev := f.valid[id]; prev != nil && prev != rule && proto.Equal(prev, rule) {
			rule = prev // rule 5
		}
		if other, ok := hosts[rule.GetHost()]; ok {
			st.Rejected = append(st.Rejected, RuleStatus{ID: id, Source: o.Source, Host: rule.GetHost(),
				Reason: fmt.Sprintf("host %s has the rule %s, which comes before", rule.GetHost(), other)})
			continue
		}
		hosts[rule.GetHost()] = id
		valid[id] = rule
		served = append(served, rule)
		unserved := gen.Unserved(rule.GetTrafficPolicy())
		if len(rule.GetSubsets()) > 0 {
			unserved = append(unserved, "subsets")
		}
		if len(unserved) > 0 && !f.logged[rule] {
			f.log.Warn("A DestinationRule sets fields proxyless clients are not served; they are ignored",
				"rule", id, "host", rule.GetHost(), "fields", unserved)
		}
		st.Rules = append(st.Rules, RuleStatus{ID: id, Source: o.Source, Host: rule.GetHost(), Unserved: unserved})
	}
	f.valid = valid
	logged := make(map[*networking.DestinationRule]bool, len(served))
	for _, r := range served {
		logged[r] = true
	}
	f.logged = logged
	return newRules(served), st
}

// sameRules reports whether a and b hold the same rule objects.
func sameRules(a, b *Rules) bool {
	if len(a.exact) != len(b.exact) || len(a.wildcards) != len(b.wildcards) {
		return false
	}
	for h, r := range a.exact {
		if b.exact[h] != r {
			return false
		}
	}
	for i, w := range a.wildcards {
		if b.wildcards[i] != w {
			return false
		}
	}
	return true
}

// Status returns the rules as last read.
func (f *Files) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

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
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/filewatch"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// Config configures a Source.
type Config struct {
	// Globs are the file patterns read, in order (config key
	// policy.files; filepath.Match syntax). The directory part of a glob
	// is a directory, not a pattern.
	Globs []string
	// Settle and Resync are internal/filewatch's; default 200ms and 30s.
	Settle, Resync time.Duration
	// Kubernetes, when set, reads DestinationRules and VirtualServices
	// from a cluster too, before the files' (rule 10).
	Kubernetes *KubernetesConfig
	// OnChange is called with the rules after each read that changes
	// them (and after the first read), from Run's goroutines, one call at
	// a time.
	OnChange func(*Rules)
	Logger   *slog.Logger
}

// ValidateGlob says why g is not a glob a Source follows: empty, a malformed
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

// Source reads DestinationRules and VirtualServices from the files its globs match and follows
// them (package rules).
type Source struct {
	cfg Config
	log *slog.Logger

	// kept is what each file held at its last good read, by path (rule
	// 2: a file that cannot be read keeps it).
	kept map[string][]Object
	// valid and validRouting are the last valid version of each
	// DestinationRule and VirtualService, by ID (rule 2).
	valid        map[string]*networking.DestinationRule
	validRouting map[string]*networking.VirtualService
	// logged are the versions whose unserved fields were logged (rule 6):
	// DestinationRules and VirtualServices.
	logged map[any]bool
	rules  *Rules

	mu     sync.Mutex
	status Status
	// kubeErr is the last error listing or watching the cluster (under
	// mu).
	kubeErr string

	// readMu makes Read one call at a time: the files' loop and the
	// cluster's informers both call it.
	readMu     sync.Mutex
	kube       *kubernetes
	kubeSynced atomic.Bool
	kick       chan struct{}
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
	// Kubernetes is the cluster's state when policy.kubernetes is set.
	Kubernetes *KubernetesStatus `json:"kubernetes,omitempty"`
}

// RuleStatus is one DestinationRule or VirtualService.
type RuleStatus struct {
	// Kind is "VirtualService" for one; "" for a DestinationRule.
	Kind   string `json:"kind,omitempty"`
	ID     string `json:"id"`
	Source string `json:"source"`
	// Host is a DestinationRule's; Hosts are the hosts a VirtualService
	// is served for (those no earlier one has, rule 8).
	Host  string   `json:"host,omitempty"`
	Hosts []string `json:"hosts,omitempty"`
	// Unserved are the fields no proxyless client is served (gen.Unserved,
	// gen.UnservedRouting) and a VirtualService's destination subsets no
	// DestinationRule defines (MissingSubsets).
	Unserved []string `json:"unserved,omitempty"`
	// Unenforced are the fields served that some client accepts without
	// applying, each naming which (gen.Unenforced).
	Unenforced []string `json:"unenforced,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

// New returns the source of cfg, or an error naming a glob that is
// not one (ValidateGlob).
func New(cfg Config) (*Source, error) {
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
	f := &Source{cfg: cfg, log: cfg.Logger, kept: map[string][]Object{}, valid: map[string]*networking.DestinationRule{},
		validRouting: map[string]*networking.VirtualService{}, logged: map[any]bool{}, kick: make(chan struct{}, 1)}
	if cfg.Kubernetes != nil {
		if cfg.Kubernetes.Client == nil {
			return nil, errors.New("policy.kubernetes: no client")
		}
		f.kube = newKubernetes(cfg.Kubernetes, func() {
			select {
			case f.kick <- struct{}{}:
			default:
			}
		}, f.kubeError)
	}
	return f, nil
}

// Run reads the files and the cluster's objects and follows them until
// ctx is done (rules 7 and 10).
func (f *Source) Run(ctx context.Context) error {
	if f.kube != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			f.followKubernetes(ctx)
		}()
		if len(f.cfg.Globs) == 0 {
			<-ctx.Done()
			return nil
		}
	}
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
func (f *Source) Read() {
	f.readMu.Lock()
	defer f.readMu.Unlock()
	if f.kube != nil && !f.kubeSynced.Load() {
		return // nothing is served before the cluster's objects are read (rule 10)
	}
	var objs []Object
	if f.kube != nil {
		objs = f.kube.objects()
	}
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
	if f.rules != nil && f.rules.same(rules) {
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
// 2, 3, 5, 6 and 8), keeping the last valid version of each object.
func (f *Source) decide(objs []Object) (*Rules, Status) {
	var st Status
	d := decision{f: f, st: &st, ids: map[string]bool{}, logged: map[any]bool{},
		destinations: map[string]*networking.DestinationRule{}, routing: map[string]*networking.VirtualService{},
		owner: map[string]string{}, valid: map[string]*networking.DestinationRule{},
		validRouting: map[string]*networking.VirtualService{}}
	for _, o := range objs {
		if o.Kind == KindVirtualService {
			d.virtualService(o)
		} else {
			d.destinationRule(o)
		}
	}
	rules := NewRules(d.destinations, d.routing)
	for i, rs := range st.Rules {
		if rs.Kind != KindVirtualService {
			continue
		}
		vs := d.validRouting[rs.ID]
		missing := MissingSubsets(vs, rules)
		if len(missing) > 0 && !d.f.logged[missingKey{vs, strings.Join(missing, "\n")}] {
			d.f.log.Warn("A VirtualService routes to subsets no DestinationRule defines; calls routed to them fail",
				"rule", rs.ID, "subsets", missing)
		}
		d.logged[missingKey{vs, strings.Join(missing, "\n")}] = true
		st.Rules[i].Unserved = append(st.Rules[i].Unserved, missing...)
	}
	f.valid, f.validRouting, f.logged = d.valid, d.validRouting, d.logged
	return rules, st
}

// missingKey is the log-once key of a VirtualService's missing subsets.
type missingKey struct {
	vs      *networking.VirtualService
	missing string
}

// MissingSubsets names each destination of vs whose subset the
// DestinationRule of its host (rules.For) does not define, as
// "http[0].route[1].destination.subset: v3 (not a subset of
// reviews.dubbo's DestinationRule: calls routed to it fail)": the
// destination is served as the subset's cluster, which no client finds
// (gen.SubsetClusterName), as istiod serves it.
func MissingSubsets(vs *networking.VirtualService, rules *Rules) []string {
	var out []string
	for i, hr := range vs.GetHttp() {
		for k, dst := range hr.GetRoute() {
			sub, host := dst.GetDestination().GetSubset(), dst.GetDestination().GetHost()
			if sub == "" || slices.ContainsFunc(rules.For(host).GetSubsets(), func(s *networking.Subset) bool { return s.GetName() == sub }) {
				continue
			}
			out = append(out, fmt.Sprintf("http[%d].route[%d].destination.subset: %s (not a subset of %s's DestinationRule: "+
				"calls routed to it fail)", i, k, sub, host))
		}
	}
	return out
}

// decision is one decide call's state.
type decision struct {
	f            *Source
	st           *Status
	ids          map[string]bool // kind + ID seen
	logged       map[any]bool
	destinations map[string]*networking.DestinationRule
	routing      map[string]*networking.VirtualService
	owner        map[string]string // kind + host → ID of the object that has it
	valid        map[string]*networking.DestinationRule
	validRouting map[string]*networking.VirtualService
}

// accept returns the version of o to serve (obj, or the last valid one,
// prev, when o is invalid; nil when none) and records a rejection.
func accept[T comparable](d *decision, o Object, obj, prev T) (T, bool) {
	var zero T
	key := o.Kind + " " + o.ID()
	reason := ""
	switch {
	case d.ids[key]:
		obj, reason = zero, fmt.Sprintf("a %s %s comes before", o.Kind, o.ID())
	case o.Err != nil:
		obj, reason = prev, o.Err.Error()
	}
	d.ids[key] = true
	if reason != "" {
		d.st.Rejected = append(d.st.Rejected, RuleStatus{Kind: kindShown(o.Kind), ID: o.ID(), Source: o.Source, Reason: reason})
		d.f.log.Warn("Rejected a "+o.Kind, "rule", o.ID(), "source", o.Source, "reason", reason, "keptLastValid", obj != zero)
	}
	return obj, obj != zero
}

// kindShown is a RuleStatus's Kind: "" for a DestinationRule.
func kindShown(kind string) string {
	if kind == KindDestinationRule {
		return ""
	}
	return kind
}

// same returns prev when it equals obj (rule 5), else obj.
func same[T interface {
	comparable
	proto.Message
}](prev, obj T) T {
	var zero T
	if prev != zero && prev != obj && proto.Equal(prev, obj) {
		return prev
	}
	return obj
}

func (d *decision) destinationRule(o Object) {
	id := o.ID()
	rule, ok := accept(d, o, o.Rule, d.f.valid[id])
	if !ok {
		return
	}
	rule = same(d.f.valid[id], rule)
	if other, ok := d.owner[KindDestinationRule+" "+rule.GetHost()]; ok {
		d.st.Rejected = append(d.st.Rejected, RuleStatus{ID: id, Source: o.Source, Host: rule.GetHost(),
			Reason: fmt.Sprintf("host %s has the rule %s, which comes before", rule.GetHost(), other)})
		return
	}
	d.owner[KindDestinationRule+" "+rule.GetHost()] = id
	d.valid[id] = rule
	d.destinations[rule.GetHost()] = rule
	unserved := gen.Unserved(rule.GetTrafficPolicy())
	for i, sub := range rule.GetSubsets() {
		for _, f := range gen.Unserved(sub.GetTrafficPolicy()) {
			unserved = append(unserved, fmt.Sprintf("subsets[%d].trafficPolicy.%s", i, f))
		}
	}
	unenforced := gen.Unenforced(rule.GetTrafficPolicy())
	for i, sub := range rule.GetSubsets() {
		for _, f := range gen.Unenforced(sub.GetTrafficPolicy()) {
			unenforced = append(unenforced, fmt.Sprintf("subsets[%d].trafficPolicy.%s", i, f))
		}
	}
	d.note(rule, id, unserved, "host", rule.GetHost())
	d.noteUnenforced(rule, id, unenforced, "host", rule.GetHost())
	d.st.Rules = append(d.st.Rules, RuleStatus{ID: id, Source: o.Source, Host: rule.GetHost(), Unserved: unserved,
		Unenforced: unenforced})
}

// virtualService serves o for each of its hosts that no earlier
// VirtualService has (rule 8).
func (d *decision) virtualService(o Object) {
	id := o.ID()
	vs, ok := accept(d, o, o.Routing, d.f.validRouting[id])
	if !ok {
		return
	}
	vs = same(d.f.validRouting[id], vs)
	d.validRouting[id] = vs
	if !AppliesToMesh(vs) {
		d.st.Rejected = append(d.st.Rejected, RuleStatus{Kind: KindVirtualService, ID: id, Source: o.Source,
			Reason: fmt.Sprintf("gateways %v omit %q: it applies to gateways only", vs.GetGateways(), MeshGateway)})
		return
	}
	var hosts []string
	for _, h := range vs.GetHosts() {
		if other, ok := d.owner[KindVirtualService+" "+h]; ok {
			d.st.Rejected = append(d.st.Rejected, RuleStatus{Kind: KindVirtualService, ID: id, Source: o.Source, Host: h,
				Reason: fmt.Sprintf("host %s has the VirtualService %s, which comes before", h, other)})
			continue
		}
		d.owner[KindVirtualService+" "+h] = id
		d.routing[h] = vs
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return
	}
	unserved := gen.UnservedRouting(vs)
	d.note(vs, id, unserved, "hosts", hosts)
	d.st.Rules = append(d.st.Rules, RuleStatus{Kind: KindVirtualService, ID: id, Source: o.Source, Hosts: hosts,
		Unserved: unserved})
}

// note logs the unserved fields of obj once per version (rule 6).
func (d *decision) note(obj any, id string, unserved []string, attrs ...any) {
	if len(unserved) > 0 && !d.f.logged[obj] {
		d.f.log.Warn("A traffic policy sets fields proxyless clients are not served; they are ignored",
			append([]any{"rule", id, "fields", unserved}, attrs...)...)
	}
	d.logged[obj] = true
}

// noteUnenforced logs, once per version of obj (rule 6, with note), the
// settings it sets that some client accepts without applying.
func (d *decision) noteUnenforced(obj any, id string, unenforced []string, attrs ...any) {
	if len(unenforced) > 0 && !d.f.logged[obj] {
		d.f.log.Info("A traffic policy sets fields some proxyless clients accept without applying",
			append([]any{"rule", id, "fields", unenforced}, attrs...)...)
	}
}

// Status returns the rules as last read.
func (f *Source) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	if f.kube != nil {
		st.Kubernetes = &KubernetesStatus{Synced: f.kubeSynced.Load(), LastError: f.kubeErr}
	}
	return st
}

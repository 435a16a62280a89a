package dns

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
)

// Metric names are a contract (README.md "Metrics"); dashboards depend on
// them.
const metricDNSLookups = "meshbridge_xds_dns_lookups_total"

// lookups counts lookups of endpoint names by result (rule 3).
var lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: metricDNSLookups,
	Help: "Lookups of endpoint addresses that are DNS names (direct xDS serves the addresses they resolve to), by result (success, failure).",
}, []string{"result"})

// Collectors returns the package's metrics for registration (cmd/bridge
// registers them once on its registry). They are package-level, so every
// Updater in a process reports into them. Both results' series start at 0,
// so that increase() and rate() see the first failure.
func Collectors() []prometheus.Collector {
	for _, r := range []string{"success", "failure"} {
		lookups.WithLabelValues(r)
	}
	return []prometheus.Collector{lookups}
}

// lookupTimeout bounds one lookup.
const lookupTimeout = 5 * time.Second

// LookupFunc returns the addresses host resolves to.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// SystemLookup resolves with the process's resolver; it is the default
// Options.Lookup.
func SystemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Options configure an Updater. The zero value of each field is its
// default.
type Options struct {
	// Lookup resolves a name; default SystemLookup. Tests inject a fake.
	Lookup LookupFunc
	// RefreshRate is how often the names in use are resolved again (rule
	// 2; config key xds.dnsRefreshRate); 0 looks a name up once, when first
	// used, and never again.
	RefreshRate time.Duration
	// Logger receives the lookups' logs; default slog.Default(). They carry
	// component=xds, as when the DiscoveryServer resolved the names.
	Logger *slog.Logger
}

// shardKey is one shard's endpoints of a service.
type shardKey struct {
	shard, host, namespace string
}

// name is what the Updater knows of one name.
type name struct {
	addrs    []netip.Addr // sorted; nil until resolved
	resolved bool
	failing  bool // the last lookup failed (rule 3: logged once per run)
}

// Updater resolves the DNS names in endpoints on their way to the wrapped
// XDSUpdater (package doc). Create it with New and run it with Run. Safe
// for concurrent use.
type Updater struct {
	next    serviceentry.XDSUpdater
	lookup  LookupFunc
	refresh time.Duration
	log     *slog.Logger

	mu    sync.Mutex
	held  map[shardKey][]*model.Endpoint // the endpoints as given, of shards with a name
	names map[string]*name
	nheld atomic.Int64 // len(held): updates skip mu while no shard has a name
	wake  chan struct{}
	// settled is closed while every name has been looked up once
	// (WaitResolved).
	settled chan struct{}
}

var _ serviceentry.XDSUpdater = (*Updater)(nil)

// New returns an Updater that hands what it is told to next, names
// resolved. It looks nothing up until Run.
func New(next serviceentry.XDSUpdater, opts Options) *Updater {
	settled := make(chan struct{})
	close(settled)
	lookup := opts.Lookup
	if lookup == nil {
		lookup = SystemLookup
	}
	return &Updater{
		next:    next,
		lookup:  lookup,
		refresh: opts.RefreshRate,
		log:     cmp.Or(opts.Logger, slog.Default()).With("component", "xds"),
		held:    make(map[shardKey][]*model.Endpoint),
		names:   make(map[string]*name),
		wake:    make(chan struct{}, 1),
		settled: settled,
	}
}

// EDSUpdate hands shard's endpoints of (host, namespace) to the wrapped
// updater's EDSUpdate with their names resolved (rule 1). start zero is
// now.
func (u *Updater) EDSUpdate(shard, host, namespace string, endpoints []*model.Endpoint, start time.Time) {
	if start.IsZero() {
		start = time.Now()
	}
	u.update(shardKey{shard, host, namespace}, endpoints, start)
}

// EDSCacheUpdate hands the endpoints to the wrapped updater's
// EDSCacheUpdate with their names resolved (rule 1).
func (u *Updater) EDSCacheUpdate(shard, host, namespace string, endpoints []*model.Endpoint) {
	u.update(shardKey{shard, host, namespace}, endpoints, time.Time{})
}

// SvcUpdate forgets the shards of (host, namespace) on EventDelete (rule
// 4) and hands the call on.
func (u *Updater) SvcUpdate(shard, host, namespace string, event model.Event) {
	if event == model.EventDelete {
		u.forget(host, namespace)
	}
	u.next.SvcUpdate(shard, host, namespace, event)
}

// ConfigUpdate hands req on.
func (u *Updater) ConfigUpdate(req *model.PushRequest) { u.next.ConfigUpdate(req) }

// apply hands a shard's endpoints (names resolved) to the wrapped updater:
// EDSUpdate started at start, or EDSCacheUpdate for a zero start.
func (u *Updater) apply(k shardKey, endpoints []*model.Endpoint, start time.Time) {
	if start.IsZero() {
		u.next.EDSCacheUpdate(k.shard, k.host, k.namespace, endpoints)
		return
	}
	u.next.EDSUpdate(k.shard, k.host, k.namespace, endpoints, start)
}

// noteSettled keeps settled closed exactly while no name awaits its first
// lookup. Called with mu held.
func (u *Updater) noteSettled() {
	waiting := false
	for _, n := range u.names {
		if !n.resolved {
			waiting = true
			break
		}
	}
	select {
	case <-u.settled:
		if waiting {
			u.settled = make(chan struct{})
		}
	default:
		if !waiting {
			close(u.settled)
		}
	}
}

// WaitResolved returns once every name in use has been looked up once and
// the shards using it handed on, or ctx's error. It is a test hook: the
// pipeline waits on it before it waits for the server's queue
// (pipeline.Pipeline.WaitIdle).
func (u *Updater) WaitResolved(ctx context.Context) error {
	u.mu.Lock()
	settled := u.settled
	u.mu.Unlock()
	select {
	case <-settled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isName reports whether address is a DNS name rather than an IP.
func isName(address string) bool {
	_, err := netip.ParseAddr(address)
	return err != nil
}

// update replaces shard k's endpoints: they are applied with their names
// resolved (rule 1), start passed on to apply.
func (u *Updater) update(k shardKey, endpoints []*model.Endpoint, start time.Time) {
	hasName := slices.ContainsFunc(endpoints, func(ep *model.Endpoint) bool { return isName(ep.Address) })
	if !hasName && u.nheld.Load() == 0 {
		u.apply(k, endpoints, start)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !hasName {
		delete(u.held, k)
		u.nheld.Store(int64(len(u.held)))
		u.apply(k, endpoints, start)
		return
	}
	u.held[k] = endpoints
	u.nheld.Store(int64(len(u.held)))
	u.apply(k, u.expand(endpoints), start)
}

// forget drops every shard of (host, namespace): the service is gone.
func (u *Updater) forget(host, namespace string) {
	if u.nheld.Load() == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for k := range u.held {
		if k.host == host && k.namespace == namespace {
			delete(u.held, k)
		}
	}
	u.nheld.Store(int64(len(u.held)))
}

// expand returns endpoints (which hold a name) with each name replaced by an endpoint per
// address it resolves to; a name not yet known is queued for a lookup.
// Called with mu held.
func (u *Updater) expand(endpoints []*model.Endpoint) []*model.Endpoint {
	out := make([]*model.Endpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		if !isName(ep.Address) {
			out = append(out, ep)
			continue
		}
		key := strings.ToLower(ep.Address)
		n, ok := u.names[key]
		if !ok {
			u.names[key] = &name{}
			u.noteSettled()
			select {
			case u.wake <- struct{}{}:
			default:
			}
			continue
		}
		for _, a := range n.addrs {
			resolved := *ep
			resolved.Address = a.String()
			out = append(out, &resolved)
		}
	}
	return out
}

// Run resolves new names when they come and every name in use every
// refresh, until ctx ends (rules 2-4).
func (u *Updater) Run(ctx context.Context) {
	// RefreshRate 0: a name is looked up when first used and never again.
	var tick <-chan time.Time
	if u.refresh > 0 {
		t := time.NewTicker(u.refresh)
		defer t.Stop()
		tick = t.C
	}
	for {
		all := false
		select {
		case <-ctx.Done():
			return
		case <-u.wake:
		case <-tick:
			all = true
		}
		for _, n := range u.due(all) {
			lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
			addrs, err := u.lookup(lctx, n)
			cancel()
			if ctx.Err() != nil {
				return
			}
			u.resolved(n, addrs, err)
		}
	}
}

// due returns the names to look up: the unresolved ones, or with all every
// name in use, after forgetting those no shard uses (rule 4).
func (u *Updater) due(all bool) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if all {
		used := make(map[string]bool)
		for _, eps := range u.held {
			for _, ep := range eps {
				if isName(ep.Address) {
					used[strings.ToLower(ep.Address)] = true
				}
			}
		}
		for n := range u.names {
			if !used[n] {
				delete(u.names, n)
			}
		}
		u.noteSettled()
	}
	var out []string
	for key, n := range u.names {
		if all || !n.resolved {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// resolved records a lookup of key and hands on the shards using it, as
// an EDSUpdate started now, when its addresses changed (rule 2).
func (u *Updater) resolved(key string, addrs []netip.Addr, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n, ok := u.names[key]
	if !ok {
		return
	}
	if err != nil {
		lookups.WithLabelValues("failure").Inc()
		if !n.failing {
			n.failing = true
			u.log.Warn("An endpoint's DNS name did not resolve; its last addresses are kept", "name", key,
				"addresses", len(n.addrs), "err", err)
		}
		n.resolved = true // retried at the next refresh
		u.noteSettled()
		return
	}
	lookups.WithLabelValues("success").Inc()
	if n.failing {
		n.failing = false
		u.log.Info("An endpoint's DNS name resolves again", "name", key)
	}
	addrs = slices.Clone(addrs)
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	changed := !n.resolved || !slices.Equal(n.addrs, addrs)
	n.addrs, n.resolved = addrs, true
	defer u.noteSettled() // after the shards using it are handed on
	if !changed {
		return
	}
	u.log.Debug("An endpoint's DNS name resolved", "name", key, "addresses", addrs)
	for k, eps := range u.held {
		if slices.ContainsFunc(eps, func(ep *model.Endpoint) bool { return strings.EqualFold(ep.Address, key) }) {
			u.apply(k, u.expand(eps), time.Now())
		}
	}
}

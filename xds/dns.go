package xds

import (
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
)

// DNS names in endpoints (a DNS-resolution service's instances registered
// by hostname, such as Spring Cloud Consul's default) are resolved by the
// bridge and served as the addresses they resolve to. gRPC C-core and
// grpc-java accept only IP addresses in a ClusterLoadAssignment and NACK
// the whole assignment, its IP endpoints too, when one endpoint is a name;
// grpc-go would dial the name; a LOGICAL_DNS cluster (gRFC A37) holds one
// name, not a set of instances with their weights and localities. So, as
// Envoy's STRICT_DNS cluster does for a sidecar:
//  1. an endpoint whose address is a name becomes one endpoint per address
//     the name resolves to, each with the endpoint's port, weight, locality
//     and labels; until the name first resolves it contributes none;
//  2. every name in use is resolved again every Options.DNSRefreshRate; a
//     changed set of addresses pushes EDS for the services using it;
//  3. a lookup that fails keeps the name's last addresses (a DNS outage
//     never removes endpoints, as a registry outage does not), is logged
//     once per failure run and counted (meshbridge_xds_dns_lookups_total);
//  4. a name no endpoint uses any more is forgotten at the next refresh.
//
// The Kubernetes and MCP outputs carry the names as they are, with
// resolution DNS: the sidecars resolve them.

// dnsLookupTimeout bounds one lookup.
const dnsLookupTimeout = 5 * time.Second

// dnsLookups counts lookups of endpoint names by result (metrics.go
// registers it).
var dnsLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: metricDNSLookups,
	Help: "Lookups of endpoint addresses that are DNS names (direct xDS serves the addresses they resolve to), by result (success, failure).",
}, []string{"result"})

// lookupFunc returns the addresses host resolves to.
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// systemLookup resolves with the process's resolver.
func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// shardKey is one shard's endpoints of a service.
type shardKey struct {
	shard, host, namespace string
}

// dnsName is what dnsEndpoints knows of one name.
type dnsName struct {
	addrs    []netip.Addr // sorted; nil until resolved
	resolved bool
	failing  bool // the last lookup failed (rule 3: logged once per run)
}

// dnsEndpoints resolves the DNS names of endpoints (rules above). apply
// receives a shard's endpoints with the names replaced, under mu, so that
// an update from the controller and a re-resolution never apply out of
// order. Safe for concurrent use.
type dnsEndpoints struct {
	lookup  lookupFunc
	refresh time.Duration
	log     *slog.Logger
	// apply replaces a shard's endpoints in the server and requests the
	// push they need, with start as the request's Start; a zero start
	// requests none (EDSCacheUpdate).
	apply func(k shardKey, endpoints []*model.Endpoint, start time.Time)

	mu    sync.Mutex
	held  map[shardKey][]*model.Endpoint // the endpoints as given, of shards with a name
	names map[string]*dnsName
	nheld atomic.Int64 // len(held): updates skip mu while no shard has a name
	wake  chan struct{}
	// settled is closed while every name has been looked up once
	// (waitResolved).
	settled chan struct{}
}

func newDNSEndpoints(lookup lookupFunc, refresh time.Duration, log *slog.Logger,
	apply func(shardKey, []*model.Endpoint, time.Time)) *dnsEndpoints {
	settled := make(chan struct{})
	close(settled)
	return &dnsEndpoints{
		lookup: lookup, refresh: refresh, log: log, apply: apply,
		held: make(map[shardKey][]*model.Endpoint), names: make(map[string]*dnsName), wake: make(chan struct{}, 1),
		settled: settled,
	}
}

// noteSettled keeps settled closed exactly while no name awaits its first
// lookup. Called with mu held.
func (d *dnsEndpoints) noteSettled() {
	waiting := false
	for _, n := range d.names {
		if !n.resolved {
			waiting = true
			break
		}
	}
	select {
	case <-d.settled:
		if waiting {
			d.settled = make(chan struct{})
		}
	default:
		if !waiting {
			close(d.settled)
		}
	}
}

// waitResolved returns once every name in use has been looked up once and
// the shards using it applied, or ctx's error.
func (d *dnsEndpoints) waitResolved(ctx context.Context) error {
	d.mu.Lock()
	settled := d.settled
	d.mu.Unlock()
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
func (d *dnsEndpoints) update(k shardKey, endpoints []*model.Endpoint, start time.Time) {
	hasName := slices.ContainsFunc(endpoints, func(ep *model.Endpoint) bool { return isName(ep.Address) })
	if !hasName && d.nheld.Load() == 0 {
		d.apply(k, endpoints, start)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !hasName {
		delete(d.held, k)
		d.nheld.Store(int64(len(d.held)))
		d.apply(k, endpoints, start)
		return
	}
	d.held[k] = endpoints
	d.nheld.Store(int64(len(d.held)))
	d.apply(k, d.expand(endpoints), start)
}

// forget drops every shard of (host, namespace): the service is gone.
func (d *dnsEndpoints) forget(host, namespace string) {
	if d.nheld.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.held {
		if k.host == host && k.namespace == namespace {
			delete(d.held, k)
		}
	}
	d.nheld.Store(int64(len(d.held)))
}

// expand returns endpoints (which hold a name) with each name replaced by an endpoint per
// address it resolves to; a name not yet known is queued for a lookup.
// Called with mu held.
func (d *dnsEndpoints) expand(endpoints []*model.Endpoint) []*model.Endpoint {
	out := make([]*model.Endpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		if !isName(ep.Address) {
			out = append(out, ep)
			continue
		}
		name := strings.ToLower(ep.Address)
		n, ok := d.names[name]
		if !ok {
			d.names[name] = &dnsName{}
			d.noteSettled()
			select {
			case d.wake <- struct{}{}:
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

// run resolves new names when they come and every name in use every
// refresh, until ctx ends (rules 2-4).
func (d *dnsEndpoints) run(ctx context.Context) {
	// refresh 0 (Options.DNSRefreshRate): a name is looked up when first
	// used and never again.
	var tick <-chan time.Time
	if d.refresh > 0 {
		t := time.NewTicker(d.refresh)
		defer t.Stop()
		tick = t.C
	}
	for {
		all := false
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-tick:
			all = true
		}
		for _, name := range d.due(all) {
			lctx, cancel := context.WithTimeout(ctx, dnsLookupTimeout)
			addrs, err := d.lookup(lctx, name)
			cancel()
			if ctx.Err() != nil {
				return
			}
			d.resolved(name, addrs, err)
		}
	}
}

// due returns the names to look up: the unresolved ones, or with all every
// name in use, after forgetting those no shard uses (rule 4).
func (d *dnsEndpoints) due(all bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if all {
		used := make(map[string]bool)
		for _, eps := range d.held {
			for _, ep := range eps {
				if isName(ep.Address) {
					used[strings.ToLower(ep.Address)] = true
				}
			}
		}
		for name := range d.names {
			if !used[name] {
				delete(d.names, name)
			}
		}
		d.noteSettled()
	}
	var out []string
	for name, n := range d.names {
		if all || !n.resolved {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// resolved records a lookup of name and re-applies the shards using it
// when its addresses changed.
func (d *dnsEndpoints) resolved(name string, addrs []netip.Addr, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.names[name]
	if !ok {
		return
	}
	if err != nil {
		dnsLookups.WithLabelValues("failure").Inc()
		if !n.failing {
			n.failing = true
			d.log.Warn("An endpoint's DNS name did not resolve; its last addresses are kept", "name", name,
				"addresses", len(n.addrs), "err", err)
		}
		n.resolved = true // retried at the next refresh
		d.noteSettled()
		return
	}
	dnsLookups.WithLabelValues("success").Inc()
	if n.failing {
		n.failing = false
		d.log.Info("An endpoint's DNS name resolves again", "name", name)
	}
	addrs = slices.Clone(addrs)
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	changed := !n.resolved || !slices.Equal(n.addrs, addrs)
	n.addrs, n.resolved = addrs, true
	defer d.noteSettled() // after the shards using it are applied
	if !changed {
		return
	}
	d.log.Debug("An endpoint's DNS name resolved", "name", name, "addresses", addrs)
	for k, eps := range d.held {
		if slices.ContainsFunc(eps, func(ep *model.Endpoint) bool { return strings.EqualFold(ep.Address, name) }) {
			d.apply(k, d.expand(eps), time.Now())
		}
	}
}

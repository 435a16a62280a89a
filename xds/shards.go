package xds

import (
	"slices"
	"strings"
	"sync"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// pushKind is the push an endpoint update requires.
type pushKind int

const (
	// noPush: nothing a client sees changed.
	noPush pushKind = iota
	// edsPush: only the service's ClusterLoadAssignments changed.
	edsPush
	// fullPush: clusters may change too (a new service key).
	fullPush
)

func (k pushKind) String() string {
	return [...]string{"none", "eds", "full"}[k]
}

// serviceID names a service in endpointShards.
type serviceID struct {
	host, namespace string
}

// endpointShards holds every service's endpoints, per service (host,
// namespace) and per shard (the controller that contributed them: each
// shard is one owner's whole set for the service), as Istio's EndpointIndex
// does (pilot/pkg/model/endpointshards.go). A service key exists from
// SvcUpdate(add) or its first non-empty update until SvcUpdate deletes it;
// an empty update keeps it. Of each endpoint it keeps what clients are sent
// (an immutable gen.Endpoint, shared by later updates that leave it
// unchanged), not the model.Endpoint: its LbEndpoint is encoded when the
// endpoint arrives and kept while an endpoint with the same address, port
// and weight replaces it (gen.EncodeEndpoints). It also keeps, per service,
// the model.Service of the last full push (swapPushed), so that a service
// costs one map entry in the server. Safe for concurrent use; the entries
// and encodings it hands out are read-only.
type endpointShards struct {
	mu       sync.RWMutex
	services map[serviceID]serviceState
	round    uint32 // swapPushed's calls, mod 2^32
}

// serviceState is what endpointShards keeps of a service.
type serviceState struct {
	// shards are the service's non-empty shards sorted by name (nil:
	// none). A service has one shard per controller serving it (meshbridge
	// has one), so a slice: a map per service would cost ~400 bytes where
	// one entry costs 40.
	shards []shard
	// pushed is the service as of the last full push, nil when that push
	// did not list it; round is the swapPushed call that set it.
	pushed *model.Service
	round  uint32
	// known: the service key exists (see endpointShards). An entry that is
	// not known lives only for its pushed service.
	known bool
}

// shard is one shard's endpoints of a service, sorted (gen.SortEndpoints).
type shard struct {
	name      string
	endpoints []*gen.Endpoint
}

// newEndpointShards returns an empty index.
func newEndpointShards() *endpointShards {
	return &endpointShards{services: make(map[serviceID]serviceState)}
}

// find returns the index of the shard named name in shards, or where it
// would be inserted, and whether it is there.
func find(shards []shard, name string) (int, bool) {
	return slices.BinarySearchFunc(shards, name, func(s shard, name string) int { return strings.Compare(s.name, name) })
}

// update replaces the endpoints shard name holds of (host, namespace) and
// returns the push this requires: doc.go's rule 1, which follows Istio's
// DiscoveryServer.edsCacheUpdate (pilot/pkg/xds/eds.go, release-1.29) but
// for what it compares:
//  1. no endpoints for an unknown service: no key is created, no push;
//  2. no endpoints for a known service: the key stays (0↔N flaps never cause
//     full pushes); EDS push when the shard had endpoints, else none;
//  3. first endpoints of an unknown service: full push (clients have no
//     cluster for it yet);
//  4. the shard's endpoints are the same for clients (gen.SameForClients:
//     their labels count when they matter to the service as last fully
//     pushed, gen.LabelsMatter; a full push that makes them matter
//     regenerates the service's assignments from the labels kept), in any
//     order: no push;
//  5. otherwise: EDS push.
func (e *endpointShards) update(name, host, namespace string, endpoints []*model.Endpoint) pushKind {
	id := serviceID{host, namespace}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.services[id]
	i, found := find(st.shards, name)
	if len(endpoints) == 0 {
		if !found {
			return noPush
		}
		if len(st.shards) == 1 {
			st.shards = nil
		} else {
			st.shards = slices.Delete(st.shards, i, i+1)
		}
		e.services[id] = st
		return edsPush
	}
	if !st.known {
		st.known = true
		st.shards = []shard{{name: name, endpoints: gen.EncodeEndpoints(endpoints, nil)}}
		e.services[id] = st
		return fullPush
	}
	if !found {
		st.shards = slices.Insert(st.shards, i, shard{name: name, endpoints: gen.EncodeEndpoints(endpoints, nil)})
		e.services[id] = st
		return edsPush
	}
	old := st.shards[i].endpoints
	cur := gen.EncodeEndpoints(endpoints, old)
	st.shards[i].endpoints = cur
	byLabels := st.pushed != nil && gen.LabelsMatter(st.pushed)
	if slices.EqualFunc(old, cur, func(a, b *gen.Endpoint) bool { return gen.SameForClients(a, b, byLabels) }) {
		return noPush
	}
	return edsPush
}

// ensure creates the key of (host, namespace) with no endpoints, if absent.
func (e *endpointShards) ensure(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := serviceID{host, namespace}
	if st := e.services[id]; !st.known {
		st.known = true
		e.services[id] = st
	}
}

// delete drops every shard of (host, namespace): the service is gone. The
// entry stays while the last full push's service does.
func (e *endpointShards) delete(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := serviceID{host, namespace}
	st, ok := e.services[id]
	if !ok {
		return
	}
	if st.pushed == nil {
		delete(e.services, id)
		return
	}
	st.shards, st.known = nil, false
	e.services[id] = st
}

// encoded returns the endpoints of (host, namespace) from every shard,
// shards in name order, each shard's endpoints sorted (gen.SortEndpoints),
// in a new slice the caller may reorder; the entries are read-only.
func (e *endpointShards) encoded(host, namespace string) []*gen.Endpoint {
	e.mu.RLock()
	defer e.mu.RUnlock()
	shards := e.services[serviceID{host, namespace}].shards
	n := 0
	for _, s := range shards {
		n += len(s.endpoints)
	}
	out := make([]*gen.Endpoint, 0, n)
	for _, s := range shards {
		out = append(out, s.endpoints...)
	}
	return out
}

// known reports whether (host, namespace) has a service key.
func (e *endpointShards) known(host, namespace string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.services[serviceID{host, namespace}].known
}

// pushedService returns the last full push's service (host, namespace),
// nil when it did not list it.
func (e *endpointShards) pushedService(host, namespace string) *model.Service {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.services[serviceID{host, namespace}].pushed
}

// pushedServices returns every service of the last full push, in no order.
func (e *endpointShards) pushedServices() []*model.Service {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*model.Service, 0, len(e.services))
	for _, st := range e.services {
		if st.pushed != nil {
			out = append(out, st.pushed)
		}
	}
	return out
}

// swapPushed records services as the last full push's and returns, for
// each, the service the push before listed under its (host, namespace)
// (nil when none), and the services it listed that services lacks. The
// full push calls it, one at a time.
func (e *endpointShards) swapPushed(services []*model.Service) (prev, vanished []*model.Service) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.round++
	prev = make([]*model.Service, len(services))
	for i, svc := range services {
		id := serviceID{svc.Hostname, svc.Namespace}
		st := e.services[id]
		if st.round != e.round {
			// The first service listed under id wins, as its resources do.
			prev[i] = st.pushed
		}
		st.pushed, st.round = svc, e.round
		e.services[id] = st
	}
	for id, st := range e.services {
		if st.pushed == nil || st.round == e.round {
			continue
		}
		vanished = append(vanished, st.pushed)
		if !st.known && len(st.shards) == 0 {
			delete(e.services, id)
			continue
		}
		st.pushed = nil
		e.services[id] = st
	}
	return prev, vanished
}

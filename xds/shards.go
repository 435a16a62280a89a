package xds

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/meshbridge/meshbridge/model"
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
// namespace) and per shard (the registry or controller that contributed
// them), as Istio's EndpointIndex does (pilot/pkg/model/endpointshards.go).
// A service key exists from SvcUpdate(add) or its first non-empty update until
// SvcUpdate deletes it; an empty update keeps it. Of each endpoint it keeps
// what clients are sent (an immutable encodedEndpoint, 80 bytes, shared by
// later updates that leave it unchanged), not the model.Endpoint: its
// LbEndpoint is encoded when the endpoint arrives and kept while an endpoint
// with the same address, port and weight replaces it (encodeShard). Safe
// for concurrent use; the entries and encodings it hands out are read-only.
type endpointShards struct {
	mu       sync.RWMutex
	services map[serviceID]map[string][]*encodedEndpoint
}

// newEndpointShards returns an empty index.
func newEndpointShards() *endpointShards {
	return &endpointShards{services: make(map[serviceID]map[string][]*encodedEndpoint)}
}

// update replaces shard's endpoints of (host, namespace) and returns the push
// this requires. It follows Istio's DiscoveryServer.edsCacheUpdate
// (pilot/pkg/xds/eds.go, release-1.29) but for what it compares and for
// service accounts:
//  1. no endpoints for an unknown service: no key is created, no push;
//  2. no endpoints for a known service: the key stays (0↔N flaps never cause
//     full pushes); EDS push when the shard had endpoints, else none;
//  3. first endpoints of an unknown service: full push (clients have no
//     cluster for it yet);
//  4. the shard's endpoints are unchanged in what clients are sent (address,
//     port, service port, weight, locality; sameForClients), in any order:
//     no push. Labels, service account and workload name reach no client
//     (meshbridge's LbEndpoints carry no metadata), so a change of only
//     those is kept without a push;
//  5. otherwise: EDS push. A changed set of service accounts never pushes
//     more: Istio pushes fully because its clusters carry the accounts as
//     TLS subject alt names; meshbridge's clusters carry none.
func (e *endpointShards) update(shard, host, namespace string, endpoints []*model.Endpoint) pushKind {
	id := serviceID{host, namespace}
	e.mu.Lock()
	defer e.mu.Unlock()
	shards, known := e.services[id]
	if len(endpoints) == 0 {
		if !known || len(shards[shard]) == 0 {
			return noPush
		}
		delete(shards, shard)
		return edsPush
	}
	if !known {
		e.services[id] = map[string][]*encodedEndpoint{shard: encodeShard(sortEndpoints(endpoints), nil)}
		return fullPush
	}
	old := shards[shard]
	cur := encodeShard(sortEndpoints(endpoints), old)
	shards[shard] = cur
	if slices.EqualFunc(old, cur, sameForClients) {
		return noPush
	}
	return edsPush
}

// sameForClients reports whether a and b give clients the same endpoint:
// every field buildLoadAssignment reads.
func sameForClients(a, b *encodedEndpoint) bool {
	return a == b || a.address == b.address && a.port == b.port && a.portName == b.portName &&
		a.weight == b.weight && a.locality == b.locality
}

// encodeShard returns sorted as encodedEndpoints. An endpoint at the same
// place in the sort order as one of old (address, port, service port) keeps
// old's entry when every field is the same (sameForClients), else its
// encoding when the LbEndpoint is the same (sameLbEndpoint); the others are
// encoded. Both are sorted, so one merge walk finds them. Entries are
// immutable once made: readers hold them without the lock. Each is its own
// 80-byte allocation (an exact size class), so none keeps another alive.
func encodeShard(sorted []*model.Endpoint, old []*encodedEndpoint) []*encodedEndpoint {
	out := make([]*encodedEndpoint, len(sorted))
	j := 0
	for i, ep := range sorted {
		cur := endpointOf(ep)
		c := -1
		for j < len(old) {
			if c = compareEncoded(old[j], &cur); c >= 0 {
				break
			}
			j++
		}
		if c == 0 {
			prev := old[j]
			j++
			if sameForClients(prev, &cur) {
				out[i] = prev
				continue
			}
			if sameLbEndpoint(prev, &cur) {
				cur.lb = prev.lb
			}
		}
		if cur.lb == nil {
			cur.lb = encodeLbEndpoint(&cur)
		}
		kept := new(encodedEndpoint)
		*kept = cur
		out[i] = kept
	}
	return out
}

// compareEncoded is compareEndpoints without the workload name, which
// encodedEndpoints do not keep.
func compareEncoded(a, b *encodedEndpoint) int {
	if c := strings.Compare(a.address, b.address); c != 0 {
		return c
	}
	if c := cmp.Compare(a.port, b.port); c != 0 {
		return c
	}
	return strings.Compare(a.portName, b.portName)
}

// ensure creates the key of (host, namespace) with no endpoints, if absent.
func (e *endpointShards) ensure(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id := (serviceID{host, namespace}); e.services[id] == nil {
		e.services[id] = make(map[string][]*encodedEndpoint)
	}
}

// delete drops every shard of (host, namespace): the service is gone.
func (e *endpointShards) delete(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.services, serviceID{host, namespace})
}

// encoded returns the endpoints of (host, namespace) from every shard,
// shards in name order, each shard's endpoints sorted (sortEndpoints), in
// a new slice the caller may reorder; the encodings are read-only.
func (e *endpointShards) encoded(host, namespace string) []*encodedEndpoint {
	e.mu.RLock()
	defer e.mu.RUnlock()
	shards := e.services[serviceID{host, namespace}]
	n := 0
	for _, s := range shards {
		n += len(s)
	}
	out := make([]*encodedEndpoint, 0, n)
	for _, name := range slices.Sorted(maps.Keys(shards)) {
		out = append(out, shards[name]...)
	}
	return out
}

// known reports whether (host, namespace) has a service key.
func (e *endpointShards) known(host, namespace string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	_, ok := e.services[serviceID{host, namespace}]
	return ok
}

// sortEndpoints returns a sorted copy, so that equal sets compare equal
// whatever order the caller listed them in.
func sortEndpoints(endpoints []*model.Endpoint) []*model.Endpoint {
	out := slices.Clone(endpoints)
	slices.SortFunc(out, compareEndpoints)
	return out
}

// compareEndpoints is sortEndpoints' order: address, port, service port
// name, workload name.
func compareEndpoints(a, b *model.Endpoint) int {
	if c := strings.Compare(a.Address, b.Address); c != 0 {
		return c
	}
	if c := cmp.Compare(a.EndpointPort, b.EndpointPort); c != 0 {
		return c
	}
	if c := strings.Compare(a.ServicePortName, b.ServicePortName); c != 0 {
		return c
	}
	return strings.Compare(a.WorkloadName, b.WorkloadName)
}

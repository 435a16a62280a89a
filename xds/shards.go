package xds

import (
	"cmp"
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
// namespace) and per shard (the controller that contributed them: each
// shard is one owner's whole set for the service), as Istio's EndpointIndex does (pilot/pkg/model/endpointshards.go).
// A service key exists from SvcUpdate(add) or its first non-empty update until
// SvcUpdate deletes it; an empty update keeps it. Of each endpoint it keeps
// what clients are sent (an immutable encodedEndpoint, 48 bytes, shared by
// later updates that leave it unchanged), not the model.Endpoint: its
// LbEndpoint is encoded when the endpoint arrives and kept while an endpoint
// with the same address, port and weight replaces it (encodeShard). Safe
// for concurrent use; the entries and encodings it hands out are read-only.
type endpointShards struct {
	mu sync.RWMutex
	// services: every service key, with its non-empty shards sorted by
	// name (nil: none). A service has one shard per controller serving
	// it (meshbridge has one), so a slice: a map per service would cost
	// ~400 bytes where one entry costs 40.
	services map[serviceID][]shard
}

// shard is one shard's endpoints of a service, sorted (sortEndpoints).
type shard struct {
	name      string
	endpoints []*encodedEndpoint
}

// newEndpointShards returns an empty index.
func newEndpointShards() *endpointShards {
	return &endpointShards{services: make(map[serviceID][]shard)}
}

// find returns the index of the shard named name in shards, or where it
// would be inserted, and whether it is there.
func find(shards []shard, name string) (int, bool) {
	return slices.BinarySearchFunc(shards, name, func(s shard, name string) int { return strings.Compare(s.name, name) })
}

// update replaces the endpoints shard name holds of (host, namespace) and returns the push
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
func (e *endpointShards) update(name, host, namespace string, endpoints []*model.Endpoint) pushKind {
	id := serviceID{host, namespace}
	e.mu.Lock()
	defer e.mu.Unlock()
	shards, known := e.services[id]
	i, found := find(shards, name)
	if len(endpoints) == 0 {
		if !found {
			return noPush
		}
		if len(shards) == 1 {
			e.services[id] = nil
		} else {
			e.services[id] = slices.Delete(shards, i, i+1)
		}
		return edsPush
	}
	if !known {
		e.services[id] = []shard{{name: name, endpoints: encodeShard(sortEndpoints(endpoints), nil)}}
		return fullPush
	}
	if !found {
		e.services[id] = slices.Insert(shards, i, shard{name: name, endpoints: encodeShard(sortEndpoints(endpoints), nil)})
		return edsPush
	}
	old := shards[i].endpoints
	cur := encodeShard(sortEndpoints(endpoints), old)
	shards[i].endpoints = cur
	if slices.EqualFunc(old, cur, sameForClients) {
		return noPush
	}
	return edsPush
}

// sameForClients reports whether a and b give clients the same endpoint:
// every field buildLoadAssignment reads.
func sameForClients(a, b *encodedEndpoint) bool {
	return a == b || a.address == b.address && a.port == b.port && a.weight == b.weight && samePlace(a.place, b.place)
}

// encodeShard returns sorted as encodedEndpoints. An endpoint at the same
// place in the sort order as one of old (address, port, service port) keeps
// old's entry when every field is the same (sameForClients), else its
// encoding when the LbEndpoint is the same (address, port and max(weight,
// 1), encodeLbEndpoint); the others are encoded. Both are sorted, so one merge walk finds them. Entries are
// immutable once made: readers hold them without the lock. Each is its own
// 48-byte allocation (an exact size class), so none keeps another alive;
// new entries share the endpointPlaces of old ones (places).
func encodeShard(sorted []*model.Endpoint, old []*encodedEndpoint) []*encodedEndpoint {
	out := make([]*encodedEndpoint, len(sorted))
	var pl places
	j := 0
	for i, ep := range sorted {
		here := endpointPlace{portName: ep.ServicePortName, locality: ep.Locality}
		c := -1
		for j < len(old) {
			if c = compareTo(old[j], ep.Address, ep.EndpointPort, ep.ServicePortName); c >= 0 {
				break
			}
			j++
		}
		var lb string
		if c == 0 {
			// Same address, port and service port.
			prev := old[j]
			j++
			pl.remember(prev.place)
			if prev.weight == ep.Weight && *prev.place == here {
				out[i] = prev
				continue
			}
			if max(prev.weight, 1) == max(ep.Weight, 1) {
				lb = prev.lb // the same LbEndpoint
			}
		}
		e := &encodedEndpoint{address: ep.Address, lb: lb, place: pl.of(here), port: ep.EndpointPort, weight: ep.Weight}
		if e.lb == "" {
			e.lb = encodeLbEndpoint(e)
		}
		out[i] = e
	}
	return out
}

// compareTo compares a with the endpoint at address and port serving
// portName: compareEndpoints without the workload name, which
// encodedEndpoints do not keep.
func compareTo(a *encodedEndpoint, address string, port uint32, portName string) int {
	if c := strings.Compare(a.address, address); c != 0 {
		return c
	}
	if c := cmp.Compare(a.port, port); c != 0 {
		return c
	}
	return strings.Compare(a.portName(), portName)
}

// ensure creates the key of (host, namespace) with no endpoints, if absent.
func (e *endpointShards) ensure(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id := (serviceID{host, namespace}); !e.knownLocked(id) {
		e.services[id] = nil
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
		n += len(s.endpoints)
	}
	out := make([]*encodedEndpoint, 0, n)
	for _, s := range shards {
		out = append(out, s.endpoints...)
	}
	return out
}

// known reports whether (host, namespace) has a service key.
func (e *endpointShards) known(host, namespace string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.knownLocked(serviceID{host, namespace})
}

func (e *endpointShards) knownLocked(id serviceID) bool {
	_, ok := e.services[id]
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

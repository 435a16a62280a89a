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
// SvcUpdate deletes it; an empty update keeps it. Each endpoint's LbEndpoint
// is encoded when the endpoint arrives and kept while an endpoint with the
// same address, port and weight replaces it (encodeShard). Safe for
// concurrent use; the endpoint slices and encodings it hands out are
// read-only.
type endpointShards struct {
	mu       sync.RWMutex
	services map[serviceID]map[string]shardEndpoints
}

// shardEndpoints is one shard's endpoints of a service, sorted
// (sortEndpoints); lb[i] is endpoints[i]'s LbEndpoint encoding
// (encodeLbEndpoint).
type shardEndpoints struct {
	endpoints []*model.Endpoint
	lb        [][]byte
}

// newEndpointShards returns an empty index.
func newEndpointShards() *endpointShards {
	return &endpointShards{services: make(map[serviceID]map[string]shardEndpoints)}
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
		if !known || len(shards[shard].endpoints) == 0 {
			return noPush
		}
		delete(shards, shard)
		return edsPush
	}
	sorted := sortEndpoints(endpoints)
	if !known {
		e.services[id] = map[string]shardEndpoints{shard: encodeShard(sorted, shardEndpoints{})}
		return fullPush
	}
	old := shards[shard]
	shards[shard] = encodeShard(sorted, old)
	if slices.EqualFunc(old.endpoints, sorted, sameForClients) {
		return noPush
	}
	return edsPush
}

// sameForClients reports whether a and b give clients the same endpoint:
// the fields buildLoadAssignment reads.
func sameForClients(a, b *model.Endpoint) bool {
	return a.Address == b.Address && a.EndpointPort == b.EndpointPort && a.ServicePortName == b.ServicePortName &&
		a.Weight == b.Weight && a.Locality == b.Locality
}

// encodeShard pairs sorted with LbEndpoint encodings: old's encoding of an
// endpoint at the same place in the sort order with the same LbEndpoint
// (sameLbEndpoint), else a new one. Both are sorted, so one merge walk
// finds them.
func encodeShard(sorted []*model.Endpoint, old shardEndpoints) shardEndpoints {
	lb := make([][]byte, len(sorted))
	j := 0
	for i, ep := range sorted {
		c := -1
		for j < len(old.endpoints) {
			if c = compareEndpoints(old.endpoints[j], ep); c >= 0 {
				break
			}
			j++
		}
		if c == 0 {
			if sameLbEndpoint(old.endpoints[j], ep) {
				lb[i] = old.lb[j]
			}
			j++
		}
		if lb[i] == nil {
			lb[i] = encodeLbEndpoint(ep)
		}
	}
	return shardEndpoints{endpoints: sorted, lb: lb}
}

// ensure creates the key of (host, namespace) with no endpoints, if absent.
func (e *endpointShards) ensure(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id := (serviceID{host, namespace}); e.services[id] == nil {
		e.services[id] = make(map[string]shardEndpoints)
	}
}

// delete drops every shard of (host, namespace): the service is gone.
func (e *endpointShards) delete(host, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.services, serviceID{host, namespace})
}

// endpoints returns the endpoints of (host, namespace) from every shard,
// shards in name order, each shard's endpoints sorted. Read-only.
func (e *endpointShards) endpoints(host, namespace string) []*model.Endpoint {
	e.mu.RLock()
	defer e.mu.RUnlock()
	shards := e.services[serviceID{host, namespace}]
	var out []*model.Endpoint
	for _, name := range slices.Sorted(maps.Keys(shards)) {
		out = append(out, shards[name].endpoints...)
	}
	return out
}

// encoded returns what endpoints returns, each endpoint with its LbEndpoint
// encoding. Read-only.
func (e *endpointShards) encoded(host, namespace string) []encodedEndpoint {
	e.mu.RLock()
	defer e.mu.RUnlock()
	shards := e.services[serviceID{host, namespace}]
	n := 0
	for _, s := range shards {
		n += len(s.endpoints)
	}
	out := make([]encodedEndpoint, 0, n)
	for _, name := range slices.Sorted(maps.Keys(shards)) {
		s := shards[name]
		for i, ep := range s.endpoints {
			out = append(out, encodedEndpoint{ep: ep, lb: s.lb[i]})
		}
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

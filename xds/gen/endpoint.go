package gen

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"unique"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/model"
)

// Endpoint is what a ClusterLoadAssignment carries of an endpoint (address,
// port, weight, the service port it serves and its locality) with its
// LbEndpoint's encoding, and its labels, which decide the DestinationRule
// subsets whose ClusterLoadAssignments hold it: all the xDS server keeps of
// an endpoint, since service account and workload name reach no client
// (meshbridge's LbEndpoints carry no metadata, its clusters no subject alt
// names). Immutable once made (EncodeEndpoints): readers hold it without a
// lock. 48 bytes: the service port, locality and labels, which most
// endpoints share, within a service and across services, are one interned
// endpointPlace, and the encoding is a string.
type Endpoint struct {
	address string
	// lb is the LbEndpoint's encoding (wire.LbEndpoint); "" where no
	// encoding is needed (BuildLoadAssignments) and where the address is
	// not valid UTF-8, which proto.Marshal refuses.
	lb     string
	place  unique.Handle[endpointPlace]
	port   uint32 // model.Endpoint.EndpointPort
	weight uint32 // lbWeight of model.Endpoint.Weight
}

// endpointPlace is where an endpoint serves: the service port it serves
// (ServicePortName), its locality and its labels (canonLabels). Shared,
// read-only.
type endpointPlace struct {
	portName string
	locality string
	labels   string
}

// canonLabels returns labels as one string, "" for none: each key and
// value followed by a NUL, keys in order. A label key or value never holds
// a NUL (Kubernetes' label syntax), so equal strings are equal sets.
func canonLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(labels))
	n := 0
	for _, k := range keys {
		n += len(k) + len(labels[k]) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// eachLabel calls f with each label of canon (canonLabels' form), in key
// order, until f returns false.
func eachLabel(canon string, f func(k, v string) bool) {
	for canon != "" {
		k, rest, _ := strings.Cut(canon, "\x00")
		v, rest, _ := strings.Cut(rest, "\x00")
		if !f(k, v) {
			return
		}
		canon = rest
	}
}

// sameLabels reports whether canon (canonLabels' form) is labels, without
// allocating.
func sameLabels(canon string, labels map[string]string) bool {
	n, same := 0, true
	eachLabel(canon, func(k, v string) bool {
		n++
		w, ok := labels[k]
		same = ok && w == v
		return same
	})
	return same && n == len(labels)
}

// hasLabels reports whether canon (canonLabels' form) holds every label of
// selector: a DestinationRule subset's rule for which endpoints it selects
// (Istio's labels.Instance.SubsetOf). An empty selector selects every
// endpoint.
func hasLabels(canon string, selector map[string]string) bool {
	found := 0
	eachLabel(canon, func(k, v string) bool {
		if w, ok := selector[k]; ok {
			if w != v {
				return false
			}
			found++
		}
		return true
	})
	return found == len(selector)
}

// Address is the endpoint's address (model.Endpoint.Address).
func (e *Endpoint) Address() string { return e.address }

func (e *Endpoint) portName() string { return e.place.Value().portName }
func (e *Endpoint) locality() string { return e.place.Value().locality }
func (e *Endpoint) labels() string   { return e.place.Value().labels }

// lbWeight is the load_balancing_weight an endpoint of weight w is sent
// with: w, or 1 for 0 (a WorkloadEntry without a weight), as grpc-go NACKs a
// weight-0 endpoint (gRFC A27, xdsresource/unmarshal_eds.go) and Envoy
// rejects one. It is the one place an endpoint's weight is normalised;
// weightScale then scales a whole assignment down when its weights sum
// past what clients accept.
func lbWeight(w uint32) uint32 { return max(w, 1) }

// SameForClients reports whether a and b give clients the same endpoint:
// every field a ClusterLoadAssignment is built from (address, port,
// weight, service port, locality) and, when byLabels (LabelsMatter: the
// service's DestinationRule has subsets, or fails over by labels), the
// labels, which decide the subsets' assignments and the failover
// priorities. It is the one definition the endpoint shards decide pushes
// by (an update whose endpoints are all the same for clients pushes
// nothing).
func SameForClients(a, b *Endpoint, byLabels bool) bool {
	switch {
	case a == b:
		return true
	case a.address != b.address || a.port != b.port || a.weight != b.weight:
		return false
	case a.place == b.place:
		return true
	case byLabels:
		return false
	}
	pa, pb := a.place.Value(), b.place.Value()
	return pa.portName == pb.portName && pa.locality == pb.locality
}

// endpointOf returns ep's Endpoint at place, without an encoding.
func endpointOf(ep *model.Endpoint, place unique.Handle[endpointPlace]) Endpoint {
	return Endpoint{address: ep.Address, place: place, port: ep.EndpointPort, weight: lbWeight(ep.Weight)}
}

// places interns the endpointPlaces of one call, remembering the last
// maxPlaces so that most endpoints cost no lookup in unique's table: a
// service has few ports times localities. It lives on the caller's stack.
type places struct {
	n    int
	list [maxPlaces]struct {
		place  endpointPlace
		handle unique.Handle[endpointPlace]
	}
}

const maxPlaces = 16

// of returns here's handle.
func (p *places) of(here endpointPlace) unique.Handle[endpointPlace] {
	for _, e := range p.list[:p.n] {
		if e.place == here {
			return e.handle
		}
	}
	return p.add(here)
}

// add interns here, a place not in the cache, and caches it while there is
// room.
func (p *places) add(here endpointPlace) unique.Handle[endpointPlace] {
	h := unique.Make(here)
	if p.n < maxPlaces {
		p.list[p.n].place, p.list[p.n].handle = here, h
		p.n++
	}
	return h
}

// ofEndpoint returns the handle of ep's place. A place of this call's
// with ep's port name, locality and labels is found without building
// ep's canonLabels.
func (p *places) ofEndpoint(ep *model.Endpoint) unique.Handle[endpointPlace] {
	for _, e := range p.list[:p.n] {
		if e.place.portName == ep.ServicePortName && e.place.locality == ep.Locality && sameLabels(e.place.labels, ep.Labels) {
			return e.handle
		}
	}
	return p.add(endpointPlace{portName: ep.ServicePortName, locality: ep.Locality, labels: canonLabels(ep.Labels)})
}

// plain returns endpoints with no encoding.
func plain(endpoints []*model.Endpoint) []*Endpoint {
	out := make([]*Endpoint, len(endpoints))
	var pl places
	for i, ep := range endpoints {
		e := endpointOf(ep, pl.ofEndpoint(ep))
		out[i] = &e
	}
	return out
}

// EncodeEndpoints returns endpoints, in any order, as Endpoints sorted by
// address, port, service port and workload name (SortEndpoints), their
// LbEndpoints encoded. old is the same shard's previous result (nil: none):
// an endpoint at the same place in the order as one of old (address, port,
// service port) keeps old's entry when nothing of it changed (weight,
// locality, labels), else old's encoding when its LbEndpoint is the same
// (address, port and weight); only the others are encoded. So an update of
// n endpoints of which one changed encodes one. Each entry is its own
// 48-byte allocation (an exact size class), so none keeps another alive.
// endpoints is not modified.
func EncodeEndpoints(endpoints []*model.Endpoint, old []*Endpoint) []*Endpoint {
	sorted := SortEndpoints(endpoints)
	out := make([]*Endpoint, len(sorted))
	var pl places
	j := 0
	for i, ep := range sorted {
		weight := lbWeight(ep.Weight)
		c := -1
		for j < len(old) {
			if c = compareTo(old[j], ep.Address, ep.EndpointPort, ep.ServicePortName); c >= 0 {
				break
			}
			j++
		}
		var lb string
		var place unique.Handle[endpointPlace]
		if c == 0 {
			// Same address, port and service port.
			prev := old[j]
			j++
			if was := prev.place.Value(); was.locality == ep.Locality && sameLabels(was.labels, ep.Labels) {
				place = prev.place
			} else {
				place = pl.ofEndpoint(ep)
			}
			if prev.weight == weight && prev.place == place {
				out[i] = prev
				continue
			}
			if prev.weight == weight {
				lb = prev.lb // the same LbEndpoint
			}
		} else {
			place = pl.ofEndpoint(ep)
		}
		e := &Endpoint{address: ep.Address, lb: lb, place: place, port: ep.EndpointPort, weight: weight}
		if e.lb == "" {
			e.lb = wire.LbEndpoint(e.address, e.port, e.weight)
		}
		out[i] = e
	}
	return out
}

// compareTo compares a with the endpoint at address and port serving
// portName: compareEndpoints without the workload name, which Endpoints do
// not keep.
func compareTo(a *Endpoint, address string, port uint32, portName string) int {
	if c := strings.Compare(a.address, address); c != 0 {
		return c
	}
	if c := cmp.Compare(a.port, port); c != 0 {
		return c
	}
	return strings.Compare(a.portName(), portName)
}

// SortEndpoints returns a sorted copy (address, port, service port name,
// workload name), so that equal sets compare equal whatever order the
// caller listed them in.
func SortEndpoints(endpoints []*model.Endpoint) []*model.Endpoint {
	out := slices.Clone(endpoints)
	slices.SortFunc(out, compareEndpoints)
	return out
}

// compareEndpoints is SortEndpoints' order.
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

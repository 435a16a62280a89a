package policy

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1"
)

// Rules is an immutable set of DestinationRules, one per host (rule 3),
// and of VirtualServices, one per host (rule 8).
type Rules struct {
	destinations hostIndex[*networking.DestinationRule]
	routing      hostIndex[*networking.VirtualService]
}

// hostIndex finds the object of a host by rule 4.
type hostIndex[T comparable] struct {
	exact map[string]T
	// wildcards are the objects of "*" and "*.<suffix>" hosts, longest
	// suffix first (rule 4); suffix includes the leading dot ("" for "*").
	wildcards []wildcard[T]
}

type wildcard[T comparable] struct {
	suffix string
	obj    T
}

// newHostIndex indexes objs by host; hosts are lower-case and distinct.
func newHostIndex[T comparable](byHost map[string]T) hostIndex[T] {
	x := hostIndex[T]{exact: map[string]T{}}
	for host, obj := range byHost {
		switch {
		case host == "*":
			x.wildcards = append(x.wildcards, wildcard[T]{suffix: "", obj: obj})
		case strings.HasPrefix(host, "*."):
			x.wildcards = append(x.wildcards, wildcard[T]{suffix: host[1:], obj: obj})
		default:
			x.exact[host] = obj
		}
	}
	slices.SortFunc(x.wildcards, func(a, b wildcard[T]) int {
		return cmp.Or(cmp.Compare(len(b.suffix), len(a.suffix)), strings.Compare(a.suffix, b.suffix))
	})
	return x
}

// find returns the object of host (rule 4), the zero T when none.
func (x *hostIndex[T]) find(host string) T {
	host = strings.ToLower(host)
	if obj, ok := x.exact[host]; ok {
		return obj
	}
	for _, w := range x.wildcards {
		if strings.HasSuffix(host, w.suffix) && len(host) > len(w.suffix) {
			return w.obj
		}
	}
	var zero T
	return zero
}

func (x *hostIndex[T]) len() int { return len(x.exact) + len(x.wildcards) }

// same reports whether x and y hold the same objects for the same hosts.
func (x *hostIndex[T]) same(y *hostIndex[T]) bool {
	return maps.Equal(x.exact, y.exact) && slices.Equal(x.wildcards, y.wildcards)
}

// NewRules returns the rules of destination rules and virtual services
// given by host (lower case; "*" and "*.<suffix>" wildcards), as a Source
// hands them out: the objects themselves, matched by rule 4.
func NewRules(destinations map[string]*networking.DestinationRule, routing map[string]*networking.VirtualService) *Rules {
	return &Rules{destinations: newHostIndex(destinations), routing: newHostIndex(routing)}
}

// For returns the DestinationRule of host (rule 4), nil when none
// matches. A nil Rules has none.
func (r *Rules) For(host string) *networking.DestinationRule {
	if r == nil {
		return nil
	}
	return r.destinations.find(host)
}

// RoutingFor returns the VirtualService of host (rules 4 and 8), nil when
// none matches. A nil Rules has none.
func (r *Rules) RoutingFor(host string) *networking.VirtualService {
	if r == nil {
		return nil
	}
	return r.routing.find(host)
}

// Len is how many rules r holds: DestinationRules and VirtualServices by
// host.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return r.destinations.len() + r.routing.len()
}

// same reports whether r and o hold the same objects for the same hosts.
func (r *Rules) same(o *Rules) bool {
	return r.destinations.same(&o.destinations) && r.routing.same(&o.routing)
}

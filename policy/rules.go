package policy

import (
	"cmp"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1"
)

// Rules is an immutable set of DestinationRules, one per host (rule 3).
type Rules struct {
	exact map[string]*networking.DestinationRule
	// wildcards are the rules of "*" and "*.<suffix>" hosts, longest
	// suffix first (rule 4); suffix includes the leading dot ("" for "*").
	wildcards []wildcard
}

type wildcard struct {
	suffix string
	rule   *networking.DestinationRule
}

// newRules indexes rules, whose hosts are lower-case and distinct.
func newRules(rules []*networking.DestinationRule) *Rules {
	r := &Rules{exact: map[string]*networking.DestinationRule{}}
	for _, dr := range rules {
		switch host := dr.GetHost(); {
		case host == "*":
			r.wildcards = append(r.wildcards, wildcard{suffix: "", rule: dr})
		case strings.HasPrefix(host, "*."):
			r.wildcards = append(r.wildcards, wildcard{suffix: host[1:], rule: dr})
		default:
			r.exact[host] = dr
		}
	}
	slices.SortFunc(r.wildcards, func(a, b wildcard) int {
		return cmp.Or(cmp.Compare(len(b.suffix), len(a.suffix)), strings.Compare(a.suffix, b.suffix))
	})
	return r
}

// For returns the DestinationRule of host (rule 4), nil when none
// matches. A nil Rules has none.
func (r *Rules) For(host string) *networking.DestinationRule {
	if r == nil {
		return nil
	}
	host = strings.ToLower(host)
	if dr := r.exact[host]; dr != nil {
		return dr
	}
	for _, w := range r.wildcards {
		if strings.HasSuffix(host, w.suffix) && len(host) > len(w.suffix) {
			return w.rule
		}
	}
	return nil
}

// Len is how many rules r holds.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.exact) + len(r.wildcards)
}

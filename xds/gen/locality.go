package gen

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire"
)

// This file serves a DestinationRule's loadBalancer.localityLbSetting
// (gRFC A27: clients pick among priorities, then among a priority's
// localities by weight): the assignment a client is sent depends on where
// it runs (its node's locality and labels), as istiod builds it for each
// proxy (pilot/pkg/networking/core/loadbalancer, ApplyLocalityLoadBalancer).

// Topology labels Istio adds to a workload's and a proxy's labels from
// their locality (AugmentLabels), so that failoverPriority can name them.
const (
	LabelTopologyRegion  = "topology.kubernetes.io/region"
	LabelTopologyZone    = "topology.kubernetes.io/zone"
	LabelTopologySubzone = "topology.istio.io/subzone"
)

// localityLB is the locality load balancing of a cluster: locality weights
// for clients whose locality a distribute rule's from matches, else, with
// outlier detection, failover priorities. Read-only.
type localityLB struct {
	distribute []*networking.LocalityLoadBalancerSetting_Distribute
	// failover is on: priorities by failoverPriority labels, then by
	// locality (the failover regions).
	failover bool
	regions  []*networking.LocalityLoadBalancerSetting_Failover
	// labels are failoverPriority's label names, in order; fixed holds the
	// value a "label=value" entry sets for every client.
	labels []string
	fixed  map[string]string
	// explicit: the rule sets localityLbSetting (not the mesh default).
	explicit bool
}

// localityLBOf returns the locality load balancing of a cluster whose
// served traffic policy is tp, nil when none applies. Mirrors Istio's
// GetEffectiveLbSetting and ApplyLocalityLoadBalancer:
//   - the setting is the rule's loadBalancer.localityLbSetting, else the
//     mesh's, which is Istio's default (enabled, nothing set); enabled:
//     false turns it off;
//   - distribute sets locality weights;
//   - otherwise failover applies only with outlierDetection (without it a
//     client would never leave a priority whose endpoints fail): priorities
//     by the failoverPriority labels, then, when failover is set or no
//     failoverPriority is, by locality.
func localityLBOf(tp *networking.TrafficPolicy) *localityLB {
	s := tp.GetLoadBalancer().GetLocalityLbSetting()
	if s.GetEnabled() != nil && !s.GetEnabled().GetValue() {
		return nil
	}
	if len(s.GetDistribute()) > 0 {
		return &localityLB{distribute: s.GetDistribute()}
	}
	if tp.GetOutlierDetection() == nil {
		return nil
	}
	if s == nil {
		return meshDefaultFailover
	}
	l := &localityLB{failover: true, regions: s.GetFailover(), explicit: true}
	for _, p := range s.GetFailoverPriority() {
		name, value, fixed := strings.Cut(p, "=")
		l.labels = append(l.labels, name)
		if fixed {
			if l.fixed == nil {
				l.fixed = map[string]string{}
			}
			l.fixed[name] = value
		}
	}
	return l
}

// uniform reports whether l sends every client the plain assignment of
// unique (sorted by address): failover by locality alone over endpoints
// of one locality, which every client has at priority 0. Most services
// live in one zone, and their assignments are then not Localized.
func (l *localityLB) uniform(unique []*Endpoint) bool {
	if !l.failover || len(l.labels) > 0 {
		return false
	}
	for _, e := range unique[1:] {
		if e.place != unique[0].place && e.locality() != unique[0].locality() {
			return false
		}
	}
	return true
}

// ownIsPlain reports whether a client without locality or labels is sent
// the plain assignment of localities names: failover by locality alone,
// no failover regions, and no locality without a region (every locality
// is then in another region than the client's, at one priority).
func (l *localityLB) ownIsPlain(names []string) bool {
	if !l.failover || len(l.labels) > 0 || len(l.regions) > 0 {
		return false
	}
	for _, n := range names {
		if r, _, _ := wire.SplitLocality(n); r == "" {
			return false
		}
	}
	return true
}

// meshDefaultFailover is the locality load balancing of a rule with
// outlier detection and no localityLbSetting (Istio's mesh default):
// failover by locality. Shared, read-only: most rules are so.
var meshDefaultFailover = &localityLB{failover: true}

// same reports whether l and o give every client the same assignment.
func (l *localityLB) same(o *localityLB) bool {
	eqDistribute := func(a, b *networking.LocalityLoadBalancerSetting_Distribute) bool {
		return a.GetFrom() == b.GetFrom() && maps.Equal(a.GetTo(), b.GetTo())
	}
	eqFailover := func(a, b *networking.LocalityLoadBalancerSetting_Failover) bool {
		return a.GetFrom() == b.GetFrom() && a.GetTo() == b.GetTo()
	}
	return l.failover == o.failover && l.explicit == o.explicit && slices.EqualFunc(l.distribute, o.distribute, eqDistribute) &&
		slices.EqualFunc(l.regions, o.regions, eqFailover) && slices.Equal(l.labels, o.labels) && maps.Equal(l.fixed, o.fixed)
}

// placeLabel returns the value of label key of a workload or client at
// locality whose labels are label: the locality's part for the topology
// labels, when not empty, else the label (Istio's AugmentLabels).
func placeLabel(locality string, label func(string) string, key string) string {
	region, zone, subzone := wire.SplitLocality(locality)
	switch {
	case key == LabelTopologyRegion && region != "":
		return region
	case key == LabelTopologyZone && zone != "":
		return zone
	case key == LabelTopologySubzone && subzone != "":
		return subzone
	}
	return label(key)
}

// localityMatch reports whether locality matches rule, a distribute
// rule's "region/zone/subzone" in which "*" matches any part and a missing
// zone or subzone any. Mirrors Istio's util.LocalityMatch.
func localityMatch(locality, rule string) bool {
	r, z, s := wire.SplitLocality(locality)
	rr, rz, rs := wire.SplitLocality(rule)
	return (rr == "*" || rr == r) && (rz == "*" || rz == "" || rz == z) && (rs == "*" || rs == "" || rs == s)
}

// localityPriority is a client's priority of an endpoint's locality: 0 in
// its subzone, 1 its zone, 2 its region, 3 elsewhere. Mirrors Istio's
// util.LbPriority.
func localityPriority(client, endpoint string) int {
	cr, cz, cs := wire.SplitLocality(client)
	er, ez, es := wire.SplitLocality(endpoint)
	switch {
	case cr != er:
		return 3
	case cz != ez:
		return 2
	case cs != es:
		return 1
	}
	return 0
}

// formKey returns the key of the assignment a client at locality with
// labels is sent: clients with equal keys are sent equal assignments.
// Distribute: the index of the first rule whose from matches, "" for
// none. Failover: the locality, whether the client has labels (its own or
// its locality's), and, for each failoverPriority label not fixed, the
// client's value.
func (l *localityLB) formKey(locality string, labels map[string]string) string {
	if !l.failover {
		for i, d := range l.distribute {
			if localityMatch(locality, d.GetFrom()) {
				return strconv.Itoa(i)
			}
		}
		return ""
	}
	switch {
	case len(l.labels) == 0 && locality == "" && len(labels) == 0:
		return "\x00-" // no place: the common client, without an allocation
	case len(l.labels) == 0 && len(labels) == 0:
		return locality + "\x00+"
	}
	var b strings.Builder
	b.WriteString(locality)
	if len(labels) > 0 || locality != "" {
		b.WriteString("\x00+")
	} else {
		b.WriteString("\x00-")
	}
	for _, k := range l.labels {
		if _, ok := l.fixed[k]; ok {
			continue
		}
		b.WriteByte(0)
		b.WriteString(placeLabel(locality, func(k string) string { return labels[k] }, k))
	}
	return b.String()
}

// clientOfKey returns the client place a failover formKey encodes: its
// locality and the values of the failoverPriority labels, by name; nil
// labels for a client without any.
func (l *localityLB) clientOfKey(key string) (locality string, labels map[string]string) {
	parts := strings.Split(key, "\x00")
	locality = parts[0]
	if len(parts) < 2 || parts[1] != "+" {
		return locality, nil
	}
	labels = map[string]string{}
	i := 2
	for _, k := range l.labels {
		if v, ok := l.fixed[k]; ok {
			labels[k] = v
			continue
		}
		if i < len(parts) {
			labels[k] = parts[i]
		}
		i++
	}
	return locality, labels
}

// placedEndpoint is one endpoint of an assignment as a localized form
// needs it: its LbEndpoint's encoding, weight (as sent) and labels.
type placedEndpoint struct {
	lb     string
	weight uint32
	labels string // canonLabels' form
}

// placedLocality is one locality of an assignment, its endpoints in
// order.
type placedLocality struct {
	name      string
	endpoints []placedEndpoint
}

// localize returns the localities a client at the place key (formKey's)
// is sent of localities (one per locality, sorted by name): every one at
// priority 0 with its own weight when no rule applies; the localities a
// distribute rule's to names, weighted by it; or failover priorities.
func (l *localityLB) localize(localities []placedLocality, key string) []wire.Locality {
	if !l.failover {
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(l.distribute) {
			return plainLocalities(localities)
		}
		return distribute(localities, l.distribute[i].GetTo())
	}
	locality, labels := l.clientOfKey(key)
	// Each locality split by failoverPriority: one part per priority.
	var out []wire.Locality
	for _, loc := range localities {
		out = append(out, l.byLabels(loc, labels)...)
	}
	denseRank(out)
	if len(l.labels) == 0 || len(l.regions) > 0 {
		for i := range out {
			p := uint32(localityPriority(locality, out[i].Name))
			if p == 3 {
				p = failoverRegion(locality, out[i].Name, l.regions)
			}
			out[i].Priority = out[i].Priority*5 + p
		}
		denseRank(out)
	}
	slices.SortStableFunc(out, func(a, b wire.Locality) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Name, b.Name))
	})
	return out
}

// failoverRegion is the priority of an endpoint in another region than
// the client's: 3, or 4 when a failover rule from the client's region
// names another region than the endpoint's. Mirrors Istio's
// applyLocalityFailover.
func failoverRegion(client, endpoint string, rules []*networking.LocalityLoadBalancerSetting_Failover) uint32 {
	region, _, _ := wire.SplitLocality(client)
	to, _, _ := wire.SplitLocality(endpoint)
	for _, r := range rules {
		if r.GetFrom() == region {
			if r.GetTo() != to {
				return 4
			}
			break
		}
	}
	return 3
}

// byLabels splits loc by the failoverPriority labels: an endpoint's
// priority is 0 when it has the client's value of every label, else
// len(labels)-j for the first label j it differs on. Mirrors Istio's
// applyFailoverPriorityPerLocality; a client without labels puts every
// endpoint at 0, as istiod does a proxy without labels.
func (l *localityLB) byLabels(loc placedLocality, client map[string]string) []wire.Locality {
	if len(l.labels) == 0 || len(client) == 0 {
		return []wire.Locality{placed(loc.name, 0, loc.endpoints)}
	}
	prio := make([]uint32, len(loc.endpoints))
	for i, e := range loc.endpoints {
		for j, k := range l.labels {
			if client[k] != placeLabel(loc.name, func(k string) string { return labelOf(e.labels, k) }, k) {
				prio[i] = uint32(len(l.labels) - j)
				break
			}
		}
	}
	var out []wire.Locality
	for p := range uint32(len(l.labels) + 1) {
		var members []placedEndpoint
		for i, e := range loc.endpoints {
			if prio[i] == p {
				members = append(members, e)
			}
		}
		if len(members) > 0 {
			out = append(out, placed(loc.name, p, members))
		}
	}
	return out
}

// labelOf returns the value of label key in canon (canonLabels' form), ""
// when absent.
func labelOf(canon, key string) string {
	var value string
	eachLabel(canon, func(k, v string) bool {
		if k == key {
			value = v
			return false
		}
		return true
	})
	return value
}

// placed returns the wire locality of endpoints at priority, weighted by
// the sum of their weights.
func placed(name string, priority uint32, endpoints []placedEndpoint) wire.Locality {
	var weight uint64
	lbs := make([]string, len(endpoints))
	for i, e := range endpoints {
		lbs[i] = e.lb
		weight += uint64(e.weight)
	}
	return wire.Locality{Name: name, Weight: uint32(min(weight, math.MaxUint32)), Priority: priority, LbEndpoints: lbs}
}

// plainLocalities returns every locality at priority 0 with its own
// weight.
func plainLocalities(localities []placedLocality) []wire.Locality {
	out := make([]wire.Locality, len(localities))
	for i, loc := range localities {
		out[i] = placed(loc.name, 0, loc.endpoints)
	}
	return out
}

// denseRank renumbers the priorities of out 0, 1, … in their order,
// keeping equal ones equal: clients refuse an assignment that skips a
// priority (gRFC A27).
func denseRank(out []wire.Locality) {
	ps := make([]uint32, len(out))
	for i := range out {
		ps[i] = out[i].Priority
	}
	slices.Sort(ps)
	ps = slices.Compact(ps)
	for i := range out {
		r, _ := slices.BinarySearch(ps, out[i].Priority)
		out[i].Priority = uint32(r)
	}
}

// distribute returns the localities to names, each weighted by its
// percentage, split among the localities it matches in proportion to
// their own weights, rounded up (Istio's applyLocalityWeights). A
// locality matching several entries of to counts under the most specific
// one (most parts named, then by name), where istiod picks one at random.
// Localities to does not name are not sent (istiod sends them without
// endpoints); policy validation keeps each weight in 1-100.
func distribute(localities []placedLocality, to map[string]uint32) []wire.Locality {
	rules := make([]string, 0, len(to))
	for r := range to {
		rules = append(rules, r)
	}
	specificity := func(r string) int {
		n := 0
		for _, p := range strings.SplitN(r, "/", 3) {
			if p != "*" && p != "" {
				n++
			}
		}
		return n
	}
	slices.SortFunc(rules, func(a, b string) int {
		return cmp.Or(cmp.Compare(specificity(b), specificity(a)), strings.Compare(a, b))
	})
	matched := make([]int, len(localities)) // index in rules + 1; 0: none
	total := make([]uint64, len(rules))
	own := make([]uint64, len(localities))
	for i, loc := range localities {
		for _, e := range loc.endpoints {
			own[i] += uint64(e.weight)
		}
		for r, rule := range rules {
			if localityMatch(loc.name, rule) {
				matched[i] = r + 1
				total[r] += own[i]
				break
			}
		}
	}
	var out []wire.Locality
	for i, loc := range localities {
		if matched[i] == 0 {
			continue
		}
		r := matched[i] - 1
		pct := uint64(to[rules[r]])
		if pct == 0 || total[r] == 0 {
			continue
		}
		w := placed(loc.name, 0, loc.endpoints)
		w.Weight = uint32(min((own[i]*pct+total[r]-1)/total[r], math.MaxUint32))
		out = append(out, w)
	}
	return out
}

// Localized is a ClusterLoadAssignment whose form depends on where the
// client runs (a cluster with locality load balancing, localityLBOf): the
// embedded Encoded is the form of a client without locality or labels,
// FormKey names the form of any client (equal keys, equal forms) and Form
// builds it. The xDS cache serves each stream its node's form (xds/cache,
// Resources.ServeLocalized). Immutable.
type Localized struct {
	*Encoded
	lb *localityLB
	// endpoints are the assignment's, grouped by locality: group i is
	// endpoints[ends[i-1]:ends[i]], named names[i], groups in name order.
	// They are the shards' entries (shared): 8 bytes per endpoint.
	endpoints []*Endpoint
	names     []string
	ends      []int32
	scale     scale
	scaled    bool
}

// FormKey returns the key of the form a client at locality
// ("region/zone/subzone", "" for none) with labels (its node's) is sent.
func (r *Localized) FormKey(locality string, labels map[string]string) string {
	return r.lb.formKey(locality, labels)
}

// Form returns the encoding of the form of key (FormKey's), a new slice.
func (r *Localized) Form(key string) []byte {
	b, _ := wire.LoadAssignment(r.name, r.lb.localize(r.placed(), key))
	return b
}

// placed returns the localities of r as localize reads them, in new
// slices: each endpoint's LbEndpoint encoding (again at the scaled weight
// when the weights were scaled), its weight and, when failoverPriority
// reads them, its labels.
func (r *Localized) placed() []placedLocality {
	out := make([]placedLocality, len(r.names))
	backing := make([]placedEndpoint, len(r.endpoints))
	var from int32
	for i, end := range r.ends {
		members := backing[from:end:end]
		for k, e := range r.endpoints[from:end] {
			w := r.scale.of(e.weight)
			lbe := e.lb
			if r.scaled {
				lbe = wire.LbEndpoint(e.address, e.port, w)
			}
			members[k] = placedEndpoint{lb: lbe, weight: w}
			if len(r.lb.labels) > 0 {
				members[k].labels = e.labels()
			}
		}
		out[i] = placedLocality{name: r.names[i], endpoints: members}
		from = end
	}
	return out
}

// SameForms reports whether o is a Localized that sends every client what
// r does: the same setting, own form, localities and endpoints (labels
// included when failoverPriority reads them, SameForClients).
func (r *Localized) SameForms(o any) bool {
	x, ok := o.(*Localized)
	if !ok || !r.lb.same(x.lb) || string(r.wire) != string(x.wire) || r.scale != x.scale ||
		!slices.Equal(r.names, x.names) || !slices.Equal(r.ends, x.ends) {
		return false
	}
	byLabels := len(r.lb.labels) > 0
	return slices.EqualFunc(r.endpoints, x.endpoints, func(a, b *Endpoint) bool { return SameForClients(a, b, byLabels) })
}

// localizedAssignment returns the Localized assignment name of unique
// (sortCompact's output), with lb, each endpoint's weight at s;
// ok false when an endpoint has no encoding (an address that is not valid
// UTF-8) or the name is not valid UTF-8.
func localizedAssignment(name string, unique []*Endpoint, s scale, scaled bool, lb *localityLB) (*Localized, bool) {
	groups := groupByLocality(unique)
	r := &Localized{lb: lb, endpoints: make([]*Endpoint, 0, len(unique)), names: make([]string, len(groups)),
		ends: make([]int32, len(groups)), scale: s, scaled: scaled}
	for i, g := range groups {
		for _, m := range g.members {
			e := unique[m]
			if e.lb == "" {
				return nil, false
			}
			r.endpoints = append(r.endpoints, e)
		}
		r.names[i], r.ends[i] = g.locality, int32(len(r.endpoints))
	}
	if lb.ownIsPlain(r.names) {
		// The client without a place is sent the plain assignment: its
		// encoding from the endpoints' own, as for any other cluster.
		// (Scaled weights give a message instead: localized below.)
		if enc, _ := encodeLoadAssignment(name, unique, nil); enc != nil {
			if e, ok := enc.(*Encoded); ok {
				r.Encoded = e
				return r, true
			}
		}
	}
	own, ok := wire.LoadAssignment(name, lb.localize(r.placed(), lb.formKey("", nil)))
	if !ok {
		return nil, false
	}
	r.Encoded = &Encoded{name: name, wire: own, typ: claType}
	return r, true
}

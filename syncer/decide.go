package syncer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate"
)

// This file holds the Syncer's decisions as pure functions of their inputs:
// who serves a host (rule 1), on which ports (rule 3), whether a merge
// conflicts, what a snapshot does given the outage state (rules 2, 5, 6)
// and what a listing holds (rule 5). The Syncer (sync.go, hosts.go, outage.go) applies them; their
// rules are table-tested in decide_test.go.

// claimant is a service that produces a host: its registry's position in
// the configuration (rank) and its service's key.
type claimant struct {
	rank     int
	registry string
	service  registries.ServiceKey
}

// compareClaimants is rule 1's order: configuration order of the
// registries, then service key.
func compareClaimants(a, b claimant) int {
	return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.registry, b.registry), a.service.Compare(b.service))
}

// role is what a claimant's service is to its host.
type role int

const (
	// roleWinner: its ServiceEntry (ports, labels, registry label) is the
	// host's.
	roleWinner role = iota
	// roleMerged: its instances join the winner's ServiceEntry,
	// translated against the host's ports, unless its protocol conflicts
	// (mergeConflict): a service of the winner's registry (whatever the
	// conflictPolicy), or any service of a later registry under merge.
	roleMerged
	// roleCollision: rejected (host-collision): under conflictPolicy first,
	// a service of a later registry.
	roleCollision
)

// planHost gives each claimant of a host its role, claimants in rule 1's
// order (compareClaimants): the first wins; every other service of the
// winner's registry merges (services a registry lists under names that
// differ in case or in "_" and "-" make one host, and none takes the host
// or its instances from another: a newcomer that sorts first adds its
// instances to those already served, and a fresh bridge serves the same
// union); under merge every later registry's services merge too, its case
// variants alike; under first every later registry's service collides. A
// role never depends on ports: the host's ports are hostPorts' decision.
func planHost(claims []claimant, merge bool) []role {
	roles := make([]role, len(claims))
	for i, c := range claims {
		switch {
		case i == 0:
			roles[i] = roleWinner
		case c.registry == claims[0].registry || merge:
			roles[i] = roleMerged
		default:
			roles[i] = roleCollision
		}
	}
	return roles
}

// hostPorts decides the ports a host's services are translated against
// (rule 3), as the port fields of a translate.Sticky (Port, Protocol,
// ProtocolPorts): own are the ports of the first service of the host, in
// rule 1's order and collisions left out, whose own translation has any (its
// Result.Sticky; zero when none has), and declared whether they are
// configuration (translate.Translator.DeclaresPorts); host are the host's
// ports so far and kept whether they are kept.
//
//	declared | kept, host has ports | result
//	yes      | any                  | own: configuration wins
//	no       | yes                  | host: an instance joining or leaving, a
//	         |                      | newcomer that sorts first, a service
//	         |                      | without instances never moves them
//	no       | no                   | own (zero: no port known, nothing served)
//
// A host's ports are kept from the first decision made once the Syncer is
// ready (before, while the first listings arrive, they follow own, so that
// a freshly started bridge decides them from what the registries list, not
// from the order they list it in), for as long as some service claims the
// host; or from the start for a host whose ports a previous run kept
// (Config.KeptPorts, the state dir).
func hostPorts(own translate.Sticky, declared bool, host translate.Sticky, kept bool) translate.Sticky {
	if !declared && kept && host.Port != 0 {
		return portsOf(host)
	}
	return portsOf(own)
}

// portsOf is s's port fields.
func portsOf(s translate.Sticky) translate.Sticky {
	return translate.Sticky{Port: s.Port, Protocol: s.Protocol, ProtocolPorts: s.ProtocolPorts}
}

// translatedFor reports whether res, a service's own translation, is its
// translation for a host of ports and resolution target: the same port
// fields and resolution, so that it needs no translation of its own for the
// host.
func translatedFor(res translate.Result, target translate.Sticky) bool {
	return res.ServiceEntry != nil && res.Resolution == target.Resolution && sameStickyPorts(res.Sticky, target)
}

// sameStickyPorts reports whether two Stickies keep the same ports.
func sameStickyPorts(a, b translate.Sticky) bool {
	return a.Port == b.Port && a.Protocol == b.Protocol && slices.Equal(a.ProtocolPorts, b.ProtocolPorts)
}

// mergeConflict says why a service whose own translation has ports theirs
// cannot merge into a ServiceEntry with ports ours, "" when it can: a port
// number both have must have one protocol; when they share no number, the
// instances land on the winner's first port, whose protocol must be that
// of the service's first port. Protocols are compared as the ServiceEntry
// carries them (a Dubbo port is TCP), and ports of the same number and
// protocol agree whatever their names.
func mergeConflict(ours, theirs []*networking.ServicePort) string {
	if len(ours) == 0 || len(theirs) == 0 {
		return ""
	}
	shared := false
	for _, t := range theirs {
		i := slices.IndexFunc(ours, func(o *networking.ServicePort) bool { return o.GetNumber() == t.GetNumber() })
		if i < 0 {
			continue
		}
		shared = true
		if o := ours[i]; o.GetProtocol() != t.GetProtocol() {
			return fmt.Sprintf("its port %d is %s, the same port of the registry that serves the host is %s",
				t.GetNumber(), t.GetProtocol(), o.GetProtocol())
		}
	}
	if !shared && ours[0].GetProtocol() != theirs[0].GetProtocol() {
		return fmt.Sprintf("it shares no port with the registry that serves the host, and its protocol %s differs from %s",
			theirs[0].GetProtocol(), ours[0].GetProtocol())
	}
	return ""
}

// snapshotAction is what a Snapshot does (rules 2, 5, 6).
type snapshotAction int

const (
	// actApply: the snapshot is authoritative and applies now.
	actApply snapshotAction = iota
	// actReadError: the read failed; the last-known-good state stays.
	actReadError
	// actGuarded: a disappearance whose removal the delete guard holds; it
	// applies when the guard does (rule 5).
	actGuarded
	// actHoldDown: a disappearance read right after a reconnection waits
	// for the hold-down (rule 6).
	actHoldDown
)

// decideSnapshot decides a snapshot of a service that serves instances
// (it has some now) or not, whose removal the delete guard holds or not,
// under hold-down holdDown (0: off).
func decideSnapshot(snap registries.Snapshot, servesInstances, guarded, holdDown bool) snapshotAction {
	disappears := servesInstances && (snap.Removed || len(snap.Service.Instances) == 0)
	switch {
	case snap.Err != nil:
		return actReadError
	case disappears && guarded:
		return actGuarded
	case disappears && snap.Relist && holdDown:
		return actHoldDown
	}
	return actApply
}

// listingJudgement is what the delete guard makes of a complete read
// (rule 5).
type listingJudgement struct {
	// back are held services the listing has again: the guard drops them.
	back []registries.ServiceKey
	// hold are the services the listing removes that the guard now holds,
	// sorted, and lost their instances; empty when it holds nothing new.
	hold []registries.ServiceKey
	lost int
}

// judgeListing judges a listing of scope that found listed, given the
// served services it removes (key → instances; the registry's Reporter
// computed the removals, registries.Sink), those the guard holds already,
// the registry's instances and whether the guard applies at all (a listing
// before the registry's first complete one, or with the guard off, is not
// judged).
func judgeListing(p OutagePolicy, judged bool, scope registries.Scope, listed map[registries.ServiceKey]bool,
	removed map[registries.ServiceKey]int, held map[registries.ServiceKey]bool, instances int) listingJudgement {
	var j listingJudgement
	for k := range held {
		if scope.Holds(k) && listed[k] {
			j.back = append(j.back, k)
		}
	}
	slices.SortFunc(j.back, registries.ServiceKey.Compare)
	if !judged || p.MaxDeleteRatio <= 0 || p.MaxDeleteRatio >= 1 {
		return j
	}
	var gone []registries.ServiceKey
	lost := 0
	for k, n := range removed {
		if scope.Holds(k) && !listed[k] && !held[k] {
			gone = append(gone, k)
			lost += n
		}
	}
	if lost <= p.DeleteGuardFloor || float64(lost) <= p.MaxDeleteRatio*float64(instances) {
		return j
	}
	slices.SortFunc(gone, registries.ServiceKey.Compare)
	j.hold, j.lost = gone, lost
	return j
}

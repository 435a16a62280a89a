package syncer

import (
	"errors"
	"fmt"
	"slices"
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// hostState is one host: the services that claim it, in rule 1's order,
// and what the Store holds for it.
type hostState struct {
	// claims are the claimants, winner first (sortClaims).
	claims []serviceID
	// writtenSE and writtenWEs are the store's objects we wrote for the
	// host, as the store holds them: a slice of shared records costs 8
	// bytes per instance.
	writtenSE  *model.Config
	writtenWEs []*model.WorkloadEntry
	// served is whose instances the objects hold.
	served []servedBy
	// ports are the host's ports (the port fields of a translate.Sticky),
	// which every claimant is translated against; kept is set once they
	// are kept (rule 3, hostPorts).
	ports translate.Sticky
	kept  bool
}

// servedBy is a registry whose instances a host's objects hold, and how
// many of them survived translation.
type servedBy struct {
	registry  string
	instances int
}

// claimantOf is id as rule 1 orders it. s.mu is held.
func (s *Syncer) claimantOf(id serviceID) claimant {
	return claimant{rank: s.regs.rankOf(id.registry), registry: id.registry, service: id.key}
}

// sortClaims puts claims in rule 1's order and reports whether it changed
// it. s.mu is held.
func (s *Syncer) sortClaims(claims []serviceID) bool {
	cmp := func(a, b serviceID) int { return compareClaimants(s.claimantOf(a), s.claimantOf(b)) }
	if slices.IsSortedFunc(claims, cmp) {
		return false
	}
	slices.SortFunc(claims, cmp)
	return true
}

// claim makes id a claimant of host and re-decides it. s.mu is held.
func (s *Syncer) claim(id serviceID, host string) {
	h := s.hosts[host]
	if h == nil {
		h = &hostState{}
		if p, ok := s.seeds[host]; ok {
			h.ports, h.kept = p, true
		}
		s.hosts[host] = h
	}
	if !slices.Contains(h.claims, id) {
		h.claims = append(h.claims, id)
		s.sortClaims(h.claims)
	}
	s.apply(host)
}

// release drops id from host's claimants and re-decides it. s.mu is held.
func (s *Syncer) release(id serviceID, host string) {
	h := s.hosts[host]
	if h == nil {
		return
	}
	h.claims = slices.DeleteFunc(h.claims, func(c serviceID) bool { return c == id })
	s.apply(host)
}

// reorder re-sorts every host's claimants after the registries' order
// changed and re-decides the hosts whose order did. s.mu is held.
func (s *Syncer) reorder() {
	var changed []string
	for host, h := range s.hosts {
		if s.sortClaims(h.claims) {
			changed = append(changed, host)
		}
	}
	slices.Sort(changed)
	for _, host := range changed {
		s.apply(host)
	}
}

// apply makes the store's objects for host equal to what its claimants
// produce (rule 1), or removes them when nobody claims it. Only objects
// whose content hash changed are written (rule 4 gives the order). s.mu must
// be held.
func (s *Syncer) apply(host string) {
	h := s.hosts[host]
	if h == nil {
		return
	}
	ports, kept := h.ports, h.kept
	desired, served := s.desired(h)
	if h.kept && (!kept || !sameStickyPorts(ports, h.ports)) {
		s.markPortsDirty()
	}
	s.noteServed(h, served)
	want := make(map[model.ConfigKey]bool, len(desired))
	keepsSE := false
	for _, obj := range desired {
		key := obj.Key()
		want[key] = true
		keepsSE = keepsSE || key.Kind == model.KindServiceEntry
	}
	// A host that keeps its ServiceEntry writes first and deletes after,
	// so that a change of form never leaves a moment with neither form
	// served; a host that loses it deletes first, ServiceEntry before
	// WorkloadEntries.
	remove := func() {
		if se := h.writtenSE; se != nil && !want[se.Key()] {
			s.write(se.Key(), nil)
		}
		for _, we := range h.writtenWEs {
			if key := we.Key(); !want[key] {
				s.write(key, nil)
			}
		}
	}
	if !keepsSE {
		remove()
	}
	var storedSE *model.Config
	storedWEs := make([]*model.WorkloadEntry, 0, len(desired))
	for _, obj := range desired {
		switch cur := s.write(obj.Key(), obj).(type) {
		case *model.Config:
			storedSE = cur
		case *model.WorkloadEntry:
			storedWEs = append(storedWEs, cur)
		}
	}
	if keepsSE {
		remove()
	}
	h.writtenSE, h.writtenWEs = storedSE, storedWEs
	if len(h.claims) == 0 && storedSE == nil && len(storedWEs) == 0 {
		delete(s.hosts, host)
		if h.kept {
			s.markPortsDirty()
		}
		return
	}
	for _, id := range h.claims {
		if st := s.services[id]; st != nil {
			s.shareStored(&st.result)
			if st.merge != nil && st.merge.ok {
				s.shareStored(&st.merge.result)
			}
		}
	}
}

// shareStored points res at the store's objects where the store holds the
// same content (equal content hash): the result is kept while its service
// lives, to diff and reuse on the next translation, and keeping the store's
// copy instead of its own saves an object per WorkloadEntry. The store's
// objects carry a resource version and an observation time; neither is
// content, so translation reuses and the sync step compares them as it does
// its own. s.mu must be held.
func (s *Syncer) shareStored(res *translate.Result) {
	if cfg := res.ServiceEntry; cfg != nil && !cfg.Hash.IsZero() {
		if stored, ok := s.store.Stored(cfg).(*model.Config); ok && stored != cfg && stored.Hash == cfg.Hash {
			res.ServiceEntry = stored
		}
	}
	for i, we := range res.WorkloadEntries {
		if stored, ok := s.store.Stored(we).(*model.WorkloadEntry); ok && stored != we && stored.Hash == we.Hash && !we.Hash.IsZero() {
			res.WorkloadEntries[i] = stored
		}
	}
}

// desired returns the objects h's claimants produce, WorkloadEntries
// before the ServiceEntry, and whose instances they hold: each claimant in
// the role planHost gives it, translated against the host's ports
// (hostPorts, rule 3) and resolution (translate's HostResolution over the
// claimants' own translations: DNS when one of them, collisions aside,
// serves an instance registered by name). It logs and counts a claimant's
// rejection when it starts. s.mu must be held.
func (s *Syncer) desired(h *hostState) ([]model.Object, []servedBy) {
	if len(h.claims) == 0 {
		return nil, nil
	}
	claims := make([]claimant, len(h.claims))
	for i, id := range h.claims {
		claims[i] = s.claimantOf(id)
	}
	roles := planHost(claims, s.merge)
	// own: the ports of the first claimant that has ports of its own now,
	// declared or from instances it serves (a service without instances
	// has only its history, which a fresh bridge does not know); serving:
	// the first claimant that serves instances.
	var own translate.Sticky
	declared, needsDNS, serving := false, false, -1
	for i, id := range h.claims {
		st := s.services[id]
		if roles[i] == roleCollision || st.result.ServiceEntry == nil {
			continue
		}
		decl, serves := s.translator(id).DeclaresPorts(st.svc), servesInstances(st.result)
		if own.Port == 0 && (decl || serves) {
			own, declared = st.result.Sticky, decl
		}
		if serving < 0 && serves {
			serving = i
		}
		needsDNS = needsDNS || st.result.Resolution == model.ResolutionDNS
	}
	target := hostPorts(own, declared, h.ports, h.kept)
	winner := h.claims[0]
	first := s.services[winner]
	s.setRejection(winner, first, "", nil)
	if target.Port == 0 {
		// No port is known yet: nothing to serve, nothing to merge into.
		s.rejectCollisions(h, roles)
		return nil, nil
	}
	target.Resolution = s.translator(winner).HostResolution(needsDNS)
	if serving > 0 && len(target.ProtocolPorts) == 0 {
		// The protocol follows the instances (translate's rule 3): the
		// winner serves none, so the first service that serves some, as
		// translated for the host, decides it.
		id := h.claims[serving]
		if r, err := s.translationFor(id, s.services[id], target); err == nil && r.ServiceEntry != nil && servesInstances(r) {
			target.Protocol = r.Sticky.Protocol
		}
	}
	res, err := s.translationFor(winner, first, target)
	if err != nil {
		s.log.Error("Cannot translate the service that serves a host against the host's ports; serving its own translation",
			"registry", winner.registry, "service", first.svc.Name, "host", first.result.Host, "err", err)
		res = first.result
	}
	if res.ServiceEntry == nil {
		s.rejectCollisions(h, roles)
		return nil, nil
	}
	h.ports = portsOf(res.Sticky)
	h.kept = h.kept || s.isReady()
	desired := make([]model.Object, 0, len(res.WorkloadEntries)+1)
	for _, we := range res.WorkloadEntries {
		desired = append(desired, we)
	}
	served := []servedBy{{registry: winner.registry, instances: first.instances - len(res.Rejected)}}
	se := res.ServiceEntry
	ours := se.ServiceEntry().GetPorts()
	var inline []*networking.WorkloadEntry
	for i, id := range h.claims[1:] {
		st := s.services[id]
		if roles[i+1] == roleCollision {
			s.rejectCollision(h, id, st)
			continue
		}
		m, conflict := s.mergedResult(id, st, ours, target)
		if conflict != "" {
			s.setRejection(id, st, "protocol-conflict", errors.New(conflict))
			continue
		}
		s.setRejection(id, st, "", nil)
		served = append(served, servedBy{registry: id.registry, instances: st.instances - len(m.Rejected)})
		if len(res.WorkloadEntries) > 0 || se.ServiceEntry().GetWorkloadSelector() != nil {
			for _, we := range m.WorkloadEntries {
				desired = append(desired, we)
			}
		} else {
			inline = append(inline, translate.InlineEndpoints(m)...)
		}
	}
	if len(inline) > 0 {
		merged, err := s.translator(winner).MergeInline(se, inline)
		if err != nil {
			s.log.Warn("Cannot merge other services' endpoints into an inline ServiceEntry; serving the first service's",
				"host", res.Host, "err", err)
		} else {
			se = merged
		}
	}
	return append(desired, se), served
}

// servesInstances reports whether res serves an instance: WorkloadEntries,
// or inline endpoints.
func servesInstances(res translate.Result) bool {
	return len(res.WorkloadEntries) > 0 || len(res.ServiceEntry.ServiceEntry().GetEndpoints()) > 0
}

// rejectCollisions records the collisions among h's claimants (roles), when
// nothing else of the host is decided. s.mu is held.
func (s *Syncer) rejectCollisions(h *hostState, roles []role) {
	for i, id := range h.claims {
		if roles[i] == roleCollision {
			s.rejectCollision(h, id, s.services[id])
		}
	}
}

// rejectCollision records that id's service (st) collides with the
// service that serves h (conflictPolicy first). s.mu is held.
func (s *Syncer) rejectCollision(h *hostState, id serviceID, st *serviceState) {
	winner := h.claims[0]
	s.setRejection(id, st, "host-collision", fmt.Errorf("host %q is produced by service %q of registry %q, which comes first",
		st.result.Host, winner.key, winner.registry))
}

// translator is the Translator of id's registry. s.mu is held.
func (s *Syncer) translator(id serviceID) *translate.Translator {
	return s.regs.byName[id.registry].cfg.Translator
}

// setRejection records why st (of id) is not served, "" when it is, and
// logs and counts a rejection when it starts or its reason changes.
// s.mu is held.
func (s *Syncer) setRejection(id serviceID, st *serviceState, reason string, err error) {
	if st == nil || st.rejection == reason {
		return
	}
	st.rejection = reason
	if reason != "" {
		s.reject(id.registry, st.svc.Name, reason, max(1, st.instances), err)
	}
}

// mergedResult is st, a service merged into a host whose ServiceEntry has
// ports ours, translated for the host (translationFor); conflict says why
// it cannot merge (mergeConflict between ours and the ports of that
// translation: the protocols its instances serve on the host's ports, not
// on ports of its own history), or that its translation failed. s.mu must
// be held.
func (s *Syncer) mergedResult(id serviceID, st *serviceState, ours []*networking.ServicePort, target translate.Sticky) (translate.Result, string) {
	res, err := s.translationFor(id, st, target)
	if err != nil {
		return translate.Result{}, "its translation against the serving registry's ports failed: " + err.Error()
	}
	if res.ServiceEntry != nil {
		if c := mergeConflict(ours, res.ServiceEntry.ServiceEntry().GetPorts()); c != "" {
			return translate.Result{}, c
		}
	}
	return res, ""
}

// translationFor is st (of id) translated for its host, whose ports and
// resolution are target: its own translation when that is already the
// host's (translatedFor), else a translation against target, kept until
// either changes. s.mu must be held.
func (s *Syncer) translationFor(id serviceID, st *serviceState, target translate.Sticky) (translate.Result, error) {
	if translatedFor(st.result, target) {
		return st.result, nil
	}
	var prev translate.Result
	if m := st.merge; m != nil {
		if m.ok && sameStickyPorts(m.forPorts, target) && m.forPorts.Resolution == target.Resolution {
			return m.result, nil
		}
		prev = m.result
	}
	// The service's own hysteresis of form goes with it (rule 10).
	against := target
	against.InlineFallback = st.result.Sticky.InlineFallback
	res, err := s.translator(id).TranslateReusing(st.svc, against, prev)
	if err != nil {
		return translate.Result{}, err
	}
	if st.merge == nil {
		st.merge = new(mergedState)
	}
	*st.merge = mergedState{result: res, forPorts: target, ok: true}
	return res, nil
}

// noteServed moves h's served instances to now, keeping each registry's
// ServedInstances and meshbridge_registry_served_instances equal to the
// instances its objects in the store hold. s.mu must be held.
func (s *Syncer) noteServed(h *hostState, now []servedBy) {
	if slices.Equal(h.served, now) {
		return
	}
	delta := map[string]int{}
	for _, b := range h.served {
		delta[b.registry] -= b.instances
	}
	for _, b := range now {
		delta[b.registry] += b.instances
	}
	for name, d := range delta {
		if r := s.regs.byName[name]; r != nil && d != 0 {
			r.status.ServedInstances += d
			registryServedInstances.WithLabelValues(name).Set(float64(r.status.ServedInstances))
		}
	}
	h.served = now
}

// write creates, updates (when the content hash differs) or, with a nil obj,
// deletes one object, carrying the observation being applied (observing).
// The Syncer is the store's only writer, so a conflict is a bug: it is
// logged, never retried in a loop. It returns the object the store now
// holds under key (nil when none).
func (s *Syncer) write(key model.ConfigKey, obj model.Object) model.Object {
	existing := s.store.GetObject(key.Kind, key.Name, key.Namespace)
	var err error
	switch {
	case obj == nil && existing != nil:
		err = s.store.DeleteObserved(key.Kind, key.Name, key.Namespace, 0, s.obs.at)
	case obj == nil:
		return nil
	case existing == nil:
		_, err = s.store.CreateObserved(obj, s.obs.at)
	case existing.ContentSum() != obj.ContentSum() || existing.ContentSum().IsZero():
		_, err = s.store.UpdateObserved(obj, s.obs.at)
	default:
		return existing
	}
	if err != nil && !errors.Is(err, serviceentry.ErrNotFound) {
		s.log.Error("Failed to write to the aggregate store", "kind", string(key.Kind), "name", key.Name,
			"namespace", key.Namespace, "err", err)
		return existing
	}
	s.obs.wrote = true
	if obj == nil {
		return nil
	}
	return s.store.GetObject(key.Kind, key.Name, key.Namespace)
}

// observation is the registry observation a Snapshot call applies: the
// objects written for it carry its time (model.Meta.Observed), from which
// the ServiceEntry controller starts the pushes they cause, and it is the
// start of the store stage of meshbridge_convergence_seconds. Writes made
// outside a Snapshot (a hold-down or delete guard ending, a registry added
// or removed) carry none. Guarded by s.mu.
type observation struct {
	// at is registries.Snapshot.Observed, nil outside Snapshot: one value
	// the objects written for the snapshot share.
	at    *time.Time
	wrote bool // an object was written for it
}

// observing makes the writes until the returned function runs carry
// observed; that function then records the store stage, once, when
// anything was written. s.mu must be held from the call until the returned
// function has run.
func (s *Syncer) observing(observed time.Time) func() {
	s.obs = observation{}
	if !observed.IsZero() {
		s.obs.at = &observed
	}
	return func() {
		if s.obs.wrote && s.obs.at != nil {
			serviceentry.ObserveConvergence(serviceentry.StageStore, time.Since(*s.obs.at))
		}
		s.obs = observation{}
	}
}

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

// apply makes the store's objects for host equal to what its claimants
// produce (rule 1), or removes them when nobody claims it. Only objects
// whose content hash changed are written (rule 4 gives the order). s.mu must
// be held.
func (s *Syncer) apply(host string) {
	desired, served := s.desired(host)
	s.noteServed(host, served)
	written := s.written[host]
	want := make(map[model.ConfigKey]bool, len(desired))
	for _, cfg := range desired {
		want[cfg.Key()] = true
	}
	// A host that keeps its ServiceEntry writes first and deletes after,
	// so that a change of form never leaves a moment with neither form
	// served; a host that loses it deletes first, ServiceEntry before
	// WorkloadEntries.
	keepsSE := false
	for _, cfg := range desired {
		keepsSE = keepsSE || cfg.Kind == model.KindServiceEntry
	}
	remove := func() {
		for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
			for _, cfg := range written {
				if key := cfg.Key(); key.Kind == kind && !want[key] {
					s.write(key, nil)
				}
			}
		}
	}
	if !keepsSE {
		remove()
	}
	stored := make([]*model.Config, 0, len(desired))
	for _, cfg := range desired {
		if cur := s.write(cfg.Key(), cfg); cur != nil {
			stored = append(stored, cur)
		}
	}
	if keepsSE {
		remove()
	}
	if len(stored) == 0 {
		delete(s.written, host)
	} else {
		s.written[host] = stored
	}
	for _, id := range s.claims[host] {
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
	share := func(cfg *model.Config) *model.Config {
		if cfg == nil || cfg.Hash.IsZero() {
			return cfg
		}
		if stored := s.store.Get(cfg.Kind, cfg.Name, cfg.Namespace); stored != nil && stored != cfg && stored.Hash == cfg.Hash {
			return stored
		}
		return cfg
	}
	res.ServiceEntry = share(res.ServiceEntry)
	for i, cfg := range res.WorkloadEntries {
		res.WorkloadEntries[i] = share(cfg)
	}
}

// desired returns the objects host's claimants produce, WorkloadEntries
// before the ServiceEntry, and whose instances they hold. s.mu must be held.
func (s *Syncer) desired(host string) ([]*model.Config, []servedBy) {
	ids := s.claims[host]
	if len(ids) == 0 {
		return nil, nil
	}
	first := s.services[ids[0]]
	res := first.result
	if res.ServiceEntry == nil {
		return slices.Clone(res.WorkloadEntries), nil
	}
	desired := slices.Clone(res.WorkloadEntries)
	served := []servedBy{{registry: ids[0].registry, instances: first.instances - len(res.Rejected)}}
	se := res.ServiceEntry
	if s.merge {
		var inline []*networking.WorkloadEntry
		seen := map[string]bool{ids[0].registry: true}
		for _, id := range ids[1:] {
			if seen[id.registry] {
				continue // a later service of one registry: host-collision
			}
			seen[id.registry] = true
			st := s.services[id]
			m, ok := s.mergedResult(id, st, first)
			if !ok {
				continue
			}
			served = append(served, servedBy{registry: id.registry, instances: st.instances - len(m.Rejected)})
			if len(res.WorkloadEntries) > 0 || se.ServiceEntry().GetWorkloadSelector() != nil {
				desired = append(desired, m.WorkloadEntries...)
			} else {
				inline = append(inline, translate.InlineEndpoints(m)...)
			}
		}
		if len(inline) > 0 {
			merged, err := s.regs[ids[0].registry].cfg.Translator.MergeInline(se, inline)
			if err != nil {
				s.log.Warn("Cannot merge other registries' endpoints into an inline ServiceEntry; serving the first registry's",
					"host", host, "err", err)
			} else {
				se = merged
			}
		}
	}
	return append(desired, se), served
}

// mergedResult is st translated against the ports of the host's first
// claimant (conflictPolicy merge), kept until either changes; ok is false
// when st cannot be merged: its protocol differs (protocol-conflict, logged
// and counted when that starts), or its translation failed. s.mu must be
// held.
func (s *Syncer) mergedResult(id serviceID, st, first *serviceState) (translate.Result, bool) {
	target := translate.Sticky{Port: first.result.Sticky.Port, Protocol: first.result.Sticky.Protocol, ProtocolPorts: first.result.Sticky.ProtocolPorts}
	conflict := ""
	if a, b := first.result.Sticky.Protocol, st.result.Sticky.Protocol; a != "" && b != "" && a != b {
		conflict = fmt.Sprintf("its protocol %s differs from %s of the registry that serves the host", b, a)
	}
	if conflict != st.conflict {
		st.conflict = conflict
		if conflict != "" {
			s.reject(id.registry, st.svc.Name, "protocol-conflict", max(1, st.instances), errors.New(conflict))
		}
	}
	if conflict != "" {
		return translate.Result{}, false
	}
	var prev translate.Result
	if m := st.merge; m != nil {
		if m.ok && sameStickyPorts(m.forPorts, target) {
			return m.result, true
		}
		prev = m.result
	}
	r := s.regs[id.registry]
	res, err := r.cfg.Translator.TranslateReusing(st.svc, target, prev)
	if err != nil {
		return translate.Result{}, false
	}
	if st.merge == nil {
		st.merge = new(mergedState)
	}
	*st.merge = mergedState{result: res, forPorts: target, ok: true}
	return res, true
}

// sameStickyPorts reports whether two Stickies keep the same ports.
func sameStickyPorts(a, b translate.Sticky) bool {
	return a.Port == b.Port && a.Protocol == b.Protocol && slices.Equal(a.ProtocolPorts, b.ProtocolPorts)
}

// noteServed moves host's served instances to now, keeping each registry's
// ServedInstances and meshbridge_registry_served_instances equal to the
// instances its objects in the store hold. s.mu must be held.
func (s *Syncer) noteServed(host string, now []servedBy) {
	was := s.served[host]
	if slices.Equal(was, now) {
		return
	}
	delta := map[string]int{}
	for _, b := range was {
		delta[b.registry] -= b.instances
	}
	for _, b := range now {
		delta[b.registry] += b.instances
	}
	for name, d := range delta {
		if r := s.regs[name]; r != nil && d != 0 {
			r.status.ServedInstances += d
			registryServedInstances.WithLabelValues(name).Set(float64(r.status.ServedInstances))
		}
	}
	if len(now) == 0 {
		delete(s.served, host)
	} else {
		s.served[host] = now
	}
}

// write creates, updates (when the content hash differs) or, with a nil cfg,
// deletes one object, carrying the observation being applied (observing).
// The Syncer is the store's only writer, so a conflict is a bug: it is
// logged, never retried in a loop. It returns the object the store now
// holds under key (nil when none).
func (s *Syncer) write(key model.ConfigKey, cfg *model.Config) *model.Config {
	existing := s.store.Get(key.Kind, key.Name, key.Namespace)
	var err error
	switch {
	case cfg == nil && existing != nil:
		err = s.store.DeleteObserved(key.Kind, key.Name, key.Namespace, 0, s.obs.at)
	case cfg == nil:
		return nil
	case existing == nil:
		_, err = s.store.CreateObserved(cfg, s.obs.at)
	case existing.Hash != cfg.Hash || existing.Hash.IsZero():
		_, err = s.store.UpdateObserved(cfg, s.obs.at)
	default:
		return existing
	}
	if err != nil && !errors.Is(err, serviceentry.ErrNotFound) {
		s.log.Error("Failed to write to the aggregate store", "kind", string(key.Kind), "name", key.Name,
			"namespace", key.Namespace, "err", err)
		return existing
	}
	s.obs.wrote = true
	if cfg == nil {
		return nil
	}
	return s.store.Get(key.Kind, key.Name, key.Namespace)
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

package serviceentry

import (
	"errors"

	"github.com/meshbridge/meshbridge/model"
)

// apply makes the store's objects for host equal to the translation of the
// host's winning claimant (or removes them when nobody claims it). Only
// objects whose content hash changed are written (rule 4 of Syncer gives the
// order). s.mu must be held.
func (s *Syncer) apply(host string) {
	var desired []*model.Config
	var served servedBy
	if ids := s.claims[host]; len(ids) > 0 {
		st := s.services[ids[0]]
		res := st.result
		desired = append(desired, res.WorkloadEntries...)
		if res.ServiceEntry != nil {
			desired = append(desired, res.ServiceEntry)
			served = servedBy{registry: ids[0].registry, instances: st.instances - len(res.Rejected)}
		}
	}
	s.noteServed(host, served)
	written := s.written[host]
	want := make(map[model.ConfigKey]bool, len(desired))
	for _, cfg := range desired {
		want[cfg.Key()] = true
	}
	// Deletes first, ServiceEntry before WorkloadEntries.
	for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
		for _, key := range written {
			if key.Kind == kind && !want[key] {
				s.write(key, nil)
			}
		}
	}
	keys := make([]model.ConfigKey, 0, len(desired))
	for _, cfg := range desired {
		s.write(cfg.Key(), cfg)
		keys = append(keys, cfg.Key())
	}
	if len(keys) == 0 {
		delete(s.written, host)
	} else {
		s.written[host] = keys
	}
}

// noteServed moves host's served instances to now, keeping each registry's
// ServedInstances and meshbridge_registry_served_instances equal to the
// instances its objects in the store hold. s.mu must be held.
func (s *Syncer) noteServed(host string, now servedBy) {
	was := s.served[host]
	if was == now {
		return
	}
	for _, d := range []struct {
		registry string
		delta    int
	}{{was.registry, -was.instances}, {now.registry, now.instances}} {
		if r := s.regs[d.registry]; r != nil {
			r.status.ServedInstances += d.delta
			registryServedInstances.WithLabelValues(d.registry).Set(float64(r.status.ServedInstances))
		}
	}
	if now.registry == "" {
		delete(s.served, host)
	} else {
		s.served[host] = now
	}
}

// write creates, updates (when the content hash differs) or, with a nil cfg,
// deletes one object. The Syncer is the store's only writer, so a conflict
// is a bug: it is logged, never retried in a loop.
func (s *Syncer) write(key model.ConfigKey, cfg *model.Config) {
	existing := s.store.Get(key.Kind, key.Name, key.Namespace)
	var err error
	switch {
	case cfg == nil && existing != nil:
		err = s.store.Delete(key.Kind, key.Name, key.Namespace, "")
	case cfg == nil:
		return
	case existing == nil:
		_, err = s.store.Create(cfg)
	case existing.ContentHash() != cfg.ContentHash() || existing.ContentHash() == "":
		_, err = s.store.Update(cfg)
	default:
		return
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		s.log.Error("Failed to write to the aggregate store", "kind", string(key.Kind), "name", key.Name,
			"namespace", key.Namespace, "err", err)
	}
}

package syncer

import "github.com/meshbridge/meshbridge/translate"

// reject counts count instances of a service as rejected for reason and
// logs it.
func (s *Syncer) reject(registry, service, reason string, count int, err error) {
	rejectedInstances.WithLabelValues(registry, reason).Add(float64(count))
	s.log.Warn("Rejected service", "registry", registry, "service", service, "reason", reason, "err", err)
}

// logRejections counts the instances translation rejected and the label
// changes it made, and logs what changed since the last translation.
func (s *Syncer) logRejections(registry, service string, st *serviceState, res translate.Result) {
	var seen map[string]string // nil for the many services with none: kept per service
	if len(res.Rejected) > 0 {
		seen = make(map[string]string, len(res.Rejected))
	}
	for _, rj := range res.Rejected {
		seen[rj.InstanceID] = rj.Reason
		rejectedInstances.WithLabelValues(registry, rj.Reason).Inc()
		if st.rejected[rj.InstanceID] != rj.Reason {
			s.log.Warn("Skipped invalid instance", "registry", registry, "service", service,
				"instance", rj.InstanceID, "reason", rj.Reason, "err", rj.Detail)
		}
	}
	st.rejected = seen
	// Label changes: each counted once per instance (translate.LabelChange.Repeated),
	// logged once per service when its set of (raw key, reason) changes.
	perReason := make(map[string]int)
	for _, c := range res.LabelChanges {
		if !c.Repeated {
			perReason[c.Reason]++
		}
	}
	for reason, n := range perReason {
		labelsChanged.WithLabelValues(registry, reason).Add(float64(n))
	}
	if !res.LabelSetChanged {
		return
	}
	if len(res.LabelChanges) == 0 {
		s.log.Info("Registry labels all kept as written", "registry", registry, "service", service)
		return
	}
	// Per reason: the distinct raw keys, and one example each.
	keys := make(map[string]int)
	var examples []string
	instances, seenKey := 0, make(map[[2]string]bool)
	for i, c := range res.LabelChanges {
		if i == 0 || c.InstanceID != res.LabelChanges[i-1].InstanceID {
			instances++
		}
		if k := [2]string{c.Reason, c.Key}; !seenKey[k] {
			seenKey[k] = true
			if keys[c.Reason]++; keys[c.Reason] == 1 && len(examples) < 5 {
				examples = append(examples, c.String())
			}
		}
	}
	s.log.Info("Registry labels changed or dropped", "registry", registry, "service", service,
		"instances", instances, "keys", keys, "examples", examples)
}

package serviceentry

import (
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/model"
)

// index holds what the handlers need to turn store events into services and
// endpoints. It is guarded by Controller.mu.
//
// Selection is indexed by the meshbridge.io/service selector label, the one
// every meshbridge ServiceEntry selects by, so a WorkloadEntry event costs a
// map lookup, not a scan of every ServiceEntry. Entries whose selector lacks
// that label fall back to a scan of their namespace.
type index struct {
	entries  map[model.ConfigKey]*model.Config    // ServiceEntries by key
	services map[model.ConfigKey][]*model.Service // their per-host services
	// bySelector: namespace/selector value → ServiceEntries selecting it
	// (almost always one, hence a slice rather than a set).
	bySelector map[string][]model.ConfigKey
	// otherSelectors: namespace → ServiceEntries with another selector.
	otherSelectors map[string]map[model.ConfigKey]struct{}
	// workloads: namespace → meshbridge.io/service label value ("" when
	// the WorkloadEntry has none) → its WorkloadEntries sorted by name. A
	// selector on that label reads one slice, already in the order
	// endpoints are listed in; any other selector scans the namespace.
	// A slice costs 8 bytes per WorkloadEntry where a map by name costs
	// ~45; keeping it sorted costs a copy of the slice per change, no more
	// than the endpoint rebuild each change makes anyway.
	workloads map[string]map[string][]*model.Config
	// hosts: namespace/host → the ServiceEntry that defines it.
	hosts map[string]model.ConfigKey
	// sorted is the Services() answer, rebuilt lazily; nil when stale.
	sorted []*model.Service
}

func newIndex() *index {
	return &index{
		entries:        make(map[model.ConfigKey]*model.Config),
		hosts:          make(map[string]model.ConfigKey),
		services:       make(map[model.ConfigKey][]*model.Service),
		bySelector:     make(map[string][]model.ConfigKey),
		otherSelectors: make(map[string]map[model.ConfigKey]struct{}),
		workloads:      make(map[string]map[string][]*model.Config),
	}
}

func labelKey(namespace, value string) string { return namespace + "/" + value }

// putEntry records a ServiceEntry (nil cfg removes key) and its services.
func (x *index) putEntry(key model.ConfigKey, cfg *model.Config, svcs []*model.Service) {
	if old := x.entries[key]; old != nil {
		x.selectorSet(old, false, key)
		for _, svc := range x.services[key] {
			if x.hosts[labelKey(svc.Namespace, svc.Hostname)] == key {
				delete(x.hosts, labelKey(svc.Namespace, svc.Hostname))
			}
		}
	}
	x.sorted = nil
	if cfg == nil {
		delete(x.entries, key)
		delete(x.services, key)
		return
	}
	x.entries[key] = cfg
	x.services[key] = svcs
	x.selectorSet(cfg, true, key)
	for _, svc := range svcs {
		x.hosts[labelKey(svc.Namespace, svc.Hostname)] = key
	}
}

func (x *index) selectorSet(cfg *model.Config, add bool, key model.ConfigKey) {
	se := cfg.ServiceEntry()
	if se.GetWorkloadSelector() == nil || len(se.WorkloadSelector.Labels) == 0 {
		return
	}
	if v, ok := se.WorkloadSelector.Labels[model.LabelService]; ok {
		k := labelKey(cfg.Namespace, v)
		keys := x.bySelector[k]
		i := slices.Index(keys, key)
		switch {
		case add && i < 0:
			x.bySelector[k] = append(keys, key)
		case !add && i >= 0 && len(keys) == 1:
			delete(x.bySelector, k)
		case !add && i >= 0:
			x.bySelector[k] = slices.Delete(keys, i, i+1)
		}
		return
	}
	set := x.otherSelectors[cfg.Namespace]
	if add {
		if set == nil {
			set = make(map[model.ConfigKey]struct{})
			x.otherSelectors[cfg.Namespace] = set
		}
		set[key] = struct{}{}
		return
	}
	delete(set, key)
	if len(set) == 0 {
		delete(x.otherSelectors, cfg.Namespace)
	}
}

// putWorkload replaces WorkloadEntry old (nil: none) by cur (nil: none) in
// the index: old is the object an earlier putWorkload recorded (the store
// hands each handler the object it replaced).
func (x *index) putWorkload(old, cur *model.Config) {
	if old != nil {
		byValue := x.workloads[old.Namespace]
		v := old.Labels[model.LabelService]
		list := byValue[v]
		if i, found := slices.BinarySearchFunc(list, old.Name, compareName); found {
			switch {
			case len(list) > 1:
				byValue[v] = slices.Delete(list, i, i+1)
			case len(byValue) > 1:
				delete(byValue, v)
			default:
				delete(x.workloads, old.Namespace)
			}
		}
	}
	if cur == nil {
		return
	}
	byValue := x.workloads[cur.Namespace]
	if byValue == nil {
		byValue = make(map[string][]*model.Config)
		x.workloads[cur.Namespace] = byValue
	}
	v := cur.Labels[model.LabelService]
	list := byValue[v]
	if i, found := slices.BinarySearchFunc(list, cur.Name, compareName); found {
		list[i] = cur
	} else {
		byValue[v] = slices.Insert(list, i, cur)
	}
}

func compareName(c *model.Config, name string) int { return strings.Compare(c.Name, name) }

// selecting returns the services of every ServiceEntry whose selector
// selects labels in namespace.
func (x *index) selecting(namespace string, labels map[string]string) []*model.Service {
	var out []*model.Service
	add := func(key model.ConfigKey) {
		if cfg := x.entries[key]; cfg != nil && selects(cfg.ServiceEntry().GetWorkloadSelector().GetLabels(), labels) {
			out = append(out, x.services[key]...)
		}
	}
	if v, ok := labels[model.LabelService]; ok {
		for _, key := range x.bySelector[labelKey(namespace, v)] {
			add(key)
		}
	}
	for key := range x.otherSelectors[namespace] {
		add(key)
	}
	return out
}

// endpoints returns the endpoints of svc: the entry's inline endpoints, or
// those of every WorkloadEntry its selector selects, sorted by workload
// name and port.
func (x *index) endpoints(svc *model.Service) []*model.Endpoint {
	entry := x.entries[x.hosts[labelKey(svc.Namespace, svc.Hostname)]]
	if entry == nil {
		return nil
	}
	se := entry.ServiceEntry()
	tps := targetPorts(se)
	var out []*model.Endpoint
	if se.GetWorkloadSelector() == nil {
		for _, we := range se.Endpoints {
			out = append(out, workloadEndpoints(svc, tps, we, entry.Name)...)
		}
		return out
	}
	sel := se.WorkloadSelector.Labels
	byValue := x.workloads[svc.Namespace]
	var selected []*model.Config
	add := func(list []*model.Config) {
		for _, we := range list {
			if selects(sel, we.Labels) {
				selected = append(selected, we)
			}
		}
	}
	if v, ok := sel[model.LabelService]; ok {
		add(byValue[v]) // sorted by name already
	} else {
		for _, list := range byValue {
			add(list)
		}
		slices.SortFunc(selected, func(a, b *model.Config) int { return strings.Compare(a.Name, b.Name) })
	}
	for _, we := range selected {
		out = append(out, workloadEndpoints(svc, tps, we.WorkloadEntry(), we.Name)...)
	}
	return out
}

// allServices returns every service sorted by namespace and host; the slice
// is shared until the next change.
func (x *index) allServices() []*model.Service {
	if x.sorted != nil {
		return x.sorted
	}
	out := make([]*model.Service, 0, len(x.services))
	for _, svcs := range x.services {
		out = append(out, svcs...)
	}
	slices.SortFunc(out, func(a, b *model.Service) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Hostname, b.Hostname)
	})
	x.sorted = out
	return out
}

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
	// entries: ServiceEntries by key, with their per-host services.
	entries map[model.ConfigKey]*indexedEntry
	// bySelector: (namespace, selector value) → ServiceEntries selecting
	// it (almost always one, hence a slice rather than a set).
	bySelector map[scoped][]*indexedEntry
	// otherSelectors: namespace → ServiceEntries with another selector.
	otherSelectors map[string]map[*indexedEntry]struct{}
	// workloads: namespace → meshbridge.io/service label value ("" when
	// the WorkloadEntry has none) → its WorkloadEntries sorted by name. A
	// selector on that label reads one slice, already in the order
	// endpoints are listed in; any other selector scans the namespace.
	// A slice costs 8 bytes per WorkloadEntry where a map by name costs
	// ~45; keeping it sorted costs a copy of the slice per change, no more
	// than the endpoint rebuild each change makes anyway.
	workloads map[string]map[string][]*model.WorkloadEntry
	// hosts: (namespace, host) → the ServiceEntry that defines it.
	hosts map[scoped]*indexedEntry
	// sorted is the Services() answer, rebuilt lazily; nil when stale.
	sorted []*model.Service
}

// indexedEntry is one ServiceEntry of the index and its services. An
// entry keeps its indexedEntry while it exists: the selector and host maps
// point at it, and an update changes it in place.
type indexedEntry struct {
	cfg      *model.Config
	services []*model.Service
}

// scoped is a name in a namespace: a host, or a selector label value.
// A struct key, not "namespace/name", so a lookup allocates nothing.
type scoped struct{ namespace, name string }

func newIndex() *index {
	return &index{
		entries:        make(map[model.ConfigKey]*indexedEntry),
		hosts:          make(map[scoped]*indexedEntry),
		bySelector:     make(map[scoped][]*indexedEntry),
		otherSelectors: make(map[string]map[*indexedEntry]struct{}),
		workloads:      make(map[string]map[string][]*model.WorkloadEntry),
	}
}

// servicesOf returns the services of the ServiceEntry key, nil when none.
func (x *index) servicesOf(key model.ConfigKey) []*model.Service {
	if e := x.entries[key]; e != nil {
		return e.services
	}
	return nil
}

// definer returns the ServiceEntry defining host in namespace, nil when none.
func (x *index) definer(namespace, host string) *indexedEntry {
	return x.hosts[scoped{namespace, host}]
}

// putEntry records a ServiceEntry (nil cfg removes key) and its services.
func (x *index) putEntry(key model.ConfigKey, cfg *model.Config, svcs []*model.Service) {
	e := x.entries[key]
	if e != nil {
		x.selectorSet(e, false)
		for _, svc := range e.services {
			if h := (scoped{svc.Namespace, svc.Hostname}); x.hosts[h] == e {
				delete(x.hosts, h)
			}
		}
	}
	x.sorted = nil
	if cfg == nil {
		delete(x.entries, key)
		return
	}
	if e == nil {
		e = &indexedEntry{}
		x.entries[key] = e
	}
	e.cfg, e.services = cfg, svcs
	x.selectorSet(e, true)
	for _, svc := range svcs {
		x.hosts[scoped{svc.Namespace, svc.Hostname}] = e
	}
}

func (x *index) selectorSet(e *indexedEntry, add bool) {
	se := e.cfg.ServiceEntry()
	if se.GetWorkloadSelector() == nil || len(se.WorkloadSelector.Labels) == 0 {
		return
	}
	namespace := e.cfg.Namespace
	if v, ok := se.WorkloadSelector.Labels[model.LabelService]; ok {
		k := scoped{namespace, v}
		list := x.bySelector[k]
		i := slices.Index(list, e)
		switch {
		case add && i < 0:
			x.bySelector[k] = append(list, e)
		case !add && i >= 0 && len(list) == 1:
			delete(x.bySelector, k)
		case !add && i >= 0:
			x.bySelector[k] = slices.Delete(list, i, i+1)
		}
		return
	}
	set := x.otherSelectors[namespace]
	if add {
		if set == nil {
			set = make(map[*indexedEntry]struct{})
			x.otherSelectors[namespace] = set
		}
		set[e] = struct{}{}
		return
	}
	delete(set, e)
	if len(set) == 0 {
		delete(x.otherSelectors, namespace)
	}
}

// putWorkload replaces WorkloadEntry old (nil: none) by cur (nil: none) in
// the index: old is the object an earlier putWorkload recorded (the store
// hands each handler the object it replaced).
func (x *index) putWorkload(old, cur *model.WorkloadEntry) {
	if old != nil {
		byValue := x.workloads[old.Namespace()]
		v, _ := old.Group.MetaLabel(model.LabelService)
		list := byValue[v]
		if i, found := slices.BinarySearchFunc(list, old, model.CompareName); found {
			switch {
			case len(list) > 1:
				byValue[v] = slices.Delete(list, i, i+1)
			case len(byValue) > 1:
				delete(byValue, v)
			default:
				delete(x.workloads, old.Namespace())
			}
		}
	}
	if cur == nil {
		return
	}
	byValue := x.workloads[cur.Namespace()]
	if byValue == nil {
		byValue = make(map[string][]*model.WorkloadEntry)
		x.workloads[cur.Namespace()] = byValue
	}
	v, _ := cur.Group.MetaLabel(model.LabelService)
	list := byValue[v]
	if i, found := slices.BinarySearchFunc(list, cur, model.CompareName); found {
		list[i] = cur
	} else {
		byValue[v] = slices.Insert(list, i, cur)
	}
}

// selecting returns the services of every ServiceEntry whose selector
// selects the workload whose labels label looks up, in namespace.
func (x *index) selecting(namespace string, label func(string) (string, bool)) []*model.Service {
	var out []*model.Service
	add := func(e *indexedEntry) {
		if selects(e.cfg.ServiceEntry().GetWorkloadSelector().GetLabels(), label) {
			out = append(out, e.services...)
		}
	}
	if v, ok := label(model.LabelService); ok {
		for _, e := range x.bySelector[scoped{namespace, v}] {
			add(e)
		}
	}
	for e := range x.otherSelectors[namespace] {
		add(e)
	}
	return out
}

// endpoints returns the endpoints of svc: the entry's inline endpoints, or
// those of every WorkloadEntry its selector selects, sorted by workload
// name and port.
func (x *index) endpoints(svc *model.Service) []*model.Endpoint {
	e := x.definer(svc.Namespace, svc.Hostname)
	if e == nil {
		return nil
	}
	entry := e.cfg
	se := entry.ServiceEntry()
	tps := targetPorts(se)
	var out []*model.Endpoint
	if se.GetWorkloadSelector() == nil {
		for _, we := range se.Endpoints {
			out = append(out, workloadEndpoints(svc, tps, inlineWorkload(we, entry.Name))...)
		}
		return out
	}
	sel := se.WorkloadSelector.Labels
	byValue := x.workloads[svc.Namespace]
	var selected []*model.WorkloadEntry
	add := func(list []*model.WorkloadEntry) {
		for _, we := range list {
			if selects(sel, we.Group.MetaLabel) {
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
		slices.SortFunc(selected, model.CompareName)
	}
	for _, we := range selected {
		out = append(out, workloadEndpoints(svc, tps, workloadOf(we))...)
	}
	return out
}

// allServices returns every service sorted by namespace and host; the slice
// is shared until the next change.
func (x *index) allServices() []*model.Service {
	if x.sorted != nil {
		return x.sorted
	}
	out := make([]*model.Service, 0, len(x.entries))
	for _, e := range x.entries {
		out = append(out, e.services...)
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

package serviceentry

import (
	"github.com/meshbridge/meshbridge/model"
)

// workloads holds the store's WorkloadEntries, per namespace, keyed by
// their name's parts (the host and the id translate names them with), so
// that the store keeps no name string per instance: a slot is a 24-byte key
// sharing its group's host and an 8-byte pointer. A WorkloadEntry of
// another name (not made by translate) is keyed by its name.
type workloads struct {
	byNamespace map[string]*namespaceWorkloads
	n           int
}

type namespaceWorkloads struct {
	byID  map[workloadID]*model.WorkloadEntry
	named map[string]*model.WorkloadEntry
}

// workloadID is a WorkloadEntry's name as its parts: "<host>-<hex(id)>".
type workloadID struct {
	host string
	id   [5]byte
}

func newWorkloads() *workloads {
	return &workloads{byNamespace: map[string]*namespaceWorkloads{}}
}

// get returns the WorkloadEntry named name in namespace, nil when none.
func (ws *workloads) get(namespace, name string) *model.WorkloadEntry {
	w, _ := ws.find(namespace, name)
	if w == nil {
		return nil
	}
	return w.(*model.WorkloadEntry)
}

// find returns the WorkloadEntry named name in namespace (nil Object when
// none) and the func that removes it.
func (ws *workloads) find(namespace, name string) (model.Object, func()) {
	nw := ws.byNamespace[namespace]
	if nw == nil {
		return nil, nil
	}
	if host, id, ok := model.SplitWorkloadEntryName(name); ok {
		return nw.lookupID(ws, namespace, workloadID{host, id})
	}
	return nw.lookupName(ws, namespace, name)
}

// findRecord is find for the object w names.
func (ws *workloads) findRecord(w *model.WorkloadEntry) (model.Object, func()) {
	nw := ws.byNamespace[w.Namespace()]
	if nw == nil {
		return nil, nil
	}
	host, id, ok := w.NameID()
	if ok {
		return nw.lookupID(ws, w.Namespace(), workloadID{host, id})
	}
	return nw.lookupName(ws, w.Namespace(), host)
}

func (nw *namespaceWorkloads) lookupID(ws *workloads, namespace string, key workloadID) (model.Object, func()) {
	w, ok := nw.byID[key]
	if !ok {
		return nil, nil
	}
	return w, func() {
		delete(nw.byID, key)
		ws.removed(namespace, nw)
	}
}

func (nw *namespaceWorkloads) lookupName(ws *workloads, namespace, name string) (model.Object, func()) {
	w, ok := nw.named[name]
	if !ok {
		return nil, nil
	}
	return w, func() {
		delete(nw.named, name)
		ws.removed(namespace, nw)
	}
}

// removed accounts for a removal from nw.
func (ws *workloads) removed(namespace string, nw *namespaceWorkloads) {
	ws.n--
	if len(nw.byID)+len(nw.named) == 0 {
		delete(ws.byNamespace, namespace)
	}
}

// put stores w, replacing the WorkloadEntry of the same name.
func (ws *workloads) put(w *model.WorkloadEntry) {
	nw := ws.byNamespace[w.Namespace()]
	if nw == nil {
		nw = &namespaceWorkloads{}
		ws.byNamespace[w.Namespace()] = nw
	}
	host, id, ok := w.NameID()
	if ok {
		if nw.byID == nil {
			nw.byID = map[workloadID]*model.WorkloadEntry{}
		}
		// The key shares the group's host, which the record keeps anyway.
		key := workloadID{host, id}
		if _, exists := nw.byID[key]; !exists {
			ws.n++
		}
		nw.byID[key] = w
		return
	}
	if nw.named == nil {
		nw.named = map[string]*model.WorkloadEntry{}
	}
	if _, exists := nw.named[host]; !exists {
		ws.n++
	}
	nw.named[host] = w
}

// list returns the WorkloadEntries of namespace ("" = every namespace), in
// no order.
func (ws *workloads) list(namespace string) []*model.WorkloadEntry {
	var out []*model.WorkloadEntry
	add := func(nw *namespaceWorkloads) {
		for _, w := range nw.byID {
			out = append(out, w)
		}
		for _, w := range nw.named {
			out = append(out, w)
		}
	}
	if namespace != "" {
		if nw := ws.byNamespace[namespace]; nw != nil {
			out = make([]*model.WorkloadEntry, 0, len(nw.byID)+len(nw.named))
			add(nw)
		}
		return out
	}
	out = make([]*model.WorkloadEntry, 0, ws.n)
	for _, nw := range ws.byNamespace {
		add(nw)
	}
	return out
}

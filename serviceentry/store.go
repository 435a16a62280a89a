package serviceentry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/model"
)

// Errors returned by Store mutations; test with errors.Is.
var (
	ErrNotFound      = errors.New("config not found")
	ErrAlreadyExists = errors.New("config already exists")
	ErrConflict      = errors.New("resource version conflict")
	ErrUnknownKind   = errors.New("unknown kind")
)

// Handler is told about one change: old is the previous object on update and
// nil otherwise; cur is the new object, or the deleted one on delete (as in
// Istio's memory store) carrying the deletion's observation. Both are
// read-only: a *model.Config, or for a WorkloadEntry a *model.WorkloadEntry.
type Handler func(old, cur model.Object, event model.Event)

// Store is the aggregate registry: an in-memory ConfigStore / ConfigStoreCache
// for ServiceEntries and WorkloadEntries. It mirrors Istio's
// pilot/pkg/config/memory store and controller:
//
//   - a key (kind, namespace, name) is unique; Create fails with
//     ErrAlreadyExists if it exists, Update and Delete with ErrNotFound if it
//     does not;
//   - Update and Delete with a non-zero resource version fail with
//     ErrConflict unless it matches (optimistic concurrency);
//   - every mutation stores a new resource version (a counter);
//   - handlers registered per kind before Run receive (old, new, event) in
//     registration order, on one worker queue, after the mutation is visible:
//     a handler reading the store sees a state at least as new as its event.
//
// WorkloadEntries are held as compact records (model.WorkloadEntry, keyed
// by their name's parts, so that no name string is kept per instance);
// Get and List materialise them as Configs, a new one per call, for the
// consumers that need that shape (the Kubernetes writer, /debug/configz);
// GetObject and Objects hand out the records. Objects handed in are
// stored as given, stamped with their version (callers must not modify them
// afterwards), and objects handed out are shared: read-only.
type Store struct {
	mu        sync.RWMutex
	configs   map[model.Kind]*objects
	workloads *workloads // nil unless the store holds WorkloadEntries
	version   uint64
	handlers  map[model.Kind][]Handler
	queue     *queue
	synced    func() bool
}

// objects holds one kind's Configs: namespace → name → object. Nested
// maps keyed by string take 24 bytes a slot where one map keyed by
// (namespace, name) takes 40.
type objects struct {
	byNamespace map[string]map[string]*model.Config
	n           int
}

func (o *objects) get(namespace, name string) *model.Config {
	return o.byNamespace[namespace][name]
}

func (o *objects) put(namespace, name string, cfg *model.Config) {
	names := o.byNamespace[namespace]
	if names == nil {
		names = make(map[string]*model.Config)
		o.byNamespace[namespace] = names
	}
	if _, ok := names[name]; !ok {
		o.n++
	}
	names[name] = cfg
}

func (o *objects) delete(namespace, name string) {
	names := o.byNamespace[namespace]
	if _, ok := names[name]; !ok {
		return
	}
	o.n--
	if len(names) == 1 {
		delete(o.byNamespace, namespace)
		return
	}
	delete(names, name)
}

// NewStore returns a store for kinds. hasSynced reports whether every source
// has delivered its first listing; nil means always synced.
func NewStore(hasSynced func() bool, kinds ...model.Kind) *Store {
	s := &Store{
		configs:  make(map[model.Kind]*objects, len(kinds)),
		handlers: make(map[model.Kind][]Handler, len(kinds)),
		queue:    newQueue(),
		synced:   hasSynced,
	}
	for _, k := range kinds {
		if k == model.KindWorkloadEntry {
			s.workloads = newWorkloads()
			continue
		}
		s.configs[k] = &objects{byNamespace: make(map[string]map[string]*model.Config)}
	}
	return s
}

// RegisterEventHandler adds a handler for kind. Call it before Run.
func (s *Store) RegisterEventHandler(kind model.Kind, h Handler) {
	s.mu.Lock()
	s.handlers[kind] = append(s.handlers[kind], h)
	s.mu.Unlock()
}

// Run processes handler notifications until ctx is done.
func (s *Store) Run(ctx context.Context) { s.queue.Run(ctx) }

// HasSynced reports whether the store holds every source's first listing.
func (s *Store) HasSynced() bool { return s.synced == nil || s.synced() }

// Flush waits until every notification queued before the call was handled.
func (s *Store) Flush(ctx context.Context) error { return s.queue.Flush(ctx) }

// Get returns the object as a Config, or nil when it does not exist; a
// WorkloadEntry is materialised, a new Config per call.
func (s *Store) Get(kind model.Kind, name, namespace string) *model.Config {
	if obj := s.GetObject(kind, name, namespace); obj != nil {
		return obj.AsConfig()
	}
	return nil
}

// GetObject returns the object as stored (a *model.Config, or a
// *model.WorkloadEntry), or nil when it does not exist.
func (s *Store) GetObject(kind model.Kind, name, namespace string) model.Object {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if kind == model.KindWorkloadEntry && s.workloads != nil {
		if w := s.workloads.get(namespace, name); w != nil {
			return w
		}
		return nil
	}
	if objs := s.configs[kind]; objs != nil {
		if c := objs.get(namespace, name); c != nil {
			return c
		}
	}
	return nil
}

// Stored returns the object the store holds under obj's key, nil when
// none. For a WorkloadEntry record it finds it by the record's name parts,
// without building the name.
func (s *Store) Stored(obj model.Object) model.Object {
	w, ok := obj.(*model.WorkloadEntry)
	if !ok {
		c := obj.(*model.Config)
		return s.GetObject(c.Kind, c.Name, c.Namespace)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.workloads == nil {
		return nil
	}
	if stored, _ := s.workloads.findRecord(w); stored != nil {
		return stored
	}
	return nil
}

// List returns the objects of kind in namespace ("" = every namespace) as
// Configs, sorted by namespace and name; WorkloadEntries are materialised,
// new Configs per call.
func (s *Store) List(kind model.Kind, namespace string) []*model.Config {
	objs := s.Objects(kind, namespace)
	out := make([]*model.Config, len(objs))
	for i, o := range objs {
		out[i] = o.AsConfig()
	}
	return out
}

// Objects returns the objects of kind in namespace ("" = every namespace)
// as stored, sorted by namespace and name.
func (s *Store) Objects(kind model.Kind, namespace string) []model.Object {
	s.mu.RLock()
	if kind == model.KindWorkloadEntry && s.workloads != nil {
		ws := s.workloads.list(namespace)
		s.mu.RUnlock()
		slices.SortFunc(ws, compareWorkloadEntries)
		out := make([]model.Object, len(ws))
		for i, w := range ws {
			out[i] = w
		}
		return out
	}
	out := []model.Object{}
	if objs := s.configs[kind]; objs != nil {
		if namespace != "" {
			names := objs.byNamespace[namespace]
			out = make([]model.Object, 0, len(names))
			for _, c := range names {
				out = append(out, c)
			}
		} else {
			out = make([]model.Object, 0, objs.n)
			for _, names := range objs.byNamespace {
				for _, c := range names {
					out = append(out, c)
				}
			}
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b model.Object) int {
		x, y := a.(*model.Config), b.(*model.Config)
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	return out
}

// compareWorkloadEntries orders WorkloadEntries by namespace and name.
func compareWorkloadEntries(a, b *model.WorkloadEntry) int {
	return cmp.Or(strings.Compare(a.Namespace(), b.Namespace()), model.CompareName(a, b))
}

// Create stores a new object and returns its resource version. A
// WorkloadEntry Config is stored as a record (model.WorkloadEntryOf).
func (s *Store) Create(cfg *model.Config) (uint64, error) {
	return s.mutate(model.EventAdd, s.stored(cfg), cfg.ResourceVersion, cfg.Observed, nil)
}

// Update replaces an existing object and returns its new resource version.
// A non-zero cfg.ResourceVersion must match the stored one.
func (s *Store) Update(cfg *model.Config) (uint64, error) {
	return s.mutate(model.EventUpdate, s.stored(cfg), cfg.ResourceVersion, cfg.Observed, nil)
}

// stored is cfg in the form the store holds its kind in.
func (s *Store) stored(cfg *model.Config) model.Object {
	if cfg.Kind == model.KindWorkloadEntry && s.workloads != nil {
		return model.WorkloadEntryOf(cfg)
	}
	return cfg
}

// CreateObserved and UpdateObserved are Create and Update for a write a
// registry observation caused, of an object of any form (a *model.Config,
// or a *model.WorkloadEntry for a WorkloadEntry): the stored object carries
// observed (nil: none), whatever obj carries, and obj's version is not
// checked (for the store's only writer, which may pass an object the store
// handed out). obj itself is not modified.
func (s *Store) CreateObserved(obj model.Object, observed *time.Time) (uint64, error) {
	return s.mutate(model.EventAdd, s.storedObject(obj), 0, observed, nil)
}

// UpdateObserved: see CreateObserved.
func (s *Store) UpdateObserved(obj model.Object, observed *time.Time) (uint64, error) {
	return s.mutate(model.EventUpdate, s.storedObject(obj), 0, observed, nil)
}

// storedObject is obj in the form the store holds its kind in.
func (s *Store) storedObject(obj model.Object) model.Object {
	if cfg, ok := obj.(*model.Config); ok {
		return s.stored(cfg)
	}
	return obj
}

// Delete removes an object. A non-zero resourceVersion must match.
func (s *Store) Delete(kind model.Kind, name, namespace string, resourceVersion uint64) error {
	return s.DeleteObserved(kind, name, namespace, resourceVersion, nil)
}

// DeleteObserved is Delete for a removal a registry observation caused:
// handlers get the deleted object carrying observed (nil: none), as a
// Create or Update carries it in the object written.
func (s *Store) DeleteObserved(kind model.Kind, name, namespace string, resourceVersion uint64, observed *time.Time) error {
	key := model.ConfigKey{Kind: kind, Namespace: namespace, Name: name}
	_, err := s.mutate(model.EventDelete, nil, resourceVersion, observed, &key)
	return err
}

// mutate applies ev: obj is the object written (nil for a delete, which
// names key), rv the resource version to check (0: none), observed the
// observation time the stored (or deleted) object carries.
func (s *Store) mutate(ev model.Event, obj model.Object, rv uint64, observed *time.Time, key *model.ConfigKey) (uint64, error) {
	kind := model.KindWorkloadEntry
	if key != nil {
		kind = key.Kind
	} else if c, ok := obj.(*model.Config); ok {
		kind = c.Kind
	}
	s.mu.Lock()
	var old model.Object
	var put func(model.Object)
	var remove func()
	switch w, isRecord := obj.(*model.WorkloadEntry); {
	case kind == model.KindWorkloadEntry && s.workloads != nil:
		if key != nil {
			old, remove = s.workloads.find(key.Namespace, key.Name)
		} else if !isRecord {
			s.mu.Unlock()
			return 0, fmt.Errorf("%s: a WorkloadEntry is stored as a *model.WorkloadEntry: %w", obj.Key(), ErrUnknownKind)
		} else {
			old, remove = s.workloads.findRecord(w)
		}
		put = func(o model.Object) { s.workloads.put(o.(*model.WorkloadEntry)) }
	case s.configs[kind] != nil && !isRecord:
		objs := s.configs[kind]
		var ns, name string
		if key != nil {
			ns, name = key.Namespace, key.Name
		} else {
			c := obj.(*model.Config)
			ns, name = c.Namespace, c.Name
		}
		if c := objs.get(ns, name); c != nil {
			old = c
		}
		put = func(o model.Object) { objs.put(ns, name, o.(*model.Config)) }
		remove = func() { objs.delete(ns, name) }
	default:
		s.mu.Unlock()
		if key == nil {
			k := obj.Key()
			key = &k
		}
		return 0, fmt.Errorf("%s: %w", *key, ErrUnknownKind)
	}
	if err := checkMutation(ev, old, rv, func() model.ConfigKey {
		if key != nil {
			return *key
		}
		return obj.Key()
	}); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.version++
	version := s.version
	cur := old
	if ev == model.EventDelete {
		remove()
		old = nil
		if !sameObservation(cur.ObservedAt(), observed) {
			cur = cur.Stamped(cur.Version(), observed)
		}
	} else {
		cur = obj.Stamped(version, observed)
		put(cur)
	}
	handlers := s.handlers[kind]
	if len(handlers) > 0 {
		s.queue.Push(func() {
			for _, h := range handlers {
				h(old, cur, ev)
			}
		})
	}
	s.mu.Unlock()
	return version, nil
}

// sameObservation reports whether a and b are the same observation time,
// nil (none) included.
func sameObservation(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// checkMutation checks ev against the stored object old (nil: none) and
// the resource version rv; key names the object in errors.
func checkMutation(ev model.Event, old model.Object, rv uint64, key func() model.ConfigKey) error {
	switch {
	case ev == model.EventAdd && old != nil:
		return fmt.Errorf("create %s: %w", key(), ErrAlreadyExists)
	case ev != model.EventAdd && old == nil:
		return fmt.Errorf("%s %s: %w", ev, key(), ErrNotFound)
	case ev != model.EventAdd && rv != 0 && rv != old.Version():
		return fmt.Errorf("%s %s: have version %d, got %d: %w", ev, key(), old.Version(), rv, ErrConflict)
	}
	return nil
}

package serviceentry

import (
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
// Istio's memory store) carrying the deletion's Meta.Observed. Both are
// read-only.
type Handler func(old, cur *model.Config, event model.Event)

// Store is the aggregate registry: an in-memory ConfigStore / ConfigStoreCache
// for ServiceEntries and WorkloadEntries. It mirrors Istio's
// pilot/pkg/config/memory store and controller:
//
//   - a key (kind, namespace, name) is unique; Create fails with
//     ErrAlreadyExists if it exists, Update and Delete with ErrNotFound if it
//     does not;
//   - Update and Delete with a non-empty resource version fail with
//     ErrConflict unless it matches (optimistic concurrency);
//   - every mutation stores a new resource version (a decimal counter);
//   - handlers registered per kind before Run receive (old, new, event) in
//     registration order, on one worker queue, after the mutation is visible:
//     a handler reading the store sees a state at least as new as its event.
//
// Objects handed in are stored as given (callers must not modify them
// afterwards) and objects handed out are shared: read-only.
type Store struct {
	mu       sync.RWMutex
	data     map[model.Kind]*objects
	version  uint64
	handlers map[model.Kind][]Handler
	queue    *queue
	synced   func() bool
}

// objects holds one kind's objects: namespace → name → object. Nested
// maps keyed by string take 24 bytes a slot where one map keyed by
// (namespace, name) takes 40, and a store holds one WorkloadEntry per
// instance.
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
		data:     make(map[model.Kind]*objects, len(kinds)),
		handlers: make(map[model.Kind][]Handler, len(kinds)),
		queue:    newQueue(),
		synced:   hasSynced,
	}
	for _, k := range kinds {
		s.data[k] = &objects{byNamespace: make(map[string]map[string]*model.Config)}
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

// Get returns the object, or nil when it does not exist.
func (s *Store) Get(kind model.Kind, name, namespace string) *model.Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	objs := s.data[kind]
	if objs == nil {
		return nil
	}
	return objs.get(namespace, name)
}

// List returns the objects of kind in namespace ("" = every namespace),
// sorted by namespace and name.
func (s *Store) List(kind model.Kind, namespace string) []*model.Config {
	s.mu.RLock()
	out := []*model.Config{}
	if objs := s.data[kind]; objs != nil {
		if namespace != "" {
			names := objs.byNamespace[namespace]
			out = make([]*model.Config, 0, len(names))
			for _, c := range names {
				out = append(out, c)
			}
		} else {
			out = make([]*model.Config, 0, objs.n)
			for _, names := range objs.byNamespace {
				for _, c := range names {
					out = append(out, c)
				}
			}
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *model.Config) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Create stores a new object and returns its resource version.
func (s *Store) Create(cfg *model.Config) (uint64, error) {
	return s.mutate(cfg.Key(), model.EventAdd, cfg, cfg.ResourceVersion, cfg.Observed)
}

// Update replaces an existing object and returns its new resource version.
// A non-zero cfg.ResourceVersion must match the stored one.
func (s *Store) Update(cfg *model.Config) (uint64, error) {
	return s.mutate(cfg.Key(), model.EventUpdate, cfg, cfg.ResourceVersion, cfg.Observed)
}

// CreateObserved and UpdateObserved are Create and Update for a write a
// registry observation caused: the stored object carries observed as
// Meta.Observed (nil: none), whatever cfg carries, and cfg's
// ResourceVersion is not checked (for the store's only writer, which may
// pass an object the store handed out). cfg itself is not modified.
func (s *Store) CreateObserved(cfg *model.Config, observed *time.Time) (uint64, error) {
	return s.mutate(cfg.Key(), model.EventAdd, cfg, 0, observed)
}

// UpdateObserved: see CreateObserved.
func (s *Store) UpdateObserved(cfg *model.Config, observed *time.Time) (uint64, error) {
	return s.mutate(cfg.Key(), model.EventUpdate, cfg, 0, observed)
}

// Delete removes an object. A non-zero resourceVersion must match.
func (s *Store) Delete(kind model.Kind, name, namespace string, resourceVersion uint64) error {
	return s.DeleteObserved(kind, name, namespace, resourceVersion, nil)
}

// DeleteObserved is Delete for a removal a registry observation caused:
// handlers get the deleted object with Meta.Observed set to observed (nil:
// none), as a Create or Update carries it in the object written.
func (s *Store) DeleteObserved(kind model.Kind, name, namespace string, resourceVersion uint64, observed *time.Time) error {
	key := model.ConfigKey{Kind: kind, Namespace: namespace, Name: name}
	_, err := s.mutate(key, model.EventDelete, nil, resourceVersion, observed)
	return err
}

// mutate applies ev to key: cfg is the object written (nil for a delete),
// rv the resource version to check (0: none), observed the observation
// time the stored (or deleted) object carries.
func (s *Store) mutate(key model.ConfigKey, ev model.Event, cfg *model.Config, rv uint64, observed *time.Time) (uint64, error) {
	s.mu.Lock()
	objs, ok := s.data[key.Kind]
	if !ok {
		s.mu.Unlock()
		return 0, fmt.Errorf("%s: %w", key, ErrUnknownKind)
	}
	old := objs.get(key.Namespace, key.Name)
	if err := checkMutation(key, ev, old, rv); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	s.version++
	version := s.version
	cur := old
	if ev == model.EventDelete {
		objs.delete(key.Namespace, key.Name)
		old = nil
		if !sameObservation(cur.Observed, observed) {
			deleted := *cur
			deleted.Observed = observed
			cur = &deleted
		}
	} else {
		stored := *cfg
		stored.ResourceVersion, stored.Observed = version, observed
		cur = &stored
		objs.put(key.Namespace, key.Name, cur)
	}
	handlers := s.handlers[key.Kind]
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

func checkMutation(key model.ConfigKey, ev model.Event, old *model.Config, rv uint64) error {
	switch {
	case ev == model.EventAdd && old != nil:
		return fmt.Errorf("create %s: %w", key, ErrAlreadyExists)
	case ev != model.EventAdd && old == nil:
		return fmt.Errorf("%s %s: %w", ev, key, ErrNotFound)
	case ev != model.EventAdd && rv != 0 && rv != old.ResourceVersion:
		return fmt.Errorf("%s %s: have version %d, got %d: %w", ev, key, old.ResourceVersion, rv, ErrConflict)
	}
	return nil
}

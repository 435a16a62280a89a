package kube

import (
	"maps"
	"sync"
	"sync/atomic"
)

// registrySet is the registries a Writer knows. It only grows: a registry
// removed from the configuration while the process runs stays known, so
// that its objects still in the cluster are deleted once the store no
// longer holds them. Reads take no lock.
type registrySet struct {
	mu    sync.Mutex // serializes add
	names atomic.Pointer[map[string]struct{}]
}

func newRegistrySet(names []string) *registrySet {
	s := &registrySet{}
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	s.names.Store(&m)
	return s
}

// has reports whether name is known.
func (s *registrySet) has(name string) bool {
	_, ok := (*s.names.Load())[name]
	return ok
}

// add makes name known and reports whether it was not before.
func (s *registrySet) add(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.names.Load()
	if _, ok := old[name]; ok {
		return false
	}
	m := maps.Clone(old)
	m[name] = struct{}{}
	s.names.Store(&m)
	return true
}

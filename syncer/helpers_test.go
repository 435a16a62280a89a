package syncer

import (
	"context"
	"slices"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
)

// runStore runs s until the test ends.
func runStore(t *testing.T, s *serviceentry.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// flush waits until s's handlers have seen every write so far.
func flush(t *testing.T, s *serviceentry.Store) {
	t.Helper()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// list plays a complete listing of the services called names (snap's
// services) within scope as a registry's Reporter sends it: the Listing
// names as removed the services the Syncer holds for the registry in scope
// that it omits, whose Removed snapshots (not marked Relist) follow
// (registries.Reporter rules 3 and 8).
func list(sy *Syncer, registry string, scope registries.Scope, names []string) {
	keys := keysOf(names)
	var removed []registries.ServiceKey
	for _, k := range sy.Serving(registry) {
		if scope.Holds(k) && !slices.Contains(keys, k) {
			removed = append(removed, k)
		}
	}
	sy.Listing(registry, scope, keys, removed)
	for _, k := range removed {
		sy.Snapshot(registries.Snapshot{Registry: registry, Service: k.Service(), Removed: true})
	}
}

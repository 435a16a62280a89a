package syncer

import (
	"context"
	"testing"

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

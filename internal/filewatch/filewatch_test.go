package filewatch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestLoop: Read runs at the start, after a change of a matched name (rule
// 1) and after a ConfigMap's swap (rule 3); a long Resync keeps the
// periodic read out of the way.
func TestLoop(t *testing.T) {
	dir := t.TempDir()
	var reads atomic.Int32
	l := Loop{
		Dirs:   []string{dir},
		Match:  func(base string) bool { return filepath.Ext(base) == ".yaml" },
		Settle: 50 * time.Millisecond, Resync: time.Hour,
		Read:   func() { reads.Add(1) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	harness.EventuallyTrue(t, 10*time.Second, "the first read", func() bool { return reads.Load() == 1 })
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyTrue(t, 10*time.Second, "a read after a.yaml changed", func() bool { return reads.Load() == 2 })
	// A ConfigMap's symlink swap counts whatever Match says (rule 3).
	if err := os.Symlink(dir, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyTrue(t, 10*time.Second, "a read after ..data changed", func() bool { return reads.Load() == 3 })
}

// Package filewatch runs the one loop meshbridge follows files with: the
// file registry's file (registries/file) and the traffic-policy files
// (package policy).
//
// Rules:
//  1. Read is called once at the start, then after every change
//     notification (fsnotify) in one of the watched directories for a
//     name Match accepts, once Settle has passed without another, and at
//     every Resync as a safety net.
//  2. A file rewritten in place (cp, a shell redirection, an editor that
//     truncates and rewrites) notifies at every write: waiting for Settle
//     reads it when the writer is done rather than halfway. A resync tick
//     while settling reads nothing: the settled read follows.
//  3. A Kubernetes ConfigMap volume swaps its "..data" symlink: that name
//     always counts as a change.
//  4. A directory that cannot be watched yet (it does not exist) is tried
//     again at each resync; any other watch failure is logged once, and
//     the periodic reads go on.
package filewatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Loop is what Run follows.
type Loop struct {
	// Dirs are the directories watched.
	Dirs []string
	// Match reports whether a changed file's base name is one the loop
	// follows.
	Match func(base string) bool
	// Settle and Resync are rule 1's durations; both must be positive.
	Settle, Resync time.Duration
	// Read is called from Run's goroutine only.
	Read   func()
	Logger *slog.Logger
}

// Run follows the files until ctx is done, and returns nil then; it
// returns an error only when no watcher can be created at all.
func (l Loop) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Close()
	watching := map[string]bool{}
	warned := false
	watch := func() {
		for _, dir := range l.Dirs {
			if watching[dir] {
				continue
			}
			err := w.Add(dir)
			switch {
			case err == nil:
				watching[dir] = true
			case errors.Is(err, fs.ErrNotExist):
				// The read reports what is missing; tried again at each resync.
			case !warned:
				warned = true
				l.Logger.Warn("Cannot watch a directory; relying on periodic re-reads",
					"dir", dir, "resync", l.Resync, "err", err)
			}
		}
	}
	watch()
	l.Read()
	tick := time.NewTicker(l.Resync)
	defer tick.Stop()
	settle := time.NewTimer(l.Settle)
	settle.Stop()
	settling := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if base := filepath.Base(ev.Name); base == "..data" || l.Match(base) {
				settle.Reset(l.Settle)
				settling = true
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			l.Logger.Warn("File watch reported an error; relying on periodic re-reads", "err", err)
		case <-settle.C:
			settling = false
			l.Read()
		case <-tick.C:
			watch()
			if !settling {
				l.Read()
			}
		}
	}
}

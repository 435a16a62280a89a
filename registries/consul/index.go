package consul

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// maxBackoff bounds the wait between failed reads.
const maxBackoff = 10 * time.Second

// nextIndex applies Consul's blocking-query index rules to the X-Consul-Index
// (got) returned by a query that waited on prev, and returns the index to wait
// on next and whether the result may differ from the previous one:
//   - an index that went backwards (a restored snapshot, a new cluster) resets
//     to 0, so the next query returns the current state at once;
//   - otherwise the index is at least 1: waiting on 0 returns immediately and
//     would spin;
//   - an unchanged index means the wait timed out with nothing new.
//
// Source: Consul docs, "Blocking Queries" (Implementation Details: "Reset the
// index if it goes backwards", "Sanity check index is greater than zero").
// api/watch/plan.go documents the reset but does not do it.
func nextIndex(prev, got uint64) (next uint64, changed bool) {
	switch {
	case got < prev:
		return 0, true
	case got < 1: // implies prev == 0
		return 1, true
	default:
		return got, prev == 0 || got != prev
	}
}

// blockState is where a blocking loop (blockingQuery) stands: the index it
// waits on (X-Consul-Index, kept through failures), whether its last read
// failed, and whether it is confirming an index that went backwards.
type blockState struct {
	index   uint64
	failing bool
	// confirming: the last answer's index went backwards and was not
	// applied; the next read is a consistent one (consistent).
	confirming bool
}

// consistent reports whether the next read must be a consistent read
// (?consistent, api.QueryOptions.RequireConsistent): the one that confirms
// an index that went backwards. A server restarted with its data answers
// default-mode reads from the state it restored before it has applied its
// whole log (hashicorp/consul#2644), an older index with services missing;
// a consistent read is answered only by a leader that has applied every
// committed entry (Consul docs, "Consistency Modes"), and until then fails
// and is retried like any failed read.
func (s blockState) consistent() bool { return s.confirming }

// waitIndex is the WaitIndex of the next read: the index, or 0 after a
// failed read. A blocking query on the old index would hold the first good
// answer back until the index moves or the wait ends (up to WaitTime), so
// a failing loop reads the current state at once; the index is kept for
// nextIndex. api/watch/plan.go reads at once too, but drops the index (its
// watch functions return none with an error).
func (s blockState) waitIndex() uint64 {
	if s.failing {
		return 0
	}
	return s.index
}

// failed is the state after a failed read: the same index, failing.
func (s blockState) failed() blockState {
	s.failing = true
	return s
}

// answered is the state after a successful read that returned
// X-Consul-Index got, and what that answer is (nextIndex). An index that
// went backwards is not applied (answer.backwards): the loop confirms it
// with a consistent read, whose answer is applied as a reset
// (answer.reset), whatever its index.
func (s blockState) answered(got uint64) (blockState, answer) {
	if s.confirming {
		next := max(got, 1)
		return blockState{index: next}, answer{prev: s.index, next: next, changed: true, recovered: s.failing, rebuilt: true}
	}
	next, changed := nextIndex(s.index, got)
	if next == 0 {
		return blockState{confirming: true}, answer{prev: s.index, changed: true, recovered: s.failing, backwards: true}
	}
	return blockState{index: next}, answer{prev: s.index, next: next, changed: changed, recovered: s.failing}
}

// answer is what a blocking loop's successful read is to its handler.
type answer struct {
	// prev is the index the loop waited on (kept through failures); next
	// the one it waits on now (nextIndex).
	prev, next uint64
	// changed is nextIndex's: the result may differ from the previous one.
	changed bool
	// recovered is true when the read before this one failed.
	recovered bool
	// backwards: the index went backwards (nextIndex reset it to 0); the
	// answer is not applied, the loop confirms it (blockState.consistent).
	backwards bool
	// rebuilt: the consistent read that confirmed an index gone backwards.
	rebuilt bool
}

// reset reports whether the answer is the confirmed state after the index
// went backwards: the state was restored or rebuilt, so what was read
// before may be gone (registries.Snapshot.Relist).
func (a answer) reset() bool { return a.rebuilt }

// fresh reports whether a loop handles the answer: its index moved, or it
// is the first answer after a failure, whose errors only a read clears
// even when nothing changed (a service's error snapshot; the catalog's
// registry-wide error, which its listing ends).
func (a answer) fresh() bool { return a.changed || a.recovered }

// retry is a bounded exponential backoff: 250 ms doubling up to maxBackoff,
// jittered, never giving up.
type retry struct{ b *backoff.ExponentialBackOff }

func newRetry() *retry {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 250 * time.Millisecond
	b.MaxInterval = maxBackoff
	b.MaxElapsedTime = 0
	b.Reset()
	return &retry{b: b}
}

func (r *retry) reset() { r.b.Reset() }

// wait sleeps for the next backoff interval, or until wake is closed
// (another reader got through: the agent answers again); false when ctx
// ended first.
func (r *retry) wait(ctx context.Context, wake <-chan struct{}) bool {
	t := time.NewTimer(min(r.b.NextBackOff(), maxBackoff))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-wake:
		return true
	}
}

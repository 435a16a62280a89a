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

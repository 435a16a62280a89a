package xds

import (
	"context"
	"sync"
	"time"

	"github.com/meshbridge/meshbridge/model"
)

// debounceOptions are the timing rules of docs/design.md §5.
type debounceOptions struct {
	// after is the quiet period: push once no request arrived for this long.
	after time.Duration
	// max caps the wait: push once the first merged request is this old, even
	// if requests keep arriving.
	max time.Duration
	// edsMax is the cap of a batch of EDS-only requests (at most max): under
	// sustained churn the quiet period rarely comes, and an endpoint change
	// would otherwise wait up to max. A batch that turns full takes max.
	edsMax time.Duration
	// edsDebounce debounces EDS-only requests too; when false they are pushed
	// at once, bypassing the batch (Istio's PILOT_ENABLE_EDS_DEBOUNCE=false).
	edsDebounce bool
}

// debounce merges the requests of q and calls push with each batch, one push
// at a time, until ctx is done; then it waits for running pushes and returns.
// It mirrors Istio's pilot/pkg/xds/discovery.go debounce. now is the clock;
// timers come from package time (testing/synctest fakes both).
//
// One select, four states:
//   - idle: nothing pending, no timer armed; a request arms the quiet-period
//     timer and starts the batch (debouncing).
//   - debouncing: requests merge into the batch and restart the quiet period;
//     when the timer fires and either the quiet period or the cap has passed
//     (max, or edsMax while every request of the batch is EDS-only), the
//     batch is pushed (pushing), otherwise the timer is re-armed for the rest
//     of the quiet period.
//   - pushing: a push runs in its own goroutine; requests merge into the next
//     batch; a timer firing meanwhile is ignored and the batch is checked again
//     when the push reports done (back to debouncing or idle).
//   - stopped: ctx is done; wait for running pushes and return.
//
// With edsDebounce false an EDS-only request is pushed at once in every state,
// concurrently with a running full push; push must serialise itself.
//
// options is read at every event, so a change (DiscoveryServer.SetDebounce)
// applies from the next request or timer on.
func debounce(ctx context.Context, q *requestQueue, options func() debounceOptions, now func() time.Time, push func(*model.PushRequest)) {
	var (
		running  sync.WaitGroup
		batch    *model.PushRequest
		batchN   int       // the requests merged into batch (requestQueue.take)
		start    time.Time // when the batch's first request arrived
		last     time.Time // when the batch's latest request arrived
		timer    <-chan time.Time
		free     = true // no batch push running
		pushDone = make(chan struct{}, 1)
		opts     = options()
	)
	defer running.Wait()

	pushBatch := func() {
		quiet, age, limit := now().Sub(last), now().Sub(start), opts.max
		if !batch.Full {
			limit = min(limit, opts.edsMax)
		}
		if quiet < opts.after && age < limit {
			timer = time.After(min(opts.after-quiet, limit-age))
			return
		}
		req, n := batch, batchN
		batch, batchN, timer, free = nil, 0, nil, false
		running.Go(func() {
			push(req)
			q.pushed(n)
			pushDone <- struct{}{}
		})
	}

	for {
		select {
		case <-ctx.Done():
			return
		case <-q.ready:
			opts = options()
			req, n := q.take()
			if req == nil {
				continue
			}
			if !opts.edsDebounce && !req.Full {
				running.Go(func() { push(req); q.pushed(n) })
				continue
			}
			batchN += n
			last = now()
			if batch == nil {
				start = last
				timer = time.After(opts.after)
			}
			if batch == nil {
				batch = req // take() hands over ownership
			} else {
				batch.Absorb(req)
			}
		case <-timer:
			opts = options()
			timer = nil
			if free {
				pushBatch()
			}
		case <-pushDone:
			free = true
			if batch != nil {
				pushBatch()
			}
		}
	}
}

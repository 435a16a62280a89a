package xds

import (
	"context"
	"sync"

	"github.com/meshbridge/meshbridge/model"
)

// requestQueue hands push requests from the XDSUpdater methods to the debounce
// loop. It merges requests while the loop is busy instead of buffering them,
// so an XDSUpdater call never blocks, also before Run starts the loop
// (serviceentry requires XDSUpdater methods to return quickly).
//
// It also counts the requests added and not yet pushed (unpushed: those
// pending, in the debounce's batch or in a running push), for WaitIdle.
type requestQueue struct {
	mu       sync.Mutex
	pending  *model.PushRequest
	pendingN int           // requests merged into pending
	unpushed int           // requests added whose push has not returned
	idle     chan struct{} // closed while unpushed is 0
	ready    chan struct{} // capacity 1: "pending is non-nil"
}

func newRequestQueue() *requestQueue {
	idle := make(chan struct{})
	close(idle)
	return &requestQueue{ready: make(chan struct{}, 1), idle: idle}
}

// add merges req into the pending request (PushRequest.Merge's rules) and
// wakes the loop. The pending request is the queue's own copy, so merging is
// in place and a burst of n requests costs O(n), not O(n²).
func (q *requestQueue) add(req *model.PushRequest) {
	q.mu.Lock()
	if q.pending == nil {
		q.pending = req.Clone()
	} else {
		q.pending.Absorb(req)
	}
	q.pendingN++
	if q.unpushed == 0 {
		q.idle = make(chan struct{})
	}
	q.unpushed++
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the pending request, or nil, and how many requests it
// merges, and empties the queue. The request now belongs to the caller,
// who reports its push with pushed.
func (q *requestQueue) take() (*model.PushRequest, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	req, n := q.pending, q.pendingN
	q.pending, q.pendingN = nil, 0
	return req, n
}

// pushed records that the push of n requests (take's counts) returned.
func (q *requestQueue) pushed(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unpushed -= n
	if q.unpushed == 0 && n > 0 {
		close(q.idle)
	}
}

// waitIdle returns once every request added so far has been pushed (and
// no other is pending), or ctx's error.
func (q *requestQueue) waitIdle(ctx context.Context) error {
	q.mu.Lock()
	idle := q.idle
	q.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

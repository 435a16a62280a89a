package xds

import (
	"sync"

	"github.com/meshbridge/meshbridge/model"
)

// requestQueue hands push requests from the XDSUpdater methods to the debounce
// loop. It merges requests while the loop is busy instead of buffering them,
// so an XDSUpdater call never blocks, also before Run starts the loop
// (serviceentry requires XDSUpdater methods to return quickly).
type requestQueue struct {
	mu      sync.Mutex
	pending *model.PushRequest
	ready   chan struct{} // capacity 1: "pending is non-nil"
}

func newRequestQueue() *requestQueue {
	return &requestQueue{ready: make(chan struct{}, 1)}
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
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the pending request, or nil, and empties the queue. The
// request now belongs to the caller.
func (q *requestQueue) take() *model.PushRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	req := q.pending
	q.pending = nil
	return req
}

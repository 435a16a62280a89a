package serviceentry

import (
	"context"
	"sync"
)

// queue runs tasks one at a time, in the order they were pushed, on a single
// worker goroutine. It is unbounded: Push never blocks, so a store write never
// waits on a slow handler. It mirrors Istio's pkg/queue instance used by the
// memory ConfigStoreController.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	tasks   []func()
	closing bool
}

func newQueue() *queue {
	q := &queue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Push appends a task. Tasks pushed after Run returned are dropped.
func (q *queue) Push(task func()) {
	q.mu.Lock()
	if !q.closing {
		q.tasks = append(q.tasks, task)
		q.cond.Signal()
	}
	q.mu.Unlock()
}

// Run executes tasks until ctx is done. Tasks queued at that point are
// dropped: the process is shutting down and nothing downstream will read them.
func (q *queue) Run(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.closing = true
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	for {
		q.mu.Lock()
		for len(q.tasks) == 0 && !q.closing {
			q.cond.Wait()
		}
		if q.closing {
			q.tasks = nil
			q.mu.Unlock()
			return
		}
		task := q.tasks[0]
		q.tasks[0] = nil
		q.tasks = q.tasks[1:]
		q.mu.Unlock()
		task()
	}
}

// Flush returns once every task pushed before the call has run, or ctx is
// done. Tests and shutdown use it instead of sleeping.
func (q *queue) Flush(ctx context.Context) error {
	done := make(chan struct{})
	q.Push(func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

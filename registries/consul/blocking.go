package consul

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
)

// blockingQuery is one reader's loop of Consul blocking queries on one
// endpoint: the skeleton of hashicorp/consul api/watch plan.go
// (Plan.RunWithClientAndHclog) with this package's rules (doc.go rules 2,
// 3, 8 and 13). The catalog loop, each watched service and the state/any
// loop are one each; T is what the endpoint returns. Each round:
//
//  1. hold, when set, returns once the loop has something to follow;
//  2. a token of the loop's own bucket (Config.RateLimit, Config.Burst);
//  3. the gate (hang.go): no read is sent while the agent is hung;
//  4. read, with WaitIndex blockState.waitIndex (the index, or 0 right after
//     a failure) and WaitTime Config.WaitTime;
//  5. a failed read (as the gate reports it: a read a hang cut short fails
//     with the hang) goes to failed, then the loop backs off (retry: 250 ms
//     doubling up to 10 s, jittered), keeping its index, until the backoff
//     ends or another failing reader gets through (registries.Session.Recovery);
//     a read sent while failing that is still in flight when another reader
//     gets through is cancelled and sent again at once, not reported
//     (resendOnRecovery);
//  6. a successful one resets the backoff, marks reader as answering
//     (registries.Session.ReadOK) and goes to answered with what its X-Consul-Index
//     means (answer); except an answer whose index went backwards, which is
//     logged and not applied: the next read is a consistent read
//     (blockState.consistent) with WaitIndex 0, and its answer goes to
//     answered as a reset (answer.reset).
//
// run returns when ctx is done (in hold, a wait, or a read cut short by it,
// which is not reported); it never gives up otherwise.
type blockingQuery[T any] struct {
	// reader names the loop in the read health (registries.Session).
	reader string
	// hold, optional, blocks until the loop has something to follow;
	// failing is true after a failed read. It returns false when ctx ended.
	hold func(ctx context.Context, failing bool) bool
	// read sends one query with q (WaitIndex, WaitTime and the read's
	// context set) and returns its result and meta.
	read func(q *api.QueryOptions) (T, *api.QueryMeta, error)
	// failed reports a failed read, observed when it returned.
	failed func(err error, observed time.Time)
	// answered handles a successful read, observed when it returned; ctx
	// is the loop's.
	answered func(ctx context.Context, got T, meta *api.QueryMeta, a answer, observed time.Time)
}

// run runs the loop of w's reader until ctx is done.
func (b blockingQuery[T]) run(ctx context.Context, w *watcher) {
	lim, retry := w.limiter(), newRetry()
	var st blockState
	for {
		if b.hold != nil && !b.hold(ctx, st.failing) {
			return
		}
		if lim.Wait(ctx) != nil {
			return
		}
		q := &api.QueryOptions{WaitIndex: st.waitIndex(), WaitTime: w.cfg.WaitTime, RequireConsistent: st.consistent()}
		wake := w.session.Recovery()
		rctx, done, ok := w.gate.begin(ctx)
		if !ok {
			return
		}
		superseded, release := func() bool { return false }, func() {}
		if st.failing {
			rctx, superseded, release = resendOnRecovery(rctx, wake)
		}
		got, meta, err := b.read(q.WithContext(rctx))
		release()
		err = done(err)
		if ctx.Err() != nil {
			return
		}
		if err != nil && superseded() {
			continue // held by a server without a leader: sent again at once
		}
		now := time.Now()
		if err != nil {
			st = st.failed()
			b.failed(err, now)
			if !retry.wait(ctx, wake) {
				return
			}
			continue
		}
		retry.reset()
		w.session.ReadOK(b.reader)
		var a answer
		st, a = st.answered(meta.LastIndex)
		if a.backwards {
			w.logger.Info("Consul index went backwards; confirming with a consistent read", "reader", b.reader,
				"index", meta.LastIndex, "prev", a.prev)
			continue
		}
		b.answered(ctx, got, meta, a, now)
	}
}

// resendOnRecovery returns the context of a read sent after a failure
// (without blocking: it should be answered at once) that is cancelled when
// wake (registries.Session.Recovery, taken before the read) is closed;
// superseded reports whether that is what ended it, and release ends the
// watch once the read returned. A Consul server without a leader holds the
// reads sent to it (rpc_hold_timeout, 7 s) and answers them seconds after it
// elects one, well after reads sent then; another reader getting through
// means the agent answers now, so the held read is sent again rather than
// awaited: a restarted agent's readers are all back within one round trip.
func resendOnRecovery(ctx context.Context, wake <-chan struct{}) (rctx context.Context, superseded func() bool, release func()) {
	rctx, cancel := context.WithCancel(ctx)
	var cut atomic.Bool
	stop := make(chan struct{})
	go func() {
		select {
		case <-wake:
			cut.Store(true)
			cancel()
		case <-stop:
		case <-rctx.Done():
		}
	}()
	return rctx, cut.Load, func() { close(stop); cancel() }
}

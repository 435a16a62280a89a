package registries

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Liveness defaults: a registry server that leaves a probe unanswered for
// DefaultLivenessTimeout is down, probes run every DefaultLivenessInterval
// while it answers and DefaultLivenessRetry apart while it does not. A hung
// server is therefore seen within Interval + Timeout (7 s), well within an
// operator's 15 s, and a server that answers again is seen at once: the
// probe sent while it hung is still waiting, and it answers that first.
const (
	DefaultLivenessInterval = 2 * time.Second
	DefaultLivenessTimeout  = 5 * time.Second
	DefaultLivenessRetry    = 500 * time.Millisecond
	// maxProbeWait bounds how long one probe may wait for an answer after
	// its Timeout, before a fresh one (a new connection, say) is sent.
	maxProbeWait = 30 * time.Second
)

// ErrHung is the error Liveness reports for a server that accepts requests
// but does not answer them (a stopped process keeps its sockets: the
// kernel still accepts connections and buffers requests).
var ErrHung = errors.New("the registry server accepted the request but did not answer")

// ReasonHung is the meshbridge_registry_errors_total reason of a probe a
// server left unanswered (ErrHung).
const ReasonHung = "hung"

// LivenessReason is the errors_total reason of a Liveness Down: ReasonHung
// for an unanswered probe, otherwise other (the registry's reason for a
// failed read).
func LivenessReason(err error, other string) string {
	if errors.Is(err, ErrHung) {
		return ReasonHung
	}
	return other
}

// ErrNotProbed is what a Probe returns when there is nothing to probe yet
// (the watcher has not connected for the first time): no verdict, the next
// probe follows Retry. The watcher reports a first connection that fails.
var ErrNotProbed = errors.New("nothing to probe yet")

// Liveness detects a registry server that does not answer: a killed server
// refuses connections and every read fails at once, but a hung one (a
// stopped process, a deadlock, a full disk) leaves them waiting, and a
// watcher's blocking queries are meant to wait for minutes. Liveness sends
// a short read (Probe), one at a time, and says Down when one fails or goes
// unanswered for Timeout, Up when one succeeds after that:
//
//  1. A probe that fails, or has no answer after Timeout, makes the server
//     down, as of when that probe was sent (so an outage's duration is
//     true, not shortened by the detection delay).
//  2. A probe that has no answer is not abandoned: it is waited for (up to
//     30 s past its Timeout, then replaced), because a server that resumes
//     answers what is pending first; the next probe follows Retry after a
//     failure.
//  3. The first probe that succeeds after that makes the server up; probes
//     then follow Interval apart.
//  4. A probe that returns ErrNotProbed changes nothing.
//
// Probe gets a context that ends 30 s after its Timeout; a probe that cannot
// be cancelled may run longer, and no other starts meanwhile. Down and Up
// are called from Run's goroutine, alternately, Down first.
type Liveness struct {
	// Probe is one short read of the server, on a connection of its own
	// where the server's reads share one (a read queued behind blocking
	// queries says nothing), with no timeout of its own beyond its
	// context's.
	Probe func(ctx context.Context) error
	// Down is called when the server goes down: err says why (wrapping
	// ErrHung for an unanswered probe), since is when the probe that found
	// it was sent.
	Down func(err error, since time.Time)
	// Up is called when the server answers again.
	Up func()
	// Interval, Timeout and Retry default to DefaultLivenessInterval,
	// DefaultLivenessTimeout and DefaultLivenessRetry.
	Interval, Timeout, Retry time.Duration
}

// Run probes until ctx is done.
func (l *Liveness) Run(ctx context.Context) {
	interval := cmpOr(l.Interval, DefaultLivenessInterval)
	timeout := cmpOr(l.Timeout, DefaultLivenessTimeout)
	retry := cmpOr(l.Retry, DefaultLivenessRetry)
	down := false
	for {
		sent := time.Now()
		err, ok := l.probe(ctx, timeout, func() {
			if !down {
				down = true
				l.Down(fmt.Errorf("no answer within %s: %w", timeout, ErrHung), sent)
			}
		})
		if !ok {
			return
		}
		wait := interval
		switch {
		case errors.Is(err, ErrNotProbed):
			wait = retry
		case err == nil && down:
			down = false
			l.Up()
		case err != nil:
			if !down {
				down = true
				l.Down(err, sent)
			}
			wait = retry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// probe runs one probe and returns its result; hung is called when it has
// no answer after timeout. ok is false when ctx ended first.
func (l *Liveness) probe(ctx context.Context, timeout time.Duration, hung func()) (err error, ok bool) {
	pctx, cancel := context.WithTimeout(ctx, timeout+maxProbeWait)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- l.Probe(pctx) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, false
	case err := <-result:
		return err, true
	case <-t.C:
		hung()
	}
	select {
	case <-ctx.Done():
		return nil, false
	case err := <-result:
		return err, true
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

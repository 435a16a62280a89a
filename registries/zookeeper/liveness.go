package zookeeper

import (
	"context"
	"fmt"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// runLiveness probes the session's server with an exists("/") until ctx
// is done: a server that leaves it unanswered for 5 s, or a failing one,
// takes the registry down as of when the probe was sent, with a
// registry-wide error snapshot (last-known-good kept); an answer after that
// has the loop re-list at once, which brings the registry up
// (registries.Liveness).
//
// The client's own timeouts are too long for this: it drops a silent
// connection after two thirds of the session timeout, and a hung server
// accepts the next connection and leaves its handshake unanswered for ten
// times that. Requests cannot be given a deadline of their own, so the
// probe is waited for rather than cancelled, which also makes its answer
// the first sign that the server is back.
func (w *watcher) runLiveness(ctx context.Context) {
	l := &registries.Liveness{
		Probe: func(context.Context) error {
			c := w.current.Load()
			if c == nil || w.sessions.Load() == 0 {
				return registries.ErrNotProbed // the loop reports a first session that fails
			}
			_, _, err := c.Exists("/")
			return err
		},
		Down: func(err error, since time.Time) {
			reason := registries.LivenessReason(err, "unavailable")
			err = fmt.Errorf("zookeeper: %w", err)
			w.session.ReadFailedSince(readerEnsemble, reason, err, since)
			w.session.FailListing(registries.Scope{}, err, time.Now())
		},
		Up: func() {
			select {
			case w.relistNow <- struct{}{}:
			default:
			}
		},
	}
	l.Run(ctx)
}

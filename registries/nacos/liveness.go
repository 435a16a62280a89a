package nacos

import (
	"context"
	"fmt"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_request"

	"github.com/meshbridge/meshbridge/registries"
)

// runLiveness probes the namespace's connection with a HealthCheckRequest
// (Nacos 2.x's own keep-alive request, answered by any Nacos-protocol
// server) until ctx is done (doc.go rule 12): a probe left unanswered, or
// failing, takes the namespace down: the registry is down as of when the
// probe was sent, and every group gets its registry-wide error and each
// service its error snapshot (last-known-good kept); the next answer
// brings it up and the list loop relists and subscribes again at once.
//
// Every request already has a deadline (requestTimeoutMs), but the
// listings and reconcile queries that would meet it come every
// RelistInterval or ReconcileInterval, and the SDK's own health check
// waits for 5 s of silence plus its timeout before it reconnects: a probe
// every 2 s sees a hung server within 7 s.
func (w *nsWatcher) runLiveness(ctx context.Context) {
	l := &registries.Liveness{
		Probe: func(context.Context) error {
			c := w.getConn()
			switch {
			case w.connections.Load() == 0:
				return registries.ErrNotProbed // the list loop reports a first connection that fails
			case c == nil:
				return errNotConnected
			}
			return c.healthCheck()
		},
		Down: func(err error, since time.Time) {
			err = w.noteFailureSince(livenessReader(w.ns), registries.LivenessReason(err, reasonConnect),
				fmt.Errorf("Nacos gRPC connection (namespace %q): %w", w.ns, err), since)
			w.wasDown.Store(true)
			now := time.Now()
			for _, g := range w.cfg.Groups {
				w.session.Down(w.scope(g), err, now)
			}
		},
		Up: func() {
			// What a server that answers again says next may be
			// incomplete (it may have dropped ephemeral instances
			// whose clients have not re-registered yet), whichever
			// path it comes by: a push may well come before the list
			// loop's next listing.
			now := time.Now()
			for _, g := range w.cfg.Groups {
				w.session.Reconnected(w.scope(g), now)
			}
			w.session.ReadOK(livenessReader(w.ns))
			w.wakeList()
		},
	}
	l.Run(ctx)
}

// healthCheck sends a HealthCheckRequest. Like every request it gives up
// after requestTimeoutMs, not at ctx's end: a request in flight holds up
// closing the connection (conn.inFlight), and a probe gone unanswered
// is followed by the next, so one is waiting when a hung server resumes.
func (c *conn) healthCheck() error {
	_, err := c.request(rpc_request.NewHealthCheckRequest())
	return err
}

package consul

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
)

// readerLiveness is the liveness probe's reader (registries.Session).
const readerLiveness = "liveness"

// errNoLeader is a liveness probe's answer without a cluster leader.
var errNoLeader = errors.New("the agent knows no cluster leader")

// gate is the liveness verdict every reader shares (doc.go rule 13): while
// the agent does not answer, the reads in flight are cancelled, each
// reported as failed with the hang as its cause, and no read is sent until
// the agent answers again. A hung agent keeps its connections open, so
// without this a blocking query would wait its whole WaitTime (5 minutes)
// before failing, and the HTTP client's own timeouts must not cut that
// legitimate wait short.
type gate struct {
	mu     sync.Mutex
	hung   error              // why the agent is down; nil while it answers
	ctx    context.Context    // of the reads sent now; cancelled when the agent hangs
	cancel context.CancelFunc //
	up     chan struct{}      // closed when the agent answers again
}

func newGate() *gate {
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan struct{})
	close(up)
	return &gate{ctx: ctx, cancel: cancel, up: up}
}

// begin waits until the agent answers (or ctx ends: ok false) and returns
// the context of one read and the function to call with its error when it
// returns: that function reports a read cut short by a hang as the hang.
func (g *gate) begin(ctx context.Context) (rctx context.Context, done func(error) error, ok bool) {
	for {
		g.mu.Lock()
		hung, up := g.hung, g.up
		g.mu.Unlock()
		if hung == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, false
		case <-up:
		}
	}
	g.mu.Lock()
	gctx := g.ctx
	g.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(gctx, cancel)
	return rctx, func(err error) error {
		stop()
		cancel()
		if err != nil && ctx.Err() == nil && gctx.Err() != nil {
			g.mu.Lock()
			hung := g.hung
			g.mu.Unlock()
			if hung != nil {
				return hung
			}
			return fmt.Errorf("%w (the agent did not answer a liveness probe)", registries.ErrHung)
		}
		return err
	}, true
}

// down cancels the reads in flight and holds new ones until up.
func (g *gate) down(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hung != nil {
		return
	}
	g.hung = err
	g.cancel()
	g.up = make(chan struct{})
}

// open lets reads through again.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hung == nil {
		return
	}
	g.hung = nil
	g.ctx, g.cancel = context.WithCancel(context.Background())
	close(g.up)
}

// runLiveness probes the agent on a connection of its own
// (/v1/status/leader, which needs no ACL and which the agent answers
// itself or through its servers, like every read) until ctx is done; a
// probe left unanswered, failing or answering that there is no leader takes
// the registry down and holds the readers when unanswered (gate); the next
// answer naming a leader brings them back, and wakes every reader still
// waiting out its backoff.
func (w *watcher) runLiveness(ctx context.Context, probe *api.Client) {
	l := &registries.Liveness{
		Probe: func(ctx context.Context) error {
			leader, err := probe.Status().LeaderWithQueryOptions((&api.QueryOptions{}).WithContext(ctx))
			if err == nil && leader == "" {
				// Reads fail without a leader: the agent is not back yet,
				// and waking the readers now would only grow their
				// backoff.
				err = errNoLeader
			}
			return err
		},
		Down: func(err error, since time.Time) {
			reason := registries.LivenessReason(err, errorReason(readerLiveness, err))
			err = fmt.Errorf("Consul agent at %s: %w", w.reg.status.Address, err)
			w.session.ReadFailedSince(readerLiveness, reason, w.reg.redact(err), since)
			if errors.Is(err, registries.ErrHung) {
				w.gate.down(err)
			}
		},
		Up: func() {
			w.gate.open()
			w.session.ReadOK(readerLiveness)
		},
	}
	l.Run(ctx)
}

// newProbeClient is the liveness probe's client: tr's settings
// (newTransport) on a transport of its own with one connection, so that
// the probe never waits behind the blocking queries for a connection.
func newProbeClient(c Config, e endpoint, tr *http.Transport) (*api.Client, error) {
	tr = tr.Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 1, 1, 1
	tr.ResponseHeaderTimeout = 0 // the probe's context bounds it
	return newClient(c, e, tr)
}

package xds

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/meshbridge/meshbridge/serviceentry"
)

// Following a push to its clients (the push and ack stages of
// meshbridge_convergence_seconds, measured from PushRequest.Start):
//
//   - When a push hands a type's changed resources to its cache, the
//     streams that must hear of them are noted, before the cache can answer
//     any: a stream whose mirrored subscription (callbacks.go) covers an
//     updated name, or a removed one where the client is told of removals
//     (Delta; SotW for the full-state types CDS and LDS), with LDS and RDS
//     for proxyless gRPC streams only. Each such (stream, type) waits for
//     the cache version before the update: a response of the type with a
//     higher version carries the change, or a later one that replaced it
//     (the cache answers a watch with everything that changed since the
//     version the stream knows; xds/cache).
//   - push: the first response of a waiting (stream, type) with a higher
//     version, once per push.
//   - ack: when every waiting (stream, type) answered such a response, the
//     last ACK among them; a NACK or a closed stream stops the wait for that
//     stream but is not an ACK. A push no stream ACKed gives no ack sample,
//     and a push nobody subscribed to gives neither.
//
// Sampling: at most maxFollowed pushes are followed at once; a push that
// starts meanwhile is not followed. A followed push is given up after
// followFor (a stream that never answers), without a sample. The initial
// push is followed like any other, but no stream is connected then.
const (
	maxFollowed = 8
	followFor   = time.Minute
)

// convergence follows pushes to the streams of every listener. Lock order:
// convergence.mu before callbacks.mu; callbacks call in without holding
// their own.
type convergence struct {
	listeners []*callbacks
	// observe records a stage's sample: serviceentry.ObserveConvergence.
	observe func(stage string, d time.Duration)
	// following counts the pushes in followed, so that a response or a
	// request costs an atomic load when none is.
	following atomic.Int32

	mu       sync.Mutex
	followed []*trackedPush
}

// trackedPush is one followed push.
type trackedPush struct {
	start time.Time // PushRequest.Start
	began time.Time // when the push began: followFor counts from it
	// after is, by type, the cache version before the push's update.
	after map[string]uint64
	// waiting are the (stream, type) pairs still to answer.
	waiting map[waitKey]struct{}
	sealed  bool      // the push finished noting its updates
	pushed  bool      // the push stage was observed
	lastAck time.Time // the latest ACK of a waiting pair
}

// waitKey is a (stream, type) pair a push waits for.
type waitKey struct {
	st      *streamState
	typeURL string
}

func newConvergence(listeners ...*callbacks) *convergence {
	c := &convergence{listeners: listeners, observe: serviceentry.ObserveConvergence}
	for _, l := range listeners {
		l.conv = c
	}
	return c
}

// begin starts following a push that began at began for a change observed
// at start; nil when it is not followed (no start, or maxFollowed already
// are). Called under DiscoveryServer.pushMu.
func (c *convergence) begin(start, began time.Time) *trackedPush {
	if start.IsZero() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.followed[:0]
	for _, p := range c.followed {
		if began.Sub(p.began) < followFor {
			kept = append(kept, p)
		}
	}
	clear(c.followed[len(kept):])
	c.followed = kept
	var p *trackedPush
	if len(c.followed) < maxFollowed {
		p = &trackedPush{start: start, began: began, after: map[string]uint64{}, waiting: map[waitKey]struct{}{}}
		c.followed = append(c.followed, p)
	}
	c.following.Store(int32(len(c.followed)))
	return p
}

// expect notes, for push p, an update of typeURL's cache from version
// before, and the streams that must hear of it. Called before the cache
// gets the update, under DiscoveryServer.pushMu.
func (c *convergence) expect(p *trackedPush, typeURL string, before uint64, update map[string]types.Resource, remove []string) {
	if p == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.after[typeURL] = before
	grpcOnly := typeURL == resourcev3.ListenerType || typeURL == resourcev3.RouteType
	for _, l := range c.listeners {
		l.mu.Lock()
		for key, st := range l.streams {
			if st.gen == "" || (grpcOnly && st.gen != GeneratorGRPC) {
				continue
			}
			ts := st.lookup(typeURL)
			if ts == nil || !ts.hasSub || !covers(ts.sub, key.delta || cachev3.ResourceRequiresFullStateInSotw(typeURL), update, remove) {
				continue
			}
			p.waiting[waitKey{st, typeURL}] = struct{}{}
		}
		l.mu.Unlock()
	}
}

// covers reports whether a stream subscribed as sub is sent a response for
// an update of update and remove; removals reach it only when told.
func covers(sub stream.Subscription, toldRemovals bool, update map[string]types.Resource, remove []string) bool {
	if sub.IsWildcard() {
		return len(update) > 0 || (toldRemovals && len(remove) > 0)
	}
	names := sub.SubscribedResources()
	if len(update) < len(names) {
		for name := range update {
			if _, ok := names[name]; ok {
				return true
			}
		}
	} else {
		for name := range names {
			if _, ok := update[name]; ok {
				return true
			}
		}
	}
	if toldRemovals {
		for _, name := range remove {
			if _, ok := names[name]; ok {
				return true
			}
		}
	}
	return false
}

// seal marks p as done noting updates: it completes once its pairs are
// answered. Called under DiscoveryServer.pushMu.
func (c *convergence) seal(p *trackedPush) {
	if p == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.sealed = true
	c.finish(p)
}

// sent observes the push stage of the pushes waiting for st's typeURL that
// a response of version carries.
func (c *convergence) sent(st *streamState, typeURL, version string, at time.Time) {
	if c.following.Load() == 0 {
		return
	}
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.followed {
		if p.pushed || v <= p.after[typeURL] {
			continue
		}
		if _, ok := p.waiting[waitKey{st, typeURL}]; ok {
			p.pushed = true
			c.observe(serviceentry.StagePush, at.Sub(p.start))
		}
	}
}

// answered settles st's typeURL for the pushes a response of version
// carries: ACKed (ack) or NACKed.
func (c *convergence) answered(st *streamState, typeURL, version string, ack bool, at time.Time) {
	if c.following.Load() == 0 {
		return
	}
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.followed {
		key := waitKey{st, typeURL}
		if _, ok := p.waiting[key]; !ok || v <= p.after[typeURL] {
			continue
		}
		delete(p.waiting, key)
		if ack {
			p.lastAck = at
		}
		c.finish(p)
	}
}

// closed stops every wait for st. The stream is closed: its types no
// longer change.
func (c *convergence) closed(st *streamState) {
	if c.following.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.followed {
		waited := false
		for typeURL := range st.types {
			key := waitKey{st, typeURL}
			if _, ok := p.waiting[key]; ok {
				delete(p.waiting, key)
				waited = true
			}
		}
		if waited {
			c.finish(p)
		}
	}
}

// finish ends following p once it is sealed and nothing waits, observing
// the ack stage when some stream ACKed. c.mu must be held; callers ranging
// over c.followed may go on: it is replaced, not changed in place.
func (c *convergence) finish(p *trackedPush) {
	if !p.sealed || len(p.waiting) > 0 {
		return
	}
	kept := make([]*trackedPush, 0, len(c.followed))
	for _, q := range c.followed {
		if q != p {
			kept = append(kept, q)
		}
	}
	if len(kept) == len(c.followed) {
		return // already finished
	}
	c.followed = kept
	c.following.Store(int32(len(kept)))
	if !p.lastAck.IsZero() {
		c.observe(serviceentry.StageAck, p.lastAck.Sub(p.start))
	}
}

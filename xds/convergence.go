package xds

import (
	"maps"
	"slices"
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
// The waits are kept on each (stream, type) (typeState.waits, under the
// stream's lock) and counted on the push (atomics), so that a response or
// an answer of one stream touches its own state and the push's counters,
// never a lock every stream shares: a push watched by ten thousand streams
// is answered by all of them at once.
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
// a stream's lock before convergence.mu; expect takes the streams' locks
// one at a time.
type convergence struct {
	listeners []*callbacks
	// observe records a stage's sample: serviceentry.ObserveConvergence.
	observe func(stage string, d time.Duration)

	mu       sync.Mutex
	followed []*trackedPush // guarded by mu
}

// trackedPush is one followed push.
type trackedPush struct {
	start time.Time // PushRequest.Start
	began time.Time // when the push began: followFor counts from it
	// after is, by servedIndex, the cache version before the push's update
	// of that type; set by expect before any stream waits on the type.
	after [len(servedTypeURLs)]atomic.Uint64
	// waiting counts the (stream, type) pairs still to answer.
	waiting atomic.Int64
	sealed  atomic.Bool  // the push finished noting its updates
	pushed  atomic.Bool  // the push stage was observed
	lastAck atomic.Int64 // the latest ACK of a waiting pair, Unix ns; 0 none
	// done: finished or given up; waits still holding it are dropped.
	done atomic.Bool
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
		} else {
			p.done.Store(true) // given up
		}
	}
	clear(c.followed[len(kept):])
	c.followed = kept
	if len(c.followed) >= maxFollowed {
		return nil
	}
	p := &trackedPush{start: start, began: began}
	c.followed = append(c.followed, p)
	return p
}

// expect notes, for push p, an update of typeURL's cache from version
// before, and the streams that must hear of it. Called before the cache
// gets the update, under DiscoveryServer.pushMu.
func (c *convergence) expect(p *trackedPush, typeURL string, before uint64, update map[string]types.Resource, remove []string) {
	i := servedIndex(typeURL)
	if p == nil || i < 0 {
		return
	}
	p.after[i].Store(before)
	grpcOnly := typeURL == resourcev3.ListenerType || typeURL == resourcev3.RouteType
	fullState := cachev3.ResourceRequiresFullStateInSotw(typeURL)
	u := newUpdateSet(update)
	for _, l := range c.listeners {
		l.eachStream(func(key streamKey, st *streamState) {
			st.mu.Lock()
			defer st.mu.Unlock()
			if st.gen == "" || (grpcOnly && st.gen != GeneratorGRPC) {
				return
			}
			ts := st.served[i]
			if ts == nil || !ts.hasSub || !covers(ts.sub, key.delta || fullState, u, remove) {
				return
			}
			p.waiting.Add(1)
			ts.waits = append(ts.waits, p)
		})
	}
}

// updateSet is an update's names as a map and as a slice: expect checks
// every stream against one update, and a slice of a few names is looked up
// in a subscription without starting a map iteration per stream.
type updateSet struct {
	byName map[string]types.Resource
	names  []string
}

func newUpdateSet(update map[string]types.Resource) updateSet {
	return updateSet{byName: update, names: slices.Collect(maps.Keys(update))}
}

// covers reports whether a stream subscribed as sub is sent a response for
// an update of u and remove; removals reach it only when told.
func covers(sub stream.Subscription, toldRemovals bool, u updateSet, remove []string) bool {
	if sub.IsWildcard() {
		return len(u.names) > 0 || (toldRemovals && len(remove) > 0)
	}
	names := sub.SubscribedResources()
	if len(u.names) <= len(names) {
		for _, name := range u.names {
			if _, ok := names[name]; ok {
				return true
			}
		}
	} else {
		for name := range names {
			if _, ok := u.byName[name]; ok {
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
	p.sealed.Store(true)
	c.finishIfDone(p)
}

// sent observes the push stage of the pushes waiting for ts, the stream's
// state of the served type of index i, that a response of version carries.
// Called under the stream's lock.
func (c *convergence) sent(ts *typeState, i int, version string, at time.Time) {
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil || i < 0 {
		return
	}
	for _, p := range ts.waits {
		if !p.done.Load() && v > p.after[i].Load() && p.pushed.CompareAndSwap(false, true) {
			c.observe(serviceentry.StagePush, at.Sub(p.start))
		}
	}
}

// answered settles ts, the stream's state of the served type of index i,
// for the pushes a response of version carries: ACKed (ack) or NACKed.
// Called under the stream's lock.
func (c *convergence) answered(ts *typeState, i int, version string, ack bool, at time.Time) {
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil || i < 0 {
		return
	}
	kept := ts.waits[:0]
	for _, p := range ts.waits {
		switch {
		case p.done.Load():
		case v <= p.after[i].Load():
			kept = append(kept, p)
		default:
			if ack {
				for ns := at.UnixNano(); ; {
					last := p.lastAck.Load()
					if last >= ns || p.lastAck.CompareAndSwap(last, ns) {
						break
					}
				}
			}
			if p.waiting.Add(-1) == 0 {
				c.finishIfDone(p)
			}
		}
	}
	clear(ts.waits[len(kept):])
	ts.waits = kept
}

// closed stops every wait for st: the stream is closed, its types no
// longer change. Called under the stream's lock.
func (c *convergence) closed(st *streamState) {
	for _, ts := range st.types {
		for _, p := range ts.waits {
			if !p.done.Load() && p.waiting.Add(-1) == 0 {
				c.finishIfDone(p)
			}
		}
		ts.waits = nil
	}
}

// finishIfDone ends following p once it is sealed and nothing waits,
// observing the ack stage when some stream ACKed. Whoever sees both first
// finishes it; the others find it done.
func (c *convergence) finishIfDone(p *trackedPush) {
	if !p.sealed.Load() || p.waiting.Load() > 0 || !p.done.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	kept := c.followed[:0]
	for _, q := range c.followed {
		if q != p {
			kept = append(kept, q)
		}
	}
	clear(c.followed[len(kept):])
	c.followed = kept
	c.mu.Unlock()
	if ns := p.lastAck.Load(); ns != 0 {
		c.observe(serviceentry.StageAck, time.Unix(0, ns).Sub(p.start))
	}
}

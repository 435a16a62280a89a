package consul

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/time/rate"
)

// Re-reads of polled services are non-blocking health queries: at most
// rereadWorkers at once (see config.go) and rereadRate per second, so that
// recovering from an outage with thousands of polled services does not
// stampede the servers, while 200 services still sync in about a second.
const (
	rereadRate  = rate.Limit(200)
	rereadBurst = 50
)

// pollSet is the services beyond MaxWatches. Two loops follow them: the
// state/any loop compares each member's checks with its baseline and
// re-reads those that changed; the read loop reads members that have no
// baseline (new ones, failed ones) and, when the catalog index moved, the
// check-less ones. Membership changes wake the read loop and never cancel
// the state/any query, which under churn would rarely complete.
type pollSet struct {
	mu      sync.Mutex
	members map[string]*pollMember
	recheck bool          // the catalog index moved: re-read check-less members
	wake    chan struct{} // the read loop has members to read
	based   chan struct{} // a member got a baseline: the state loop has one to follow
}

// pollMember is one polled service and its owner token (service.owner).
type pollMember struct {
	svc   *service
	owner uint64
	base  baseline
}

// baseline is what a polled service was last read as: the fingerprint and
// the nodes of its last successful read; ok is false before one.
type baseline struct {
	ok    bool
	fp    fingerprint
	nodes map[string]bool
}

// pollTarget is a member to read.
type pollTarget struct {
	svc   *service
	owner uint64
}

func newPollSet() *pollSet {
	return &pollSet{members: map[string]*pollMember{}, wake: make(chan struct{}, 1), based: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *pollSet) add(s *service, owner uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members[s.name] = &pollMember{svc: s, owner: owner}
	signal(p.wake)
}

func (p *pollSet) remove(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.members, name)
}

func (p *pollSet) has(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.members[name]
	return ok
}

func (p *pollSet) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.members)
}

// recheckCheckless asks the read loop to re-read the members whose last
// read found no service-level check: state/any cannot see their instances
// come and go, the catalog index can.
func (p *pollSet) recheckCheckless() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		if m.base.ok && m.base.fp.serviceChecks == 0 {
			p.recheck = true
			signal(p.wake)
			return
		}
	}
}

// toRead returns the members the read loop reads now: those without a
// baseline, and the check-less ones when the catalog index moved.
func (p *pollSet) toRead() []pollTarget {
	p.mu.Lock()
	defer p.mu.Unlock()
	recheck := p.recheck
	p.recheck = false
	var out []pollTarget
	for _, m := range p.members {
		if !m.base.ok || (recheck && m.base.fp.serviceChecks == 0) {
			out = append(out, pollTarget{svc: m.svc, owner: m.owner})
		}
	}
	return out
}

// all returns every member.
func (p *pollSet) all() []pollTarget {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]pollTarget, 0, len(p.members))
	for _, m := range p.members {
		out = append(out, pollTarget{svc: m.svc, owner: m.owner})
	}
	return out
}

// anyBaselined reports whether a member has a baseline.
func (p *pollSet) anyBaselined() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		if m.base.ok {
			return true
		}
	}
	return false
}

// baseline returns a member's baseline while owner owns it.
func (p *pollSet) baseline(name string, owner uint64) (baseline, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[name]
	if m == nil || m.owner != owner || !m.base.ok {
		return baseline{}, false
	}
	return m.base, true
}

// setBaseline records what owner's read of a member found; nothing when
// the member left or changed owner since.
func (p *pollSet) setBaseline(name string, owner uint64, b baseline) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[name]
	if m == nil || m.owner != owner {
		return
	}
	first := !m.base.ok
	m.base = b
	if first {
		signal(p.based)
	}
}

// dropBaseline makes the read loop read a member again (its read failed).
func (p *pollSet) dropBaseline(name string, owner uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.members[name]; m != nil && m.owner == owner {
		m.base = baseline{}
		signal(p.wake)
	}
}

// clearBaselines makes the read loop read every member again (state/any
// failed: each got an error snapshot that only a read clears).
func (p *pollSet) clearBaselines() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.members {
		m.base = baseline{}
	}
	signal(p.wake)
}

// runState follows the polled services with one blocking query on
// /v1/health/state/any (blockingQuery) and re-reads those whose fingerprint
// differs from their baseline. States: no member has a baseline (wait for
// the read loop's first reads), following (block on the index), failing
// (query without waiting after a backoff, to confirm the recovery at once).
func (w *watcher) runState(ctx context.Context) {
	blockingQuery[api.HealthChecks]{
		reader: readerState,
		hold: func(ctx context.Context, failing bool) bool {
			for !w.polled.anyBaselined() && !failing {
				select {
				case <-ctx.Done():
					return false
				case <-w.polled.based:
				}
			}
			return true
		},
		read: func(q *api.QueryOptions) (api.HealthChecks, *api.QueryMeta, error) {
			return w.client.Health().State(api.HealthAny, q)
		},
		failed: func(err error, now time.Time) {
			err = w.noteFailure(reasonState, "", err)
			for _, m := range w.polled.all() {
				w.fail(m.svc, m.owner, err, now)
			}
			w.polled.clearBaselines() // re-read everyone once Consul answers again
		},
		answered: func(ctx context.Context, checks api.HealthChecks, _ *api.QueryMeta, a answer, _ time.Time) {
			if a.fresh() {
				w.reread(ctx, w.stale(indexChecks(checks)))
			}
		},
	}.run(ctx, w)
}

// stale returns the polled members whose baseline differs from what a
// state/any answer says. Each member is compared under its readMu, so a
// read of it in flight (the read loop's) finishes first and is compared
// too: a baseline set after the comparison comes from a read newer than
// the answer.
func (w *watcher) stale(idx checkIndex) []pollTarget {
	var out []pollTarget
	for _, t := range w.polled.all() {
		t.svc.readMu.Lock()
		if b, ok := w.polled.baseline(t.svc.name, t.owner); ok && b.fp != idx.fingerprint(t.svc.name, b.nodes) {
			out = append(out, t)
		}
		t.svc.readMu.Unlock()
	}
	return out
}

// runPollReads is the read loop: it reads the polled services that have no
// baseline (new members, and members whose read failed, after a backoff)
// and, when the catalog index moved, the check-less ones. Requests to read
// arriving while it reads are served by its next round.
func (w *watcher) runPollReads(ctx context.Context) {
	retry := newRetry()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.polled.wake:
		}
		for {
			targets := w.polled.toRead()
			if len(targets) == 0 {
				break
			}
			wake := w.session.Recovery()
			if w.reread(ctx, targets) == 0 {
				retry.reset()
				continue
			}
			if !retry.wait(ctx, wake) {
				return
			}
		}
	}
}

// reread reads targets with non-blocking health queries, at most
// rereadWorkers at once and paced by the watcher's re-read bucket, and
// applies them; each success becomes its member's baseline: the
// fingerprint of the checks it read (not of the state/any answer that
// prompted it, which the service may have left before the read). Reads of
// one service are serialized (service.readMu), so the last applied is the
// newest. It returns how many reads failed.
func (w *watcher) reread(ctx context.Context, targets []pollTarget) (failed int) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sema = make(chan struct{}, rereadWorkers)
	)
	for _, t := range targets {
		if w.rereads.Wait(ctx) != nil {
			break
		}
		sema <- struct{}{}
		wg.Go(func() {
			defer func() { <-sema }()
			if !w.readPolled(ctx, t) {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// readPolled reads one polled service, applies it and records its
// baseline; false when the read failed.
func (w *watcher) readPolled(ctx context.Context, t pollTarget) bool {
	s := t.svc
	s.readMu.Lock()
	defer s.readMu.Unlock()
	rctx, done, ok := w.gate.begin(ctx)
	if !ok {
		return false
	}
	entries, _, err := w.client.Health().Service(s.name, "", false, (&api.QueryOptions{}).WithContext(rctx))
	err = done(err)
	now := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			w.failRead(s, t.owner, err, now)
			w.polled.dropBaseline(s.name, t.owner)
		}
		return false
	}
	w.session.ReadOK(serviceReader(s.name))
	w.apply(s, t.owner, entries, now, false)
	w.polled.setBaseline(s.name, t.owner, baselineOf(entries))
	return true
}

// fingerprint digests the checks that decide a service's instances' health.
type fingerprint struct {
	sum uint64
	// serviceChecks counts the service's own checks; a service with none
	// is invisible to state/any when instances come and go.
	serviceChecks int
}

// checkKey is one check's part of a fingerprint: (node, checkID,
// ModifyIndex). A check changes its ModifyIndex whenever its status or
// output changes.
func checkKey(c *api.HealthCheck) string {
	return c.Node + "\x00" + c.CheckID + "\x00" + strconv.FormatUint(c.ModifyIndex, 10)
}

// digest is the fingerprint of a service's own check keys and its nodes'
// node-level check keys.
func digest(own, nodeChecks []string) fingerprint {
	keys := append(slices.Clone(own), nodeChecks...)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	h := fnv.New64a()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{'\n'})
	}
	return fingerprint{sum: h.Sum64(), serviceChecks: len(slices.Compact(slices.Sorted(slices.Values(own))))}
}

// checkIndex is a /v1/health/state/any answer indexed for fingerprints:
// the service-level check keys by service, the node-level ones by node.
type checkIndex struct {
	own, byNode map[string][]string
}

func indexChecks(checks api.HealthChecks) checkIndex {
	idx := checkIndex{own: map[string][]string{}, byNode: map[string][]string{}}
	for _, c := range checks {
		if c.ServiceID == "" {
			idx.byNode[c.Node] = append(idx.byNode[c.Node], checkKey(c))
		} else {
			idx.own[c.ServiceName] = append(idx.own[c.ServiceName], checkKey(c))
		}
	}
	return idx
}

// fingerprint is the digest of (node, checkID, ModifyIndex) over service
// name's own checks and the node-level checks (ServiceID "") of nodes, the
// nodes its instances ran on at its last read: a node check going critical
// makes every instance on that node critical. Equal fingerprints mean
// nothing health-related changed.
func (idx checkIndex) fingerprint(name string, nodes map[string]bool) fingerprint {
	var nodeChecks []string
	for node := range nodes {
		nodeChecks = append(nodeChecks, idx.byNode[node]...)
	}
	return digest(idx.own[name], nodeChecks)
}

// fingerprints is checkIndex.fingerprint of every service in nodes
// (service → its nodes).
func fingerprints(checks api.HealthChecks, nodes map[string]map[string]bool) map[string]fingerprint {
	idx := indexChecks(checks)
	out := make(map[string]fingerprint, len(nodes))
	for name, ns := range nodes {
		out[name] = idx.fingerprint(name, ns)
	}
	return out
}

// baselineOf is the baseline of a /v1/health/service answer: its nodes and
// the fingerprint fingerprints gives for the same state, computed from the
// entries' checks (each entry carries its node's checks and its instance's
// own, so a node's checks repeat once per instance on it).
func baselineOf(entries []*api.ServiceEntry) baseline {
	var own, nodeChecks []string
	for _, e := range entries {
		if e == nil {
			continue
		}
		for _, c := range e.Checks {
			if c.ServiceID == "" {
				nodeChecks = append(nodeChecks, checkKey(c))
			} else {
				own = append(own, checkKey(c))
			}
		}
	}
	return baseline{ok: true, fp: digest(own, nodeChecks), nodes: nodesOf(entries)}
}

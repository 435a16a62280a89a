package consul

import (
	"context"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/time/rate"
)

// Re-reads triggered by state/any are non-blocking health queries: at most
// rereadWorkers at once (see config.go) and rereadRate per second, so that
// recovering from an outage with thousands of polled services does not
// stampede the servers, while 200 services still sync in about a second.
const (
	rereadRate  = rate.Limit(200)
	rereadBurst = 50
)

// pollSet is the services beyond MaxWatches, followed by the state/any loop.
// The catalog loop changes it; every change wakes the state loop (cancelling
// its blocking query) so new members are read at once.
type pollSet struct {
	mu      sync.Mutex
	members map[string]pollMember
	gen     uint64 // bumped on every change
	recheck bool   // re-read check-less members: the catalog index moved
	cancel  context.CancelFunc
	wake    chan struct{}
}

type pollMember struct {
	svc   *service
	owner uint64
}

func newPollSet() *pollSet {
	return &pollSet{members: map[string]pollMember{}, wake: make(chan struct{}, 1)}
}

func (p *pollSet) add(s *service, owner uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members[s.name] = pollMember{svc: s, owner: owner}
	p.changedLocked()
}

func (p *pollSet) remove(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.members[name]; ok {
		delete(p.members, name)
		p.changedLocked()
	}
}

func (p *pollSet) has(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.members[name]
	return ok
}

func (p *pollSet) recheckCheckless() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.members) > 0 {
		p.recheck = true
		p.changedLocked()
	}
}

func (p *pollSet) changedLocked() {
	p.gen++
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns a copy of the members, whether check-less members must be
// re-read, and the generation they belong to.
func (p *pollSet) take() (map[string]pollMember, bool, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.wake:
	default:
	}
	recheck := p.recheck
	p.recheck = false
	return maps.Clone(p.members), recheck, p.gen
}

// arm lets a change cancel the query about to run; false when a change
// already happened since take.
func (p *pollSet) arm(gen uint64, cancel context.CancelFunc) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return false
	}
	p.cancel = cancel
	return true
}

func (p *pollSet) disarm() {
	p.mu.Lock()
	p.cancel = nil
	p.mu.Unlock()
}

// baseline is what the state loop last read a polled service against.
type baseline struct {
	owner uint64
	fp    fingerprint
}

// runState follows the polled services with one blocking query on
// /v1/health/state/any and re-reads those whose fingerprint changed. States:
// no members (wait for the catalog loop), members without a baseline (query
// without waiting, then read them), all baselined (block on the index).
func (w *watcher) runState(ctx context.Context) {
	lim, retry := w.limiter(), newRetry()
	rereads := rate.NewLimiter(rereadRate, rereadBurst)
	known := map[string]baseline{}
	var index uint64
	for {
		members, recheck, gen := w.polled.take()
		for name, b := range known {
			m, ok := members[name]
			if !ok || m.owner != b.owner || (recheck && b.fp.serviceChecks == 0) {
				delete(known, name)
			}
		}
		if len(members) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.polled.wake:
				continue
			}
		}
		if lim.Wait(ctx) != nil {
			return
		}
		waitOn := index
		if len(known) < len(members) {
			waitOn = 0 // someone needs a baseline now
		}
		qctx, cancel := context.WithCancel(ctx)
		if !w.polled.arm(gen, cancel) {
			cancel()
			continue
		}
		q := &api.QueryOptions{WaitIndex: waitOn, WaitTime: w.cfg.WaitTime}
		wake := w.reg.recovery()
		checks, meta, err := w.client.Health().State(api.HealthAny, q.WithContext(qctx))
		woken := qctx.Err() != nil
		w.polled.disarm()
		cancel()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if err != nil {
			if woken {
				continue // cancelled by a membership change
			}
			err = w.reg.noteFailure(reasonState, "", err)
			for _, m := range members {
				w.fail(m.svc, m.owner, err, now)
			}
			clear(known) // re-read everyone once Consul answers again
			if !retry.wait(ctx, wake) {
				return
			}
			continue
		}
		retry.reset()
		w.reg.noteOK(readerState)
		next, changed := nextIndex(waitOn, meta.LastIndex)
		index = next
		if !changed {
			continue
		}
		nodes := make(map[string]map[string]bool, len(members))
		for name, m := range members {
			nodes[name] = m.svc.readNodes()
		}
		fps := fingerprints(checks, nodes)
		var stale []string
		for name := range members {
			if b, ok := known[name]; !ok || b.fp != fps[name] {
				stale = append(stale, name)
			}
		}
		read := w.reread(ctx, rereads, members, stale)
		failed := false
		for _, name := range stale {
			if read[name] {
				known[name] = baseline{owner: members[name].owner, fp: fps[name]}
			} else {
				delete(known, name)
				failed = true
			}
		}
		if failed && !retry.wait(ctx, wake) {
			return
		}
	}
}

// reread reads names with non-blocking health queries and applies them;
// it returns the names read successfully.
func (w *watcher) reread(ctx context.Context, lim *rate.Limiter, members map[string]pollMember, names []string) map[string]bool {
	var (
		mu   sync.Mutex
		ok   = make(map[string]bool, len(names))
		wg   sync.WaitGroup
		sema = make(chan struct{}, rereadWorkers)
	)
	for _, name := range names {
		if lim.Wait(ctx) != nil {
			break
		}
		sema <- struct{}{}
		m := members[name]
		wg.Go(func() {
			defer func() { <-sema }()
			q := (&api.QueryOptions{}).WithContext(ctx)
			entries, _, err := w.client.Health().Service(name, "", false, q)
			now := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					w.failRead(m.svc, m.owner, err, now)
				}
				return
			}
			w.reg.noteOK(serviceReader(name))
			w.apply(m.svc, m.owner, entries, now, false)
			mu.Lock()
			ok[name] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	return ok
}

// fingerprint digests the checks that decide a service's instances' health.
type fingerprint struct {
	sum uint64
	// serviceChecks counts the service's own checks; a service with none
	// is invisible to state/any when instances come and go.
	serviceChecks int
}

// fingerprints computes, for each service in nodes (service → nodes its
// instances ran on at the last read), a digest of (node, checkID,
// ModifyIndex) over its own checks and the node-level checks (ServiceID "")
// of its nodes: a node check going critical makes every instance on that
// node critical. A check changes its ModifyIndex whenever its status or
// output changes, so equal fingerprints mean nothing health-related changed.
func fingerprints(checks api.HealthChecks, nodes map[string]map[string]bool) map[string]fingerprint {
	own := map[string][]string{}
	byNode := map[string][]string{}
	for _, c := range checks {
		key := c.Node + "\x00" + c.CheckID + "\x00" + strconv.FormatUint(c.ModifyIndex, 10)
		if c.ServiceID == "" {
			byNode[c.Node] = append(byNode[c.Node], key)
		} else if _, ok := nodes[c.ServiceName]; ok {
			own[c.ServiceName] = append(own[c.ServiceName], key)
		}
	}
	out := make(map[string]fingerprint, len(nodes))
	for name, ns := range nodes {
		keys := slices.Clone(own[name])
		n := len(keys)
		for node := range ns {
			keys = append(keys, byNode[node]...)
		}
		slices.Sort(keys)
		h := fnv.New64a()
		for _, k := range keys {
			h.Write([]byte(k))
			h.Write([]byte{'\n'})
		}
		out[name] = fingerprint{sum: h.Sum64(), serviceChecks: n}
	}
	return out
}

package nacos

import (
	"errors"
	"fmt"
	"time"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/registries"
)

// opKind is what happened to a service, queued for its namespace's emitter.
type opKind int

const (
	opRead   opKind = iota // an authoritative read: push, subscribe answer, query
	opErr                  // a failed read
	opRemove               // the service left the listing or the allow-list
)

// source tells where a read came from.
type source string

const (
	fromPush      source = "push"
	fromSubscribe source = "subscribe"
	fromReconcile source = "reconcile"
)

type op struct {
	kind     opKind
	info     nacosmodel.Service
	from     source
	err      error
	observed time.Time
}

// service is one listed service of a namespace. The scheduling fields are
// guarded by the namespace watcher's mu; the emission fields belong to its
// emitter goroutine alone, so the Sink sees one call at a time per service.
type service struct {
	group, name string

	// Guarded by nsWatcher.mu.
	ops    []op // pending, oldest first: at most [read, err] (enqueue)
	queued bool
	// gen moves with every push: a subscribe answer or query started
	// before a push is older than it and is dropped.
	gen        uint64
	subscribed bool // the server has our subscription on the current connection
	gone       bool // removed (or skipped): no more ops
	// lastNonEmpty mirrors len(last) > 0 for the list loop.
	lastNonEmpty bool
	// unconfirmed: after a reconnection, an empty read before confirmAfter
	// is not trusted (doc.go rule 7).
	unconfirmed  bool
	confirmAfter time.Time

	// Emitter only.
	emitted bool                  // any snapshot sent
	hasLast bool                  // last holds an authoritative list
	last    []registries.Instance // sorted by ID; read-only once sent
	failing bool                  // the last snapshot sent was an error
}

// svcKey identifies a service within a namespace.
func svcKey(group, name string) string { return group + "@@" + name }

// enqueue adds o to s's pending ops and queues s for the emitter; w.mu is
// held. A read supersedes everything before it; consecutive errors keep the
// last; a removal supersedes everything and ends the service.
func (w *nsWatcher) enqueueLocked(s *service, o op) {
	if s.gone {
		return
	}
	switch o.kind {
	case opRead, opRemove:
		s.ops = append(s.ops[:0:0], o)
		s.gone = o.kind == opRemove
	case opErr:
		if n := len(s.ops); n > 0 && s.ops[n-1].kind == opErr {
			s.ops[n-1] = o
		} else {
			s.ops = append(s.ops, o)
		}
	}
	if !s.queued {
		s.queued = true
		w.queue = append(w.queue, s)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *nsWatcher) enqueue(s *service, o op) {
	w.mu.Lock()
	w.enqueueLocked(s, o)
	w.mu.Unlock()
}

// next takes the next queued service and its ops; nil when none.
func (w *nsWatcher) next() (*service, []op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return nil, nil
	}
	s := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	ops := s.ops
	s.ops, s.queued = nil, false
	return s, ops
}

// errEmptyAfterReconnect explains a held empty read (doc.go rule 7).
var errEmptyAfterReconnect = errors.New("Nacos answered an empty instance list right after a reconnection; " +
	"keeping the last-known-good instances while clients re-register")

// process emits what one op means for s (registries rules 1-3, doc.go rule
// 4). Emitter goroutine only.
func (w *nsWatcher) process(s *service, o op) {
	switch o.kind {
	case opRead:
		w.processRead(s, o)
	case opErr:
		w.fail(s, o.err, o.observed)
	case opRemove:
		w.emitRemoved(s, o.observed)
	}
}

func (w *nsWatcher) processRead(s *service, o op) {
	r := readService(o.info, w.ns, s.group, s.name, w.cfg.Clusters)
	if r.dubbo {
		w.skipDubbo(s, o.observed)
		return
	}
	w.mu.Lock()
	hold := len(r.instances) == 0 && s.unconfirmed && o.observed.Before(s.confirmAfter)
	if !hold {
		s.unconfirmed = false
	}
	w.mu.Unlock()
	if hold {
		w.fail(s, errEmptyAfterReconnect, o.observed)
		return
	}
	unchanged := s.hasLast && !s.failing && sameInstances(s.last, r.instances)
	if !unchanged {
		dServices, dInstances := 0, len(r.instances)-len(s.last)
		if !s.hasLast {
			dServices = 1
		}
		var corrections uint64
		if o.from == fromReconcile && s.hasLast && !s.failing {
			corrections = 1
			w.log.Debug("Reconcile found a change no push delivered", "group", s.group, "service", s.name,
				"count", len(r.instances))
		}
		s.last, s.hasLast, s.failing, s.emitted = r.instances, true, false, true
		w.sink.Snapshot(registries.Snapshot{
			Registry: w.cfg.Name,
			Service:  w.serviceOf(s, r.instances),
			Observed: o.observed,
		})
		w.reg.noteCounts(dServices, dInstances, 0, 0, corrections)
		w.log.Debug("Emitted Nacos service", "group", s.group, "service", s.name, "count", len(r.instances),
			"from", string(o.from))
	}
	w.mu.Lock()
	s.lastNonEmpty = len(s.last) > 0
	w.mu.Unlock()
	w.ru.markRead(w.ns, s.group, s.name)
}

// fail emits an error snapshot for s, once per run of failures: the
// consumer keeps the last-known-good instances (an error is never an empty
// list).
func (w *nsWatcher) fail(s *service, err error, observed time.Time) {
	if s.failing {
		return
	}
	s.failing, s.emitted = true, true
	w.sink.Snapshot(registries.Snapshot{
		Registry: w.cfg.Name,
		Service:  w.serviceOf(s, nil),
		Err:      fmt.Errorf("read Nacos service %q (namespace %q, group %q): %w", s.name, w.ns, s.group, err),
		Observed: observed,
	})
}

// emitRemoved emits the authoritative deletion of s, if anything was sent
// for it.
func (w *nsWatcher) emitRemoved(s *service, observed time.Time) {
	if s.emitted {
		w.sink.Snapshot(registries.Snapshot{
			Registry: w.cfg.Name,
			Service:  w.serviceOf(s, nil),
			Removed:  true,
			Observed: observed,
		})
	}
	if s.hasLast {
		w.reg.noteCounts(-1, -len(s.last), 0, 0, 0)
	}
	s.emitted, s.hasLast, s.last = false, false, nil
	w.reg.forgetReader(serviceReader(w.ns, s.group, s.name))
	w.log.Debug("Removed Nacos service", "group", s.group, "service", s.name)
	w.ru.markRead(w.ns, s.group, s.name)
}

// skipDubbo leaves out a service whose instances are Dubbo 3
// application-level instances (doc.go rule 8): removed if it was emitted,
// unsubscribed by the list loop, and not subscribed again while it stays
// listed.
func (w *nsWatcher) skipDubbo(s *service, observed time.Time) {
	key := svcKey(s.group, s.name)
	w.mu.Lock()
	s.gone = true
	s.ops = nil
	if w.services[key] == s {
		delete(w.services, key)
	}
	w.skipped[key] = true
	if s.subscribed {
		w.unsubscribeLater = append(w.unsubscribeLater, s)
	}
	w.mu.Unlock()
	w.wakeList()
	w.countSkipped(s.group, s.name, "Dubbo 3 application-level instances (dubbo.metadata.revision or dubbo.endpoints metadata)")
	w.emitRemoved(s, observed)
}

// serviceOf is the registries.Service of s in this namespace.
func (w *nsWatcher) serviceOf(s *service, instances []registries.Instance) registries.Service {
	return registries.Service{Name: s.name, Namespace: w.ns, Group: s.group, Instances: instances}
}

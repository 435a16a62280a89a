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
	// relist marks a removal found by the first listing after a failed
	// one (registries.Snapshot.Relist).
	relist bool
}

// service is one listed service of a namespace. The scheduling fields are
// guarded by the namespace watcher's mu; the emission fields belong to its
// emitter goroutine alone, so the Sink sees one call at a time per service.
type service struct {
	group, name string
	// providers: a Dubbo interface-level service (a "providers:" name read
	// while dubbo.enabled is true). Set at creation.
	providers bool

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
	// dubbo is the Dubbo service of the last list sent; nil for a plain
	// service.
	dubbo *registries.DubboService
	// application: the service held Dubbo 3 application-level instances
	// once, and stays an application-level service while listed (doc.go
	// rule 8).
	application bool
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
		w.emitRemoved(s, o.observed, o.relist)
	}
}

func (w *nsWatcher) processRead(s *service, o op) {
	instances, dubboSvc, ok := w.convert(s, o.info, o.observed)
	if !ok {
		return
	}
	w.mu.Lock()
	hold := len(instances) == 0 && s.unconfirmed && o.observed.Before(s.confirmAfter)
	// The first read after a reconnection is a re-list's
	// (registries.Snapshot.Relist).
	relist := s.unconfirmed
	if !hold {
		s.unconfirmed = false
	}
	w.mu.Unlock()
	if hold {
		w.fail(s, errEmptyAfterReconnect, o.observed)
		return
	}
	unchanged := s.hasLast && !s.failing && sameInstances(s.last, instances) && sameDubbo(s.dubbo, dubboSvc)
	if !unchanged {
		dServices, dInstances := 0, len(instances)-len(s.last)
		if !s.hasLast {
			dServices = 1
		}
		var corrections uint64
		if o.from == fromReconcile && s.hasLast && !s.failing {
			corrections = 1
			w.log.Debug("Reconcile found a change no push delivered", "group", s.group, "service", s.name,
				"count", len(instances))
		}
		s.last, s.hasLast, s.failing, s.emitted, s.dubbo = instances, true, false, true, dubboSvc
		w.sink.Snapshot(registries.Snapshot{
			Registry: w.cfg.Name,
			Service:  w.serviceOf(s, instances),
			Observed: o.observed,
			Relist:   relist,
		})
		w.reg.noteCounts(dServices, dInstances, 0, 0, corrections)
		w.log.Debug("Emitted Nacos service", "group", s.group, "service", s.name, "count", len(instances),
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
func (w *nsWatcher) emitRemoved(s *service, observed time.Time, relist bool) {
	if s.emitted {
		w.sink.Snapshot(registries.Snapshot{
			Registry: w.cfg.Name,
			Service:  w.serviceOf(s, nil),
			Removed:  true,
			Observed: observed,
			Relist:   relist,
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

// convert turns one read of s into its usable instances and, for a Dubbo
// service, its Dubbo identity (doc.go rules 6 and 8). ok is false when s is
// left out from now on: a Dubbo 3 application while dubbo.enabled is false
// (skipped and counted) or while dubbo.mode leaves application-level
// services out. Emitter goroutine only.
func (w *nsWatcher) convert(s *service, info nacosmodel.Service, observed time.Time) (
	instances []registries.Instance, dubboSvc *registries.DubboService, ok bool) {
	if s.providers {
		svc := readDubboInterface(info, s.name, w.cfg.Clusters, w.reg.dubbo)
		return svc.Instances, svc.Dubbo, true
	}
	if !s.application && !isDubboApplication(info.Hosts) {
		return readService(info, w.ns, s.group, s.name, w.cfg.Clusters), nil, true
	}
	switch {
	case !w.cfg.Dubbo.IsEnabled():
		w.leaveOut(s, observed, true)
		return nil, nil, false
	case !w.reg.dubbo.Mode().Application():
		w.leaveOut(s, observed, false)
		return nil, nil, false
	}
	s.application = true
	svc := readDubboApplication(info, s.name, w.cfg.Clusters, w.reg.dubbo)
	return svc.Instances, svc.Dubbo, true
}

// leaveOut leaves out a service whose instances are Dubbo 3
// application-level instances (doc.go rule 8): removed if it was emitted,
// unsubscribed by the list loop, and not subscribed again while it stays
// listed. With skip (dubbo.enabled is false) it is counted as skipped;
// otherwise (dubbo.mode) it is only logged at debug.
func (w *nsWatcher) leaveOut(s *service, observed time.Time, skip bool) {
	key := svcKey(s.group, s.name)
	w.mu.Lock()
	s.gone = true
	s.ops = nil
	if w.services[key] == s {
		delete(w.services, key)
	}
	if skip {
		w.skipped[key] = true
	} else {
		w.ignored[key] = true
	}
	if s.subscribed {
		w.unsubscribeLater = append(w.unsubscribeLater, s)
	}
	keys := w.groupKeysLocked(s.group)
	w.mu.Unlock()
	w.wakeList()
	// The group's services without s, before its removal
	// (registries.Sink.Listing).
	w.sink.Listing(w.cfg.Name, registries.ScopeOf(w.ns, s.group), keys)
	if skip {
		w.countSkipped(s.group, s.name, "Dubbo 3 application-level instances (dubbo.metadata.revision or dubbo.endpoints metadata)")
	} else {
		w.log.Debug("Left out a Dubbo application-level service (dubbo.mode)", "group", s.group, "service", s.name,
			"mode", string(w.reg.dubbo.Mode()))
	}
	w.emitRemoved(s, observed, false)
}

// groupKeysLocked returns the keys (registries.Service.Key) of the group's
// listed services. w.mu is held.
func (w *nsWatcher) groupKeysLocked(group string) []string {
	var keys []string
	for _, s := range w.services {
		if s.group == group {
			keys = append(keys, w.serviceOf(s, nil).Key())
		}
	}
	return keys
}

// serviceOf is the registries.Service of s in this namespace.
func (w *nsWatcher) serviceOf(s *service, instances []registries.Instance) registries.Service {
	return registries.Service{Name: s.name, Namespace: w.ns, Group: s.group, Instances: instances, Dubbo: s.dubbo}
}

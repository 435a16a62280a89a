package nacos

import (
	"fmt"
	"time"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/registries"
)

// opKind is what happened to a service, queued for its namespace's emitter.
type opKind int

const (
	opRead opKind = iota // an authoritative read: push, subscribe answer, query
	opErr                // a failed read
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
// guarded by the namespace watcher's mu; application belongs to its emitter
// goroutine alone. What the Sink gets is the Reporter's
// (registries.Reporter), which drops reads of a service no listing holds.
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
	// protected: the last read reached the service's protect threshold
	// (doc.go rule 6); counted in Status.Protected while not gone.
	protected bool

	// Emitter only.
	// application: the service held Dubbo 3 application-level instances
	// once, and stays an application-level service while listed (doc.go
	// rule 8).
	application bool
}

// svcKey identifies a service within a namespace.
func svcKey(group, name string) string { return group + "@@" + name }

// enqueue adds o to s's pending ops and queues s for the emitter; w.mu is
// held. A read supersedes everything before it; consecutive errors keep the
// last.
func (w *nsWatcher) enqueueLocked(s *service, o op) {
	if s.gone {
		return
	}
	switch o.kind {
	case opRead:
		s.ops = append(s.ops[:0:0], o)
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

// process reports what one op says of s (registries rules 1-3, doc.go
// rule 4). Emitter goroutine only.
func (w *nsWatcher) process(s *service, o op) {
	switch o.kind {
	case opRead:
		w.processRead(s, o)
	case opErr:
		w.session.Fail(w.serviceOf(s, registries.Service{}), fmt.Errorf("read Nacos service %q (namespace %q, group %q): %w",
			s.name, w.ns, s.group, o.err), o.observed)
	}
}

func (w *nsWatcher) processRead(s *service, o op) {
	read, ok := w.convert(s, o.info, o.observed)
	if !ok {
		return
	}
	instances := read.Instances
	w.noteProtection(s, o.info, len(instances))
	switch w.session.Read(w.serviceOf(s, read), o.observed) {
	case registries.ReadChanged:
		if o.from == fromReconcile {
			w.reg.noteCounts(0, 0, 1)
			w.log.Debug("Reconcile found a change no push delivered", "group", s.group, "service", s.name,
				"count", len(instances))
		}
	case registries.ReadHeld:
		w.log.Debug("Held an empty read after an outage or a reconnection", "group", s.group, "service", s.name,
			"from", string(o.from))
	}
}

// noteProtection records whether a read of s reached its protect threshold
// (doc.go rule 6) and logs each change: a warning when the server starts
// sending every instance as healthy, info when it stops. served is the
// number of usable instances the read yields.
func (w *nsWatcher) noteProtection(s *service, info nacosmodel.Service, served int) {
	protected := info.ReachProtectionThreshold
	w.mu.Lock()
	changed := !s.gone && s.protected != protected
	if changed {
		s.protected = protected
		if protected {
			w.reg.noteProtected(1)
		} else {
			w.reg.noteProtected(-1)
		}
	}
	w.mu.Unlock()
	switch {
	case changed && protected:
		w.log.Warn("Nacos protect threshold reached: the server lists every instance as healthy, and all are served",
			"group", s.group, "service", s.name, "instances", served)
	case changed:
		w.log.Info("Nacos protect threshold left: only healthy instances are served", "group", s.group, "service", s.name,
			"instances", served)
	}
}

// forgetProtectionLocked drops s, gone, from Status.Protected; w.mu is held.
func (w *nsWatcher) forgetProtectionLocked(s *service) {
	if s.protected {
		s.protected = false
		w.reg.noteProtected(-1)
	}
}

// convert turns one read of s into the service it reads as: its usable
// instances and, for a Dubbo service, what package registries/dubbo makes
// of it (its host, a port per protocol; doc.go rules 6 and 8). ok is false
// when s is left out from now on: a Dubbo 3 application while
// dubbo.enabled is false (skipped and counted) or while dubbo.mode leaves
// application-level services out. Emitter goroutine only.
func (w *nsWatcher) convert(s *service, info nacosmodel.Service, observed time.Time) (registries.Service, bool) {
	if s.providers {
		return readDubboInterface(info, w.ns, s.name, w.cfg.Clusters, w.reg.dubbo), true
	}
	if !s.application && !isDubboApplication(info.Hosts) {
		return registries.Service{Instances: readService(info, w.ns, s.group, s.name, w.cfg.Clusters)}, true
	}
	switch {
	case !w.cfg.Dubbo.IsEnabled():
		w.leaveOut(s, observed, true)
		return registries.Service{}, false
	case !w.reg.dubbo.Mode().Application():
		w.leaveOut(s, observed, false)
		return registries.Service{}, false
	}
	s.application = true
	return readDubboApplication(info, w.ns, s.name, w.cfg.Clusters, w.reg.dubbo), true
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
	w.forgetProtectionLocked(s)
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
	w.mu.Unlock()
	w.wakeList()
	// The group's services without s, then its removal.
	w.session.Remove(w.keyOf(s), observed)
	if skip {
		w.countSkipped(s.group, s.name, "Dubbo 3 application-level instances (dubbo.metadata.revision or dubbo.endpoints metadata)")
	} else {
		w.log.Debug("Left out a Dubbo application-level service (dubbo.mode)", "group", s.group, "service", s.name,
			"mode", string(w.reg.dubbo.Mode()))
	}
	w.session.ForgetReader(serviceReader(w.ns, s.group, s.name))
}

// keyOf is s's key (registries.Service.Key).
func (w *nsWatcher) keyOf(s *service) registries.ServiceKey {
	return w.serviceOf(s, registries.Service{}).Key()
}

// scope is the listing scope of a group (registries.ScopeOf).
func (w *nsWatcher) scope(group string) registries.Scope { return registries.ScopeOf(w.ns, group) }

// serviceOf is the registries.Service of s in this namespace: read (what
// convert made of a read; zero for its identity alone) with s's name,
// namespace and group.
func (w *nsWatcher) serviceOf(s *service, read registries.Service) registries.Service {
	read.Name, read.Namespace, read.Group = s.name, w.ns, s.group
	return read
}

package zookeeper

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// Dirty keys: "i/<interface>" and "a/<application>".
const (
	dirtyInterface   = "i/"
	dirtyApplication = "a/"
)

// arm starts waiting on one watch: when it fires, the loop gets it.
func (w *watcher) arm(key watchKey, ch <-chan zk.Event) {
	w.armed[key] = true
	ctx, gen := w.ctx, w.gen.Load()
	go func() {
		select {
		case ev := <-ch:
			select {
			case w.fired <- fire{key: key, ev: ev, gen: gen}:
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
}

// children reads path's children, watching them unless a watch of kind is
// already set on path.
func (w *watcher) children(kind watchKind, path string) ([]string, error) {
	key := watchKey{kind, path}
	if w.armed[key] {
		c, _, err := w.conn.Children(path)
		return c, err
	}
	c, _, ch, err := w.conn.ChildrenW(path)
	if err != nil {
		return nil, err
	}
	w.arm(key, ch)
	return c, nil
}

// exists reports whether path exists, watching for its creation (or a
// change) unless a watch of kind is already set on path.
func (w *watcher) exists(kind watchKind, path string) (bool, error) {
	key := watchKey{kind, path}
	if w.armed[key] {
		ok, _, err := w.conn.Exists(path)
		return ok, err
	}
	ok, _, ch, err := w.conn.ExistsW(path)
	if err != nil {
		return false, err
	}
	w.arm(key, ch)
	return ok, nil
}

// data reads path's data, watching it unless a watch of kind is already set
// on path.
func (w *watcher) data(kind watchKind, path string) ([]byte, error) {
	key := watchKey{kind, path}
	if w.armed[key] {
		d, _, err := w.conn.Get(path)
		return d, err
	}
	d, _, ch, err := w.conn.GetW(path)
	if err != nil {
		return nil, err
	}
	w.arm(key, ch)
	return d, nil
}

// childrenOrWatchCreation reads path's children; when path does not exist
// it watches for its creation (existsKind) and returns no children: an
// authoritative empty list.
func (w *watcher) childrenOrWatchCreation(kind, existsKind watchKind, path string) ([]string, error) {
	c, err := w.children(kind, path)
	if !errors.Is(err, zk.ErrNoNode) {
		return c, err
	}
	ok, err := w.exists(existsKind, path)
	if err != nil || !ok {
		return nil, err
	}
	// Created between the two reads.
	c, err = w.children(kind, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return c, err
}

// readRoot reads the interfaces under the root; all re-reads every
// interface's providers, else only new ones are read.
func (w *watcher) readRoot(all bool) {
	children, err := w.childrenOrWatchCreation(watchRoot, watchRootExists, w.r.root)
	if err != nil {
		w.fail("read", fmt.Errorf("zookeeper: list %s: %w", w.r.root, err))
		return
	}
	seen := make(map[string]bool, len(children))
	for _, c := range children {
		if c == MappingDir {
			continue
		}
		seen[c] = true
		if _, known := w.ifaces[c]; !known {
			w.ifaces[c] = &ifaceState{}
		} else if !all {
			continue
		}
		w.readProviders(c)
	}
	for iface := range w.ifaces {
		if !seen[iface] {
			delete(w.ifaces, iface)
			w.dirty[dirtyInterface+iface] = true
		}
	}
	w.r.setStatus(func(s *Status) { s.Interfaces = len(w.ifaces) })
}

// readProviders reads one interface's provider URLs (doc.go rule 4).
func (w *watcher) readProviders(iface string) {
	path := w.r.root + "/" + iface + "/providers"
	children, err := w.childrenOrWatchCreation(watchProviders, watchProvidersExist, path)
	if err != nil {
		w.fail("read", fmt.Errorf("zookeeper: list %s: %w", path, err))
		return
	}
	st := w.ifaces[iface]
	parsed := make(map[string]parsedProvider, len(children))
	for _, c := range children {
		if old, ok := st.parsed[c]; ok {
			parsed[c] = old
			continue
		}
		p, err := dubbo.ParseProviderURL(c)
		parsed[c] = parsedProvider{p: p, err: err}
	}
	st.parsed = parsed
	w.dirty[dirtyInterface+iface] = true
}

// readApps reads the applications under the apps root (/services, or
// layout spring-cloud's root); all re-reads every application's instances.
func (w *watcher) readApps(all bool) {
	children, err := w.childrenOrWatchCreation(watchApps, watchAppsExist, w.r.appsRoot)
	if err != nil {
		w.fail("read", fmt.Errorf("zookeeper: list %s: %w", w.r.appsRoot, err))
		return
	}
	seen := make(map[string]bool, len(children))
	for _, app := range children {
		seen[app] = true
		if _, known := w.apps[app]; !known {
			w.apps[app] = &appState{instances: map[string]parsedInstance{}}
		} else if !all {
			continue
		}
		w.readAppInstances(app, all)
	}
	for app := range w.apps {
		if !seen[app] {
			delete(w.apps, app)
			w.dirty[dirtyApplication+app] = true
		}
	}
	w.r.setStatus(func(s *Status) { s.Applications = len(w.apps) })
}

// readAppInstances reads one application's instance nodes; all re-reads
// every instance's data, else only new ones are read.
func (w *watcher) readAppInstances(app string, all bool) {
	path := w.r.appsRoot + "/" + app
	children, err := w.children(watchAppInstances, path)
	if errors.Is(err, zk.ErrNoNode) {
		delete(w.apps, app) // the apps root's watch reports it too
		w.dirty[dirtyApplication+app] = true
		return
	}
	if err != nil {
		w.fail("read", fmt.Errorf("zookeeper: list %s: %w", path, err))
		return
	}
	st := w.apps[app]
	seen := make(map[string]bool, len(children))
	for _, c := range children {
		seen[c] = true
		if _, known := st.instances[c]; known && !all {
			continue
		}
		w.readInstance(app, c)
	}
	for c := range st.instances {
		if !seen[c] {
			delete(st.instances, c)
			w.dirty[dirtyApplication+app] = true
		}
	}
}

// readInstance reads one application-level instance's ServiceInstance
// (layout dubbo: a Dubbo 3 process; spring-cloud: a Spring instance).
func (w *watcher) readInstance(app, child string) {
	path := w.r.appsRoot + "/" + app + "/" + child
	st := w.apps[app]
	data, err := w.data(watchInstance, path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		delete(st.instances, child)
	case err != nil:
		w.fail("read", fmt.Errorf("zookeeper: read %s: %w", path, err))
		return
	case w.r.builder == nil: // layout spring-cloud
		res := springInstance(app, child, data)
		switch {
		case res.skip != "":
			w.log.Debug("Not serving a Spring Cloud instance", "application", app, "node", child, "reason", res.skip)
		case res.inst.Invalid() != "":
			w.log.Debug("Cannot read a Spring Cloud instance", "application", app, "node", child, "err", res.inst.Invalid())
		}
		st.instances[child] = parsedInstance{spring: res}
	default:
		a, perr := dubbo.ParseServiceInstance(data)
		if perr == nil && a.Application != app {
			perr = fmt.Errorf("ServiceInstance name %q is not its application %q", a.Application, app)
		}
		st.instances[child] = parsedInstance{a: a, err: perr}
	}
	w.dirty[dirtyApplication+app] = true
}

// fail records a failed read: the registry's last-known-good state is kept
// (registries.Snapshot.Err), and a re-list is retried.
func (w *watcher) fail(reason string, err error) {
	w.failed = true
	if errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrAuthFailed) {
		reason, err = "forbidden", registries.Permanent(err)
	}
	w.session.ListingFailed(readerEnsemble, reason, registries.Scope{}, err, w.observed)
}

// outage records a lost connection: nothing is read until the session is
// back, and what was read stays served.
func (w *watcher) outage(err error) {
	w.session.ListingFailed(readerEnsemble, "unavailable", registries.Scope{}, err, time.Now())
}

// publish reports the services of every dirty interface or application
// to the Reporter, after a listing of every service the watcher then holds
// when that set changed (or on a re-list, and the first time): the Reporter
// sends what changed and the removals (registries.Reporter). Reads during a
// re-list are marked Relist (relist: Reporter.Reconnected).
func (w *watcher) publish() {
	var read []registries.Service
	for _, key := range slices.Sorted(maps.Keys(w.dirty)) {
		var svcs []registries.Service
		if iface, ok := strings.CutPrefix(key, dirtyInterface); ok {
			svcs = w.interfaceServices(iface)
		} else if app, ok := strings.CutPrefix(key, dirtyApplication); ok {
			svcs = w.applicationServices(app)
		}
		read = append(read, svcs...)
		names := make([]registries.ServiceKey, 0, len(svcs))
		for _, svc := range svcs {
			names = append(names, svc.Key())
		}
		if len(names) == 0 {
			delete(w.producedBy, key)
		} else {
			w.producedBy[key] = names
		}
	}
	clear(w.dirty)
	keys := map[registries.ServiceKey]bool{}
	for _, names := range w.producedBy {
		for _, n := range names {
			keys[n] = true
		}
	}
	if w.listed == nil || w.relisting || !maps.Equal(keys, w.listed) {
		w.session.Listing(registries.Scope{}, slices.SortedFunc(maps.Keys(keys), registries.ServiceKey.Compare), w.observed)
		w.listed = keys
	}
	for _, svc := range read {
		w.session.Read(svc, w.observed)
	}
	services, _ := w.session.Counts()
	w.r.setStatus(func(s *Status) { s.Services, s.Watches = services, len(w.armed) })
}

// interfaceServices are the services of one interface's providers.
func (w *watcher) interfaceServices(iface string) []registries.Service {
	st := w.ifaces[iface]
	if st == nil || len(st.parsed) == 0 {
		return nil
	}
	var providers []dubbo.Provider
	var malformed []dubbo.Malformed
	for _, child := range slices.Sorted(maps.Keys(st.parsed)) {
		pp := st.parsed[child]
		switch {
		case pp.err == nil:
			providers = append(providers, pp.p)
		case !errors.Is(pp.err, dubbo.ErrNotProvider):
			malformed = append(malformed, dubbo.Malformed{ID: child, Detail: pp.err.Error()})
		}
	}
	if len(providers) == 0 && len(malformed) == 0 {
		return nil
	}
	return w.r.builder.InterfaceServices("", iface, providers, malformed)
}

// applicationServices is the application-level service of app, if it has
// instances.
func (w *watcher) applicationServices(app string) []registries.Service {
	st := w.apps[app]
	if st == nil || len(st.instances) == 0 {
		return nil
	}
	if w.r.builder == nil { // layout spring-cloud
		nodes := make(map[string]springResult, len(st.instances))
		for child, pi := range st.instances {
			nodes[child] = pi.spring
		}
		return []registries.Service{springService(app, nodes)}
	}
	var insts []dubbo.AppInstance
	var malformed []dubbo.Malformed
	for _, child := range slices.Sorted(maps.Keys(st.instances)) {
		pi := st.instances[child]
		if pi.err != nil {
			malformed = append(malformed, dubbo.Malformed{ID: child, Detail: pi.err.Error()})
			continue
		}
		insts = append(insts, pi.a)
	}
	return []registries.Service{w.r.builder.ApplicationService("", app, insts, malformed, w.appMetadata(app, insts))}
}

// appMetadata is app's MetadataInfo of every revision its instances with
// remote metadata name (doc.go rule 9), by revision, read from the metadata
// report in ZooKeeper at either layout (dubbo.MetadataPaths: Dubbo Java's,
// then dubbo-go's). A MetadataInfo is immutable per revision: it is read
// once and kept while an instance names that revision. Local metadata
// (served by the process's MetadataService over the Dubbo protocol) is not
// read. A revision not written yet, or unreadable, is left out; it is read
// again at the application's next change.
func (w *watcher) appMetadata(app string, insts []dubbo.AppInstance) map[string]dubbo.RevisionMetadata {
	st := w.apps[app]
	out := map[string]dubbo.RevisionMetadata{}
	for _, a := range insts {
		if a.StorageType != "remote" || a.Revision == "" {
			continue
		}
		if _, done := out[a.Revision]; done {
			continue
		}
		m, ok := st.metadata[a.Revision]
		if !ok {
			m, ok = w.readMetadata(app, a.Revision)
		}
		if ok {
			if st.metadata == nil {
				st.metadata = map[string]dubbo.RevisionMetadata{}
			}
			st.metadata[a.Revision] = m
			out[a.Revision] = m
		}
	}
	for rev := range st.metadata {
		if _, named := out[rev]; !named {
			delete(st.metadata, rev)
		}
	}
	return out
}

// readMetadata reads app's MetadataInfo of revision; ok is false when
// neither layout holds it, or it cannot be read.
func (w *watcher) readMetadata(app, revision string) (m dubbo.RevisionMetadata, ok bool) {
	for _, path := range dubbo.MetadataPaths(w.r.root, app, revision) {
		data, _, err := w.conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err == nil {
			m, err = dubbo.ReadMetadata(data, app, revision)
		}
		if err != nil {
			w.log.Debug("Cannot read a Dubbo application's metadata", "application", app, "path", path, "err", err)
			return dubbo.RevisionMetadata{}, false
		}
		return m, true
	}
	return dubbo.RevisionMetadata{}, false
}

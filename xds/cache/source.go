package cache

import (
	"slices"
	"unsafe"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/xds/ads"
)

// Resources is also an ads.Source: the ADS server's watches are standing
// (Watch to Unwatch, not one per request), indexed by the names they
// subscribe to, and an Update wakes the ones of the names it changed (all
// the wildcard ones) with ads.Wake once the cache's lock is released.
// Respond decides what a watch is sent by the rules go-control-plane's
// watches are answered by (the type's rules: answer, changes), so both
// servers send a stream the same; it writes what it sent into the watch's
// subscription, as go-control-plane's server does when it sends.
//
// Each response body is encoded once (wire.Response) and shared by every
// watch Respond gives it to until the next Update: the bodies are
// memoized by the exact forms they carry (one entry pointer per resource
// and form, in name order) and the names they remove.

var _ ads.Source = (*Resources)(nil)

// sourceWatch is the cache's own state of an ads.Watch (its Private).
type sourceWatch struct {
	view
	woken uint64 // the update that last collected it
}

// Watch implements ads.Source.
func (c *Resources) Watch(w *ads.Watch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sw, _ := w.Private.(*sourceWatch)
	if sw == nil {
		sw = &sourceWatch{view: c.viewOf(w.Node)}
		w.Private = sw
	}
	if w.Sub.IsWildcard() {
		c.adsWildcard[w] = struct{}{}
		return
	}
	for name := range w.Sub.SubscribedResources() {
		ws := c.adsWatches[name]
		if ws == nil {
			ws = make(map[*ads.Watch]struct{})
			c.adsWatches[name] = ws
		}
		ws[w] = struct{}{}
	}
}

// Unwatch implements ads.Source.
func (c *Resources) Unwatch(w *ads.Watch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.Sub.IsWildcard() {
		delete(c.adsWildcard, w)
		return
	}
	for name := range w.Sub.SubscribedResources() {
		if ws := c.adsWatches[name]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(c.adsWatches, name)
			}
		}
	}
}

// adsWoken returns the ads watches an update of names wakes, once each.
// Call with mu held, after c.version was raised.
func (c *Resources) adsWoken(names []string) []*ads.Watch {
	var woken []*ads.Watch
	for _, name := range names {
		for w := range c.adsWatches[name] {
			if sw := w.Private.(*sourceWatch); sw.woken != c.version {
				sw.woken = c.version
				woken = append(woken, w)
			}
		}
	}
	for w := range c.adsWildcard {
		woken = append(woken, w)
	}
	return woken
}

// Respond implements ads.Source.
func (c *Resources) Respond(w *ads.Watch, force bool) (*wire.Response, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sw := w.Private.(*sourceWatch)
	sub := &w.Sub
	changed, removed := c.changes(sub, &sw.view, w.Delta, c.changed[:0], c.removed[:0])
	c.changed, c.removed = changed[:0], removed[:0]
	if len(changed)+len(removed) == 0 && !force {
		return nil, ""
	}
	send := changed
	if !w.Delta {
		switch {
		case !c.fullState:
			if len(changed) == 0 && !force {
				return nil, ""
			}
		case sub.IsWildcard():
			send = c.names()
		default:
			send = send[:0]
			for name := range sub.SubscribedResources() {
				if _, ok := c.resources[name]; ok {
					send = append(send, name)
				}
			}
		}
	}
	if len(send) > 1 && (w.Delta || !sub.IsWildcard()) {
		slices.Sort(send)
	}
	known := sub.ReturnedResources()
	if known == nil {
		known = make(map[string]string, len(send))
		sub.SetReturnedResources(known)
	}
	for _, name := range removed {
		delete(known, name)
	}
	c.noteSubstitutions(w.Node, sw.profile, send)

	// The forms sent, and the body's memo key: their entries' addresses
	// and the removed names.
	entries := c.scratch[:0]
	key := c.keyBuf[:0]
	if w.Delta {
		key = append(key, 'd')
	} else {
		key = append(key, 's')
	}
	for _, name := range send {
		e := c.entryFor(name, c.resources[name], &sw.view)
		entries = append(entries, e)
		p := uintptr(unsafe.Pointer(e))
		key = append(key, byte(p), byte(p>>8), byte(p>>16), byte(p>>24), byte(p>>32), byte(p>>40), byte(p>>48), byte(p>>56))
	}
	if w.Delta {
		slices.Sort(removed)
		for _, name := range removed {
			key = append(key, 0)
			key = append(key, name...)
		}
	}
	c.scratch, c.keyBuf = entries[:0], key[:0]

	body, ok := c.bodies[string(key)]
	if w.Delta {
		if !ok {
			rs := make([]wire.DeltaResource, len(send))
			for i, name := range send {
				r := c.deltaResource(name, entries[i])
				rs[i] = wire.DeltaResource{Name: name, Version: r.Version, Value: entries[i].bytesOf()}
			}
			body = wire.DeltaResponse(c.versionS, c.typeURL, rs, removed)
			c.bodies[string(key)] = body
		}
		for i, name := range send {
			known[name] = c.deltaResource(name, entries[i]).Version
		}
		return body, c.versionS
	}
	if !ok {
		values := make([][]byte, len(send))
		for i := range send {
			values[i] = entries[i].bytesOf()
		}
		body = wire.SotWResponse(c.versionS, c.typeURL, values)
		c.bodies[string(key)] = body
	}
	for i, name := range send {
		known[name] = *entries[i].version
	}
	return body, c.versionS
}

// names returns the names the cache holds, sorted, shared until the next
// Update (do not change it). Call with mu held.
func (c *Resources) names() []string {
	if c.sorted == nil {
		c.sorted = make([]string, 0, len(c.resources))
		for name := range c.resources {
			c.sorted = append(c.sorted, name)
		}
		slices.Sort(c.sorted)
	}
	return c.sorted
}

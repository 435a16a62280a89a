package xds

import (
	"bytes"
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
)

// resourceSet is one resourceCache plus the content last handed to it. Only
// resources that differ from that content are handed over, so each resource
// keeps its own version and a push wakes only the streams watching a resource
// that really changed (the cache versions resources individually and
// answers only the watches of the names it is given). Not safe for concurrent
// use: only the push path, under DiscoveryServer.pushMu, touches it.
type resourceSet struct {
	cache *resourceCache
	last  map[string]types.Resource
	// typeURL is the cache's type; version counts the cache's updates,
	// which is the cache's version (the version_info of its responses)
	// since nothing else updates it.
	typeURL string
	version uint64
	// observe, when set, is told of each update before the cache gets it:
	// the type, the version before it, and the names it updates and
	// removes (the convergence stages, convergence.go).
	observe func(typeURL string, before uint64, update map[string]types.Resource, remove []string)
}

func newResourceSet(cache *resourceCache) *resourceSet {
	return &resourceSet{cache: cache, last: make(map[string]types.Resource)}
}

// apply hands the resources of want that differ from the last content to the
// cache, and removes the names in remove. It returns how many resources
// changed.
func (r *resourceSet) apply(want map[string]types.Resource, remove []string) (int, error) {
	update := make(map[string]types.Resource)
	for name, res := range want {
		if old, ok := r.last[name]; ok && sameResource(old, res) {
			continue
		}
		update[name] = res
	}
	var del []string
	for _, name := range remove {
		if _, ok := r.last[name]; ok {
			if _, kept := want[name]; !kept {
				del = append(del, name)
			}
		}
	}
	if len(update)+len(del) == 0 {
		return 0, nil
	}
	if r.observe != nil {
		r.observe(r.typeURL, r.version, update, del)
	}
	// update raises the cache's version even when it fails.
	r.version++
	if err := r.cache.update(update, del); err != nil {
		return 0, fmt.Errorf("update %d and delete %d resources: %w", len(update), len(del), err)
	}
	for name, res := range update {
		r.last[name] = res
	}
	for _, name := range del {
		delete(r.last, name)
	}
	return len(update) + len(del), nil
}

// replace makes want the complete content: changed resources are handed over
// and names absent from want are removed.
func (r *resourceSet) replace(want map[string]types.Resource) (int, error) {
	var remove []string
	for name := range r.last {
		if _, ok := want[name]; !ok {
			remove = append(remove, name)
		}
	}
	return r.apply(want, remove)
}

// has reports whether name was handed to the cache and not removed.
func (r *resourceSet) has(name string) bool {
	_, ok := r.last[name]
	return ok
}

// names returns every name currently in the cache.
func (r *resourceSet) names() []string {
	out := make([]string, 0, len(r.last))
	for name := range r.last {
		out = append(out, name)
	}
	return out
}

// sameResource reports whether a and b are equal messages. Pre-encoded
// resources compare by their encodings, which are equal exactly when the
// messages are (encodedMessage); anything else by proto.Equal. One
// resource is equal to itself.
func sameResource(a, b types.Resource) bool {
	if a == b {
		return true
	}
	ea, ok := a.(interface{ encoded() []byte })
	if eb, ok2 := b.(interface{ encoded() []byte }); ok && ok2 {
		return bytes.Equal(ea.encoded(), eb.encoded())
	}
	return proto.Equal(a, b)
}

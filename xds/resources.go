package xds

import (
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshbridge/meshbridge/xds/cache"
)

// resourceSet is one cache.Resources and the push path's view of it. Only
// resources whose encoding differs from the cache's are handed over, so each
// resource keeps its own version and a push wakes only the streams watching
// a resource that really changed (the cache versions resources individually
// and answers only the watches of the names it is given). The cache's
// encodings are the only record of what was handed over. Not safe for
// concurrent use: only the push path, under DiscoveryServer.pushMu, touches
// it.
type resourceSet struct {
	cache *cache.Resources
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

func newResourceSet(c *cache.Resources) *resourceSet {
	return &resourceSet{cache: c}
}

// apply hands the resources of want whose encoding differs from the cache's
// to the cache, and removes the names in remove that it holds and want does
// not. It returns how many resources changed.
func (r *resourceSet) apply(want map[string]types.Resource, remove []string) (int, error) {
	update, del := r.cache.Differences(want, remove)
	if len(update)+len(del) == 0 {
		return 0, nil
	}
	if r.observe != nil {
		r.observe(r.typeURL, r.version, update, del)
	}
	// update raises the cache's version even when it fails.
	r.version++
	if err := r.cache.Update(update, del); err != nil {
		return 0, fmt.Errorf("update %d and delete %d resources: %w", len(update), len(del), err)
	}
	return len(update) + len(del), nil
}

// replace makes want the complete content: changed resources are handed over
// and names absent from want are removed.
func (r *resourceSet) replace(want map[string]types.Resource) (int, error) {
	return r.apply(want, r.cache.Absent(want))
}

// has reports whether the cache holds name.
func (r *resourceSet) has(name string) bool { return r.cache.Has(name) }

// names returns every name the cache holds.
func (r *resourceSet) names() []string { return r.cache.Names() }

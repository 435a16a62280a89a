package consul

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// fakeFaultyCatalogProxy is a fake for faults a real server
// produces only by chance, in front of the real agent. Once armed, it
// rewrites the next default-mode answer of /v1/catalog/services into what a
// server restarted with its data answers before it has applied its whole
// log (hashicorp/consul#2644): an X-Consul-Index lower than the one before,
// and the service Drop missing. Consistent reads (?consistent) pass through,
// and are counted. Once armed by FailNext, it answers the next catalog
// request with a 500 instead (the catalog alone failing, as a 429 of
// limits.http_max_conns_per_client can).
type fakeFaultyCatalogProxy struct {
	*httptest.Server
	Drop string

	mu         sync.Mutex
	armed      bool
	failNext   bool
	rewritten  int
	consistent int
}

func (p *fakeFaultyCatalogProxy) FailNext() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = true
}

func newFakeFaultyCatalogProxy(t *testing.T, agent, drop string) *fakeFaultyCatalogProxy {
	t.Helper()
	target, err := url.Parse("http://" + agent)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeFaultyCatalogProxy{Drop: drop}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = p.modify
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

func (p *fakeFaultyCatalogProxy) Address() string { return p.Listener.Addr().String() }

func (p *fakeFaultyCatalogProxy) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

func (p *fakeFaultyCatalogProxy) counts() (rewritten, consistent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rewritten, p.consistent
}

func (p *fakeFaultyCatalogProxy) modify(resp *http.Response) error {
	r := resp.Request
	if r.URL.Path != "/v1/catalog/services" || resp.StatusCode != http.StatusOK {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failNext {
		p.failNext = false
		resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
		resp.Body = io.NopCloser(bytes.NewReader([]byte("injected")))
		resp.ContentLength = int64(len("injected"))
		resp.Header.Set("Content-Length", strconv.Itoa(len("injected")))
		return nil
	}
	if _, ok := r.URL.Query()["consistent"]; ok {
		p.consistent++
		return nil
	}
	if !p.armed {
		return nil
	}
	p.armed = false
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var names map[string][]string
	if err := json.Unmarshal(body, &names); err != nil {
		return err
	}
	delete(names, p.Drop)
	if body, err = json.Marshal(names); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("X-Consul-Index", "1")
	p.rewritten++
	return nil
}

// TestIndexGoneBackwardsIsConfirmedByAConsistentRead: a catalog answer
// whose index went backwards, from a server that has not applied its whole
// log yet (a service missing), is not applied: the loop reads again with a
// consistent read and applies that, so the service is never removed.
// Applied as it came, the stale answer removed the service (marked Relist,
// and held down by the Syncer, but still a removal the registry never made).
func TestIndexGoneBackwardsIsConfirmedByAConsistentRead(t *testing.T) {
	c := harness.StartConsul(t)
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	registerPassing(t, c, "api", "api-1", "10.0.0.3", 8080)
	proxy := newFakeFaultyCatalogProxy(t, c.Address(), "api")
	_, rec := runRegistry(t, Config{Address: proxy.Address(), MaxWatches: 5})
	rec.Eventually(t, "Synced with web and api", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 1 && len(st.IDs("api")) == 1
	})

	// The catalog's next answer is the stale one; a new service makes it come.
	proxy.Arm()
	registerPassing(t, c, "orders", "orders-1", "10.0.0.5", 9090)
	rec.Eventually(t, "orders listed and read", func(st registrytest.State) bool {
		return len(st.IDs("orders")) == 1
	})
	for _, s := range rec.Snapshots() {
		if s.Removed || (s.Err == nil && s.Service.Name != "" && len(s.Service.Instances) == 0) {
			t.Errorf("service %q removed or emptied by a stale answer: %+v", s.Service.Name, s)
		}
	}
	if got := rec.State().IDs("api"); len(got) != 1 {
		t.Errorf("api's instances: %v, want its one", got)
	}
	if rewritten, consistent := proxy.counts(); rewritten != 1 || consistent < 1 {
		t.Errorf("stale answers served: %d, consistent reads: %d; want 1 and at least 1", rewritten, consistent)
	}
}

// TestCatalogRecoveryRelists: when the catalog listing alone fails (one
// registry-wide error) and answers again with its index unmoved, the loop
// lists again, so the Reporter's failure run ends and the Sink hears a
// complete listing (which ends the registry-wide error in the Syncer).
// Handling a moved index only, the catalog loop sent nothing: the registry
// stayed stale until the catalog next changed.
func TestCatalogRecoveryRelists(t *testing.T) {
	c := harness.StartConsul(t)
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	proxy := newFakeFaultyCatalogProxy(t, c.Address(), "")
	// Blocking queries of 1 s: the catalog asks again within a second
	// with nothing changed.
	_, rec := runRegistry(t, Config{Address: proxy.Address(), MaxWatches: 5, WaitTime: time.Second})
	rec.Eventually(t, "Synced with web", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 1
	})
	// The catalog's next request fails; it is retried with the index
	// unmoved.
	proxy.FailNext()
	var failedAt int
	rec.Eventually(t, "a registry-wide error", func(st registrytest.State) bool {
		for _, s := range st.All {
			if s.Err != nil && s.Service.Name == "" {
				failedAt = len(st.Listings)
				return true
			}
		}
		return false
	})
	rec.Eventually(t, "a listing after the registry-wide error", func(st registrytest.State) bool {
		return len(st.Listings) > failedAt
	})
}

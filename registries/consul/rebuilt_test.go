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

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// staleCatalogAfterRestartProxy is a fake for a fault a real server
// produces only by chance: in front of the real agent, once armed, it
// rewrites the next default-mode answer of /v1/catalog/services into what a
// server restarted with its data answers before it has applied its whole
// log (hashicorp/consul#2644): an X-Consul-Index lower than the one before,
// and the service Drop missing. Consistent reads (?consistent) pass through,
// and are counted.
type staleCatalogAfterRestartProxy struct {
	*httptest.Server
	Drop string

	mu         sync.Mutex
	armed      bool
	rewritten  int
	consistent int
}

func newStaleCatalogAfterRestartProxy(t *testing.T, agent, drop string) *staleCatalogAfterRestartProxy {
	t.Helper()
	target, err := url.Parse("http://" + agent)
	if err != nil {
		t.Fatal(err)
	}
	p := &staleCatalogAfterRestartProxy{Drop: drop}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = p.modify
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

func (p *staleCatalogAfterRestartProxy) Address() string { return p.Listener.Addr().String() }

func (p *staleCatalogAfterRestartProxy) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

func (p *staleCatalogAfterRestartProxy) counts() (rewritten, consistent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rewritten, p.consistent
}

func (p *staleCatalogAfterRestartProxy) modify(resp *http.Response) error {
	r := resp.Request
	if r.URL.Path != "/v1/catalog/services" || resp.StatusCode != http.StatusOK {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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
	proxy := newStaleCatalogAfterRestartProxy(t, c.Address(), "api")
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

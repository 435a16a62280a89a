package consul

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// heldRequestProxy is a reverse proxy in front of the real agent that,
// once armed, holds the first request matching a rule twice: before
// forwarding it (until Forward) and before answering it (until Deliver);
// and that delays the answers Delay picks. It produces on demand what a
// real agent produces only by chance: a change between a trigger (a
// state/any answer) and the read it prompts, and another before that
// read's answer arrives; answers slower than the changes that follow them.
type heldRequestProxy struct {
	*httptest.Server
	rp *httputil.ReverseProxy
	// Delay, when set before requests come, is how long to hold the answer
	// to a request.
	Delay func(*http.Request) time.Duration

	mu    sync.Mutex
	match func(*http.Request) bool // nil: nothing held
	// Arrived is closed when the held request arrives, Fetched when the
	// agent's answer to it is in; Forward and Deliver release it.
	Arrived, Fetched, Forward, Deliver chan struct{}
}

func newHeldRequestProxy(t *testing.T, agent string) *heldRequestProxy {
	t.Helper()
	target, err := url.Parse("http://" + agent)
	if err != nil {
		t.Fatal(err)
	}
	p := &heldRequestProxy{rp: httputil.NewSingleHostReverseProxy(target)}
	p.Server = httptest.NewServer(p)
	t.Cleanup(p.Close)
	return p
}

// Address is the proxy's host:port, for Config.Address.
func (p *heldRequestProxy) Address() string { return p.Listener.Addr().String() }

// Arm holds the next request match accepts.
func (p *heldRequestProxy) Arm(match func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = match
	p.Arrived, p.Fetched = make(chan struct{}), make(chan struct{})
	p.Forward, p.Deliver = make(chan struct{}), make(chan struct{})
}

func (p *heldRequestProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	held := p.match != nil && p.match(r)
	if held {
		p.match = nil
	}
	arrived, fetched, forward, deliver := p.Arrived, p.Fetched, p.Forward, p.Deliver
	p.mu.Unlock()
	if !held {
		d := time.Duration(0)
		if p.Delay != nil {
			d = p.Delay(r)
		}
		if d == 0 {
			p.rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		copyResponse(w, rec)
		return
	}
	close(arrived)
	<-forward
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	close(fetched)
	<-deliver
	copyResponse(w, rec)
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// TestChangeUndoneBetweenRereadAndNextAnswerIsSeen: a polled service's
// instance is deregistered (state/any answers, the service is re-read), is
// registered again before the re-read reaches the agent (the re-read finds
// it) and deregistered again before the re-read's answer arrives. The
// next state/any answer then equals the one that prompted the re-read; the
// re-read's own checks are the baseline (doc.go rule 4), so the service is
// read once more and the instance leaves. With the prompting answer as the
// baseline it stayed until the service's checks next changed.
func TestChangeUndoneBetweenRereadAndNextAnswerIsSeen(t *testing.T) {
	c := harness.StartConsul(t)
	node := c.Node()
	registerPassing(t, c, "aaa", "aaa-1", "10.0.0.1", 80) // the one watched service
	registerPassing(t, c, "web", "web-1", "10.0.1.1", 80) // polled: followed through state/any
	registerPassing(t, c, "web", "web-2", "10.0.1.2", 80)
	proxy := newHeldRequestProxy(t, c.Address())
	_, rec := runRegistry(t, Config{Address: proxy.Address(), MaxWatches: 1})
	both := []string{node + "/web-1", node + "/web-2"}
	rec.Eventually(t, "Synced with web's two instances", func(st registrytest.State) bool {
		return st.Synced == 1 && slices.Equal(st.IDs("web"), both)
	})

	// The re-read of web: a non-blocking health query (no index).
	proxy.Arm(func(r *http.Request) bool {
		return r.URL.Path == "/v1/health/service/web" && r.URL.Query().Get("index") == ""
	})
	c.Deregister(t, "web-2")
	registrytest.WaitClosed(t, proxy.Arrived, "the re-read of web the deregistration prompts")
	registerPassing(t, c, "web", "web-2", "10.0.1.2", 80)
	close(proxy.Forward)
	registrytest.WaitClosed(t, proxy.Fetched, "the agent's answer to the re-read (web-2 registered again)")
	c.Deregister(t, "web-2")
	close(proxy.Deliver)

	rec.Eventually(t, "web-2 gone", func(st registrytest.State) bool {
		return slices.Equal(st.IDs("web"), []string{node + "/web-1"})
	})
}

// TestSlowStateAnyAnswersUnderCatalogChurn: state/any answers take 300 ms
// (a delaying proxy) while the catalog changes every 50 ms (a service
// registered and deregistered); a check change of a polled service is
// still seen: a catalog change does not cancel the state/any query
// (doc.go rule 4). When it did, every answer was cancelled before it
// arrived, for as long as the churn lasted.
func TestSlowStateAnyAnswersUnderCatalogChurn(t *testing.T) {
	c := harness.StartConsul(t)
	registerPassing(t, c, "aaa", "aaa-1", "10.0.0.1", 80)
	registerPassing(t, c, "web", "web-1", "10.0.1.1", 80)
	proxy := newHeldRequestProxy(t, c.Address())
	proxy.Delay = func(r *http.Request) time.Duration {
		if r.URL.Path == "/v1/health/state/any" {
			return 300 * time.Millisecond // slower than the churn: a scenario parameter
		}
		return 0
	}
	_, rec := runRegistry(t, Config{Address: proxy.Address(), MaxWatches: 1})
	rec.Eventually(t, "Synced with web", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.IDs("web")) == 1
	})
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		agent := c.Client().Agent()
		reg := &api.AgentServiceRegistration{Name: "churn", ID: "churn-1", Address: "10.0.9.1", Port: 80}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond): // the churn's pace: a scenario parameter
			}
			if i%2 == 1 {
				_ = agent.ServiceDeregister(reg.ID)
			} else {
				_ = agent.ServiceRegister(reg)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-churned })
	c.SetCheck(t, harness.CheckID("web-1"), api.HealthCritical)
	rec.Eventually(t, "web's instance critical, so gone, while the catalog churns", func(st registrytest.State) bool {
		list, ok := st.Good["web"]
		return ok && len(list) == 0
	})
}

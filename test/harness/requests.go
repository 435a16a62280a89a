package harness

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	versioned "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// RequestCounter counts the requests Kubernetes clients send, by HTTP
// method. Its methods are safe for concurrent use; the zero value counts
// nothing yet.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Config returns a copy of cfg whose clients' requests c counts.
func (c *RequestCounter) Config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[r.Method]++
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// IstioClients are an istio.io/client-go clientset and a metadata client
// for cfg, whose requests c counts: the clients kube.Writer takes.
func (c *RequestCounter) IstioClients(t testing.TB, cfg *rest.Config) (versioned.Interface, metadata.Interface) {
	t.Helper()
	cfg = c.Config(cfg)
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, md
}

// Count is the number of requests of method sent so far.
func (c *RequestCounter) Count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method]
}

// Writes is the number of requests that change something: POST, PUT,
// PATCH (server-side apply's creates and updates alike) and DELETE.
func (c *RequestCounter) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[http.MethodPost] + c.counts[http.MethodPut] + c.counts[http.MethodPatch] + c.counts[http.MethodDelete]
}

// String lists the counts by method.
func (c *RequestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.counts)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

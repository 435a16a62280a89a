package eureka

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// REST paths, relative to a server's base URL.
const (
	pathApps  = "apps/"
	pathDelta = "apps/delta"
)

// Error reasons (meshbridge_registry_errors_total): what a failed read
// says. Low-cardinality on purpose.
const (
	reasonUnavailable = "unavailable" // refused, reset, 5xx, 429
	reasonForbidden   = "forbidden"   // 401 and 403
	reasonDecode      = "decode"      // an answer that is not Eureka's JSON
	reasonTLS         = "tls"         // a certificate refused
)

// client reads the servers (doc.go rule 6): one at a time, the one that
// answered last first, the next one on an error or a hang.
type client struct {
	servers  []*url.URL
	http     *http.Client
	username string
	password string
	timeout  time.Duration
	current  int // the server that answered last
}

// newClient returns the client of c's servers. The password is sent in the
// Authorization header only.
func newClient(c Config, tlsCfg *tls.Config, password string) *client {
	servers := make([]*url.URL, 0, len(c.Servers))
	for _, s := range c.Servers {
		u, _ := parseServer(s) // validated
		servers = append(servers, u)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: c.RequestTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   c.RequestTimeout,
		ResponseHeaderTimeout: c.RequestTimeout,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &client{servers: servers, http: &http.Client{Transport: tr}, username: c.Username, password: password, timeout: c.RequestTimeout}
}

// serverError is a server's failed answer, naming the server.
type serverError struct {
	server string // the base URL, which holds no credentials
	index  int    // in client.servers
	err    error
}

func (e *serverError) Error() string { return e.server + ": " + e.err.Error() }
func (e *serverError) Unwrap() error { return e.err }

// statusError is an answer other than 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("HTTP %d", e.code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.code, e.body)
}

// get reads rel from the servers, from the current one on: the first
// answer wins and its server becomes the current one. It returns the body,
// the index of the server that answered, and the errors of those that did
// not (failed, each a *serverError), in the order tried; err is their
// errors.Join when none answered.
func (c *client) get(ctx context.Context, rel string) (body []byte, server int, failed []error, err error) {
	for i := range c.servers {
		idx := (c.current + i) % len(c.servers)
		body, err := c.getFrom(ctx, c.servers[idx], rel)
		if err == nil {
			c.current = idx
			return body, idx, failed, nil
		}
		if ctx.Err() != nil {
			return nil, -1, failed, ctx.Err()
		}
		failed = append(failed, &serverError{server: c.servers[idx].String(), index: idx, err: err})
	}
	return nil, -1, failed, errors.Join(failed...)
}

// getFrom sends one GET of rel to server. A server silent for the
// client's timeout — before its answer's headers (the transport's
// ResponseHeaderTimeout) or between two reads of its body — fails with
// registries.ErrHung.
func (c *client) getFrom(ctx context.Context, server *url.URL, rel string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var silent atomic.Bool
	watchdog := time.AfterFunc(c.timeout, func() { silent.Store(true); cancel() })
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.JoinPath(rel).String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.username != "" {
		req.SetBasicAuth(c.username, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, hung(err, silent.Load())
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		watchdog.Reset(c.timeout)
		n, rerr := resp.Body.Read(chunk)
		buf.Write(chunk[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, hung(rerr, silent.Load())
		}
	}
	if resp.StatusCode != http.StatusOK {
		body := buf.String()
		if len(body) > 200 {
			body = body[:200] + "..."
		}
		return nil, &statusError{code: resp.StatusCode, body: body}
	}
	return buf.Bytes(), nil
}

// hung wraps registries.ErrHung into err when the server was silent past
// the timeout (the watchdog cancelled the request, or the transport's
// header timeout fired).
func hung(err error, silent bool) error {
	var ne net.Error
	if silent || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", registries.ErrHung, err)
	}
	return err
}

// errorReason names a failed read for meshbridge_registry_errors_total.
func errorReason(err error) string {
	var se *statusError
	var ce *tls.CertificateVerificationError
	switch {
	case errors.Is(err, registries.ErrHung):
		return registries.ReasonHung
	case errors.As(err, &se) && (se.code == http.StatusUnauthorized || se.code == http.StatusForbidden):
		return reasonForbidden
	case errors.As(err, &ce):
		return reasonTLS
	case errors.Is(err, errDecode):
		return reasonDecode
	}
	return reasonUnavailable
}

// errDecode marks an answer that is not Eureka's JSON.
var errDecode = errors.New("the answer is not a Eureka registry")

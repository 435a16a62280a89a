package nacos

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/http_agent"

	"github.com/meshbridge/meshbridge/registries"
)

// httpTimeout bounds each HTTP request to Nacos: the login (nacos-sdk-go's
// auth client) and the server-version probe.
const httpTimeout = 10 * time.Second

// loginPath is where nacos-sdk-go v2.3.5 logs in, below the context path
// (security.NacosAuthClient.login).
const loginPath = "/v1/auth/users/login"

// httpAgent is the HTTP client nacos-sdk-go uses for the login. It replaces
// the SDK's http_agent.HttpAgent, which builds a new client (and, with TLS,
// a new transport) per request and, without a CA file, skips verifying the
// server's certificate (common/tls.NewTLS sets InsecureSkipVerify). It
// verifies against the system roots plus tls.caFile, reuses connections, and
// records the outcome of every login the SDK attempts (the SDK only logs a
// refused login), so that a wrong password shows in Health and Status, and
// the access tokens it returns, which the SDK prints with every request it
// logs, so that they are redacted.
type httpAgent struct {
	client *http.Client
	user   string

	mu       sync.Mutex
	loginErr error    // the last login's refusal; nil after a success or before any
	loginSet bool     // a login got an answer
	tokens   []string // the last access tokens logins returned, to redact
}

// maxTokens is how many past access tokens are kept for redaction: the SDK
// may still print a request signed with the previous one.
const maxTokens = 4

var _ http_agent.IHttpAgent = (*httpAgent)(nil)

func newHTTPAgent(tlsCfg *tls.Config, user string) *httpAgent {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg.Clone()
	}
	return &httpAgent{client: &http.Client{Transport: tr, Timeout: httpTimeout}, user: user}
}

// secrets returns the access tokens logins returned, for redaction.
func (a *httpAgent) secrets() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.tokens)
}

// login returns the last login's refusal (nil when it succeeded) and
// whether any login got an answer.
func (a *httpAgent) login() (error, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.loginErr, a.loginSet
}

func (a *httpAgent) Get(u string, h http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	return a.Request(http.MethodGet, u, h, timeoutMs, params)
}

func (a *httpAgent) Post(u string, h http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	return a.Request(http.MethodPost, u, h, timeoutMs, params)
}

func (a *httpAgent) Delete(u string, h http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	return a.Request(http.MethodDelete, u, h, timeoutMs, params)
}

func (a *httpAgent) Put(u string, h http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	return a.Request(http.MethodPut, u, h, timeoutMs, params)
}

// RequestOnlyResult returns the body of a 200 answer, else "" (the SDK's
// contract for this method).
func (a *httpAgent) RequestOnlyResult(method, u string, h http.Header, timeoutMs uint64, params map[string]string) string {
	resp, err := a.Request(method, u, h, timeoutMs, params)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// Request sends params as the query (GET, DELETE) or as a form body (POST,
// PUT), like the SDK's agent. timeoutMs is ignored: the client's timeout
// applies.
func (a *httpAgent) Request(method, u string, h http.Header, _ uint64, params map[string]string) (*http.Response, error) {
	form := url.Values{}
	for k, v := range params {
		form.Set(k, v)
	}
	var body io.Reader
	switch method {
	case http.MethodGet, http.MethodDelete:
		if len(form) > 0 {
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			u += sep + form.Encode()
		}
	case http.MethodPost, http.MethodPut:
		body = strings.NewReader(form.Encode())
	default:
		return nil, fmt.Errorf("HTTP method %q not supported", method)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	if method == http.MethodPost && strings.HasSuffix(req.URL.Path, loginPath) {
		a.observeLogin(req.URL, resp)
	}
	return resp, nil
}

// maxLoginBody bounds how much of a login answer is kept for the error.
const maxLoginBody = 64 << 10

// observeLogin records a login answer, leaving the body readable for the
// SDK. A refusal is registries.Permanent unless the server failed (5xx,
// 429): a wrong password, an unknown user or a missing login endpoint (404:
// a wrong contextPath, or Polaris, which serves the login without the
// /nacos prefix) need an operator.
func (a *httpAgent) observeLogin(u *url.URL, resp *http.Response) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxLoginBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var err error
	var token string
	if resp.StatusCode == http.StatusOK {
		var answer struct {
			AccessToken string `json:"accessToken"`
		}
		if json.Unmarshal(b, &answer) == nil {
			token = answer.AccessToken
		}
	} else {
		where := *u
		where.RawQuery = ""
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		err = fmt.Errorf("Nacos login as user %q at %s refused: %s: %s", a.user, where.String(), resp.Status, msg)
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w (no login endpoint at this path: check contextPath)", err)
		}
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			err = registries.Permanent(err)
		}
	}
	a.mu.Lock()
	a.loginErr, a.loginSet = err, true
	if token != "" && !slices.Contains(a.tokens, token) {
		a.tokens = append(a.tokens, token)
		if len(a.tokens) > maxTokens {
			a.tokens = a.tokens[1:]
		}
	}
	a.mu.Unlock()
}

// errNacos1 marks a server that answers the Nacos 1.x HTTP API only.
var errNacos1 = errors.New("Nacos 1.x has no gRPC API")

// probeVersion reads the server's version from its HTTP API
// (GET <contextPath>/v1/console/server/state, Nacos 1.4 and 2.x), for a
// clear error when the gRPC port does not answer.
func (a *httpAgent) probeVersion(ctx context.Context, baseURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/console/server/state", nil)
	if err != nil {
		return "", err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("server state: %s", resp.Status)
	}
	var st struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxLoginBody)).Decode(&st); err != nil {
		return "", fmt.Errorf("server state: %v", err)
	}
	return st.Version, nil
}

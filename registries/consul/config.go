package consul

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/time/rate"

	"github.com/meshbridge/meshbridge/registries"
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultAddress    = "127.0.0.1:8500"
	DefaultMaxWatches = 100
	DefaultWaitTime   = 5 * time.Minute
	DefaultRateLimit  = rate.Limit(10)
	DefaultBurst      = 10

	// maxMaxWatches keeps MaxWatches+12 connections (the catalog and
	// state/any queries, the re-read workers) below the agent's
	// limits.http_max_conns_per_client (200).
	maxMaxWatches = 190
	// maxWaitTime is Consul's own cap on a blocking query's wait.
	maxWaitTime = 10 * time.Minute
	// rereadWorkers bounds the non-blocking health reads the state/any loop
	// runs at once; with the catalog and state queries they are the
	// connections on top of MaxWatches.
	rereadWorkers = 8
)

// TLSConfig configures HTTPS to the Consul agent. Any field set (here or
// through its environment fallback, see Config) makes the connection HTTPS.
// New reads the files once; a changed file takes effect when the registry is
// created again.
type TLSConfig struct {
	// CAFile is a PEM bundle of the CAs that verify the agent's certificate;
	// empty means the system roots.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are the PEM client certificate and its key, sent
	// to an agent with tls.https.verify_incoming; set both or neither.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// ServerName is the name verified in the agent's certificate (and sent
	// as SNI); empty means the address's host.
	ServerName string `json:"serverName,omitempty"`
	// InsecureSkipVerify accepts any agent certificate, so the ACL token goes
	// to whoever answers: for tests, never in production.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// Config configures one Consul registry. Zero values take the defaults above.
//
// Connection settings follow Consul's own CLI: each empty field falls back to
// the environment variable the consul command reads, and a set field wins:
//
//	Address                  CONSUL_HTTP_ADDR, else DefaultAddress
//	Token / TokenFile        CONSUL_HTTP_TOKEN / CONSUL_HTTP_TOKEN_FILE (when both are empty)
//	TLS.CAFile               CONSUL_CACERT
//	TLS.CertFile, KeyFile    CONSUL_CLIENT_CERT, CONSUL_CLIENT_KEY (as a pair, when both are empty)
//	TLS.ServerName           CONSUL_TLS_SERVER_NAME
//	TLS.InsecureSkipVerify   CONSUL_HTTP_SSL_VERIFY=false
//
// CONSUL_CAPATH is not read. The scheme is, in order: the address's own
// ("http://" or "https://"); else CONSUL_HTTP_SSL when set; else https when
// any TLS setting is set, from a field or the environment; else http. Plain
// HTTP together with a TLS setting is an error naming both, so the token
// never travels in cleartext by mistake; so is an "http://" address with
// CONSUL_HTTP_SSL=true. Boolean variables take strconv.ParseBool's values.
type Config struct {
	// Name is the registry name, a DNS-1123 label.
	Name string
	// Address is host:port or an http(s) URL (see the precedence above).
	Address string
	// Datacenter is the datacenter to read; "" is the agent's. A datacenter
	// other than the agent's own is set as Service.Datacenter on every
	// snapshot, so hosts become <svc>.service.<dc>.consul.
	Datacenter string
	// Token or TokenFile is the ACL token (service:read, node:read,
	// agent:read); when both are empty, $CONSUL_HTTP_TOKEN(_FILE). Never
	// logged.
	Token     string
	TokenFile string
	TLS       TLSConfig
	// HealthyOnly true emits passing instances only; false also warning
	// ones. Critical and maintenance instances are never emitted.
	HealthyOnly bool
	// Services is an allow-list of path.Match globs on the service name.
	// Empty means every service except Consul's own "consul" service.
	// Non-typical kinds (connect-proxy, gateways) are never read.
	Services []string
	// MaxWatches is how many services get their own blocking query (the
	// first MaxWatches by name); the rest are followed through one blocking
	// query on /v1/health/state/any. Keep MaxWatches+12 below the agent's
	// limits.http_max_conns_per_client (200 by default).
	MaxWatches int
	// WaitTime is the blocking queries' wait, at most 10m.
	WaitTime time.Duration
	// RateLimit and Burst shape each loop's token bucket: every blocking
	// query loop (catalog, each service, state/any) waits for a token.
	RateLimit rate.Limit
	Burst     int
	Logger    *slog.Logger
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults(getenv func(string) string) Config {
	if c.Address == "" {
		c.Address = getenv(api.HTTPAddrEnvName)
	}
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if c.MaxWatches == 0 {
		c.MaxWatches = DefaultMaxWatches
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	if c.RateLimit == 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports every invalid field by name; the address and TLS settings
// are resolveEndpoint's.
//
// Each error is a *registries.FieldError naming the configuration block's
// key ("maxWatches: 500 is outside 1-190"), so the command can prefix the
// block's path.
func (c Config) validate() error {
	var errs []error
	if !labelRE.MatchString(c.Name) || len(c.Name) > 63 {
		errs = append(errs, registries.Invalid("name", "%q must be a DNS-1123 label", c.Name))
	}
	if c.Token != "" && c.TokenFile != "" {
		errs = append(errs, registries.Invalid("tokenFile", "set either token or tokenFile, not both"))
	}
	for i, g := range c.Services {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			errs = append(errs, registries.Invalid(fmt.Sprintf("services[%d]", i), "%q is not a valid glob", g))
		}
	}
	if c.MaxWatches < 1 || c.MaxWatches > maxMaxWatches {
		errs = append(errs, registries.Invalid("maxWatches", "%d is outside 1-%d (a Consul agent allows 200 connections per client)", c.MaxWatches, maxMaxWatches))
	}
	if c.WaitTime < 0 || c.WaitTime > maxWaitTime {
		errs = append(errs, registries.Invalid("waitTime", "%s is outside 0-%s", c.WaitTime, maxWaitTime))
	}
	if c.RateLimit < 0 {
		errs = append(errs, registries.Invalid("rateLimit", "%v must not be negative", c.RateLimit))
	}
	if c.Burst < 0 {
		errs = append(errs, registries.Invalid("burst", "%d must not be negative", c.Burst))
	}
	return errors.Join(errs...)
}

// splitAddress returns the scheme ("http", "https", or "" when addr has
// none) and host:port of a host:port or URL address.
func splitAddress(addr string) (scheme, hostport string, err error) {
	if !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", err
		}
		return "", addr, nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", "", fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return "", "", errors.New("missing host")
	}
	return u.Scheme, u.Host, nil
}

// setting is one resolved connection setting and where it came from: the
// config field ("tls.caFile") or the environment variable
// ("CONSUL_CACERT"). Errors name it by source.
type setting struct {
	value  string
	source string
}

func (s setting) set() bool { return s.value != "" }

// endpoint is how to reach the agent: Config.Address and Config.TLS with the
// environment fallbacks applied (see Config).
type endpoint struct {
	scheme   string // "http" or "https"
	hostport string
	// schemeFrom names what decided the scheme, for messages.
	schemeFrom string
	ca         setting
	cert, key  setting
	serverName setting
	insecure   setting // value "true" when verification is off
}

// tlsSettings returns the TLS settings that are set, in field order.
func (e endpoint) tlsSettings() []setting {
	var out []setting
	for _, s := range []setting{e.ca, e.cert, e.key, e.serverName, e.insecure} {
		if s.set() {
			out = append(out, s)
		}
	}
	return out
}

// resolveEndpoint applies the precedence documented on Config. c has its
// defaults (Address set); getenv is os.Getenv outside tests. It reads no
// file.
func resolveEndpoint(c Config, getenv func(string) string) (endpoint, error) {
	scheme, hostport, err := splitAddress(c.Address)
	if err != nil {
		return endpoint{}, registries.Invalid("address", "%q: %w", c.Address, err)
	}
	e := endpoint{hostport: hostport}
	pick := func(field, fieldName, env string) setting {
		if field != "" {
			return setting{field, fieldName}
		}
		if v := getenv(env); v != "" {
			return setting{v, env}
		}
		return setting{}
	}
	e.ca = pick(c.TLS.CAFile, "tls.caFile", api.HTTPCAFile)
	e.serverName = pick(c.TLS.ServerName, "tls.serverName", api.HTTPTLSServerName)
	if c.TLS.CertFile != "" || c.TLS.KeyFile != "" {
		e.cert = setting{c.TLS.CertFile, "tls.certFile"}
		e.key = setting{c.TLS.KeyFile, "tls.keyFile"}
	} else {
		e.cert = pick("", "", api.HTTPClientCert)
		e.key = pick("", "", api.HTTPClientKey)
	}
	var errs []error
	if e.cert.set() != e.key.set() {
		c, k := certNames(e.cert, e.key)
		errs = append(errs, fmt.Errorf("%s and %s: set both or neither", c, k))
	}
	if c.TLS.InsecureSkipVerify {
		e.insecure = setting{"true", "tls.insecureSkipVerify"}
	} else if v := getenv(api.HTTPSSLVerifyEnvName); v != "" {
		verify, err := strconv.ParseBool(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: not a boolean", api.HTTPSSLVerifyEnvName, v))
		case !verify:
			e.insecure = setting{"true", api.HTTPSSLVerifyEnvName + "=" + v}
		}
	}

	tlsSet := e.tlsSettings()
	ssl := getenv(api.HTTPSSLEnvName)
	var sslOn *bool
	if ssl != "" {
		on, err := strconv.ParseBool(ssl)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: not a boolean", api.HTTPSSLEnvName, ssl))
		} else {
			sslOn = &on
		}
	}
	switch {
	case scheme != "":
		e.scheme, e.schemeFrom = scheme, fmt.Sprintf("address %q", c.Address)
		if scheme == "http" && sslOn != nil && *sslOn {
			errs = append(errs, fmt.Errorf("address %q and %s=%s: the address asks for plain HTTP, the environment for HTTPS; write https://%s",
				c.Address, api.HTTPSSLEnvName, ssl, hostport))
		}
	case sslOn != nil:
		e.scheme, e.schemeFrom = "http", api.HTTPSSLEnvName+"="+ssl
		if *sslOn {
			e.scheme = "https"
		}
	case len(tlsSet) > 0:
		e.scheme, e.schemeFrom = "https", tlsSet[0].source+" (a TLS setting implies https)"
	default:
		e.scheme, e.schemeFrom = "http", "the address has no scheme and no TLS setting is set"
	}
	if e.scheme == "http" && len(tlsSet) > 0 {
		names := make([]string, len(tlsSet))
		for i, s := range tlsSet {
			names[i] = s.source
		}
		errs = append(errs, fmt.Errorf("%s and %s: plain HTTP with TLS settings would send the ACL token in cleartext; use https (write the address as https://%s or without a scheme)",
			e.schemeFrom, strings.Join(names, ", "), hostport))
	}
	return e, errors.Join(errs...)
}

// certNames names the client certificate and key settings for an error.
func certNames(cert, key setting) (string, string) {
	c, k := cert.source, key.source
	if c == "" {
		c = api.HTTPClientCert
	}
	if k == "" {
		k = api.HTTPClientKey
	}
	return c, k
}

// clientTLS builds the client's TLS configuration with Consul's own
// api.SetupTLSConfig (the rules of the consul CLI's -ca-file, -client-cert,
// -client-key, -tls-server-name), reading every file now so that a missing
// or unreadable one is an error naming its setting ("tls.caFile: open
// /etc/consul/ca.pem: no such file or directory"). It returns nil for http.
func clientTLS(e endpoint) (*tls.Config, error) {
	if e.scheme != "https" {
		return nil, nil
	}
	read := func(s setting) ([]byte, error) {
		if !s.set() {
			return nil, nil
		}
		b, err := os.ReadFile(s.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.source, err)
		}
		return b, nil
	}
	var errs []error
	ca, err := read(e.ca)
	errs = append(errs, err)
	cert, err := read(e.cert)
	errs = append(errs, err)
	key, err := read(e.key)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg, err := api.SetupTLSConfig(&api.TLSConfig{Address: e.serverName.value, InsecureSkipVerify: e.insecure.set()})
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", e.serverName.source, e.serverName.value, err)
	}
	if ca != nil {
		roots, err := api.SetupTLSConfig(&api.TLSConfig{CAPem: ca})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", e.ca.source, e.ca.value, err)
		}
		cfg.RootCAs = roots.RootCAs
	}
	if cert != nil {
		pair, err := api.SetupTLSConfig(&api.TLSConfig{CertPEM: cert, KeyPEM: key})
		if err != nil {
			return nil, fmt.Errorf("%s %s and %s %s: %w", e.cert.source, e.cert.value, e.key.source, e.key.value, err)
		}
		cfg.Certificates = pair.Certificates
	}
	return cfg, nil
}

// newTransport builds the API client's transport. It keeps enough idle
// connections for every concurrent query (MaxWatches blocking health
// queries, the catalog and state/any queries and the re-read workers), so
// connections are reused instead of churned, and it gives up on a response
// that outlives the blocking wait (Consul adds up to wait/16 of jitter).
//
// MaxConnsPerHost caps open connections, idle ones included, at the same
// number: the agent counts every open connection against
// limits.http_max_conns_per_client (200), and without the cap a burst of
// queries returning together (a node-level check flapping wakes every watch)
// dials new connections before the old ones are back in the idle pool.
//
// It speaks HTTP/1.1 only, over TLS too: each blocking query then holds a
// connection of its own, which is what the agent's per-client limit counts
// and MaxWatches is sized for, and a refused TLS handshake reaches every
// query as its own alert (HTTP/2 would multiplex the queries onto one
// connection and report later dials as "http2: client conn could not be
// established").
func newTransport(c Config, tlsCfg *tls.Config) *http.Transport {
	conns := c.MaxWatches + rereadWorkers + 4
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = conns
	tr.IdleConnTimeout = 90 * time.Second
	tr.ResponseHeaderTimeout = c.WaitTime + c.WaitTime/16 + 30*time.Second
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg.Clone()
	}
	return tr
}

// newClient builds the API client on tr (newTransport's). The client is
// built from the transport directly: api.NewHttpClient applies a TLSConfig
// only to a transport whose TLSClientConfig is nil, which a clone of
// http.DefaultTransport is not.
func newClient(c Config, e endpoint, tr *http.Transport) (*api.Client, error) {
	return api.NewClient(&api.Config{
		Address:    e.hostport,
		Scheme:     e.scheme,
		Datacenter: c.Datacenter,
		Token:      c.Token,
		TokenFile:  c.TokenFile,
		Transport:  tr,
		HttpClient: &http.Client{Transport: tr},
	})
}

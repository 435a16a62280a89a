package consul

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/time/rate"
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultAddress    = "127.0.0.1:8500"
	DefaultMaxWatches = 100
	DefaultWaitTime   = 5 * time.Minute
	DefaultRateLimit  = rate.Limit(10)
	DefaultBurst      = 10

	// maxWaitTime is Consul's own cap on a blocking query's wait.
	maxWaitTime = 10 * time.Minute
	// rereadWorkers bounds the non-blocking health reads the state/any loop
	// runs at once; with the catalog and state queries they are the
	// connections on top of MaxWatches.
	rereadWorkers = 8
)

// TLSConfig configures HTTPS to the Consul agent. Paths are read when the
// client is built.
type TLSConfig struct {
	CAFile             string
	CertFile           string
	KeyFile            string
	ServerName         string
	InsecureSkipVerify bool
}

// Config configures one Consul registry. Zero values take the defaults above.
type Config struct {
	// Name is the registry name, a DNS-1123 label.
	Name string
	// Address is host:port or an http(s) URL; "" means $CONSUL_HTTP_ADDR,
	// else DefaultAddress.
	Address string
	// Datacenter is the datacenter to read; "" is the agent's. A datacenter
	// other than the agent's own is set as Service.Datacenter on every
	// snapshot, so hosts become <svc>.service.<dc>.consul.
	Datacenter string
	// Token or TokenFile is the ACL token (service:read, node:read,
	// agent:read); when both are empty, $CONSUL_HTTP_TOKEN. Never logged.
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
func (c Config) withDefaults() Config {
	if c.Address == "" {
		c.Address = os.Getenv(api.HTTPAddrEnvName)
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

// validate reports the first invalid field by name.
func (c Config) validate() error {
	var errs []error
	if !labelRE.MatchString(c.Name) || len(c.Name) > 63 {
		errs = append(errs, fmt.Errorf("name %q: must be a DNS-1123 label", c.Name))
	}
	if _, _, err := splitAddress(c.Address); err != nil {
		errs = append(errs, fmt.Errorf("address %q: %w", c.Address, err))
	}
	if c.Token != "" && c.TokenFile != "" {
		errs = append(errs, errors.New("token and tokenFile: set at most one"))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls.certFile and tls.keyFile: set both or neither"))
	}
	for i, g := range c.Services {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			errs = append(errs, fmt.Errorf("services[%d] %q: invalid glob", i, g))
		}
	}
	if c.MaxWatches < 0 {
		errs = append(errs, fmt.Errorf("maxWatches %d: must not be negative", c.MaxWatches))
	}
	if c.WaitTime < 0 || c.WaitTime > maxWaitTime {
		errs = append(errs, fmt.Errorf("waitTime %s: must be between 0 and %s", c.WaitTime, maxWaitTime))
	}
	if c.RateLimit < 0 {
		errs = append(errs, fmt.Errorf("rateLimit %v: must not be negative", c.RateLimit))
	}
	if c.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst %d: must not be negative", c.Burst))
	}
	return errors.Join(errs...)
}

// splitAddress returns the scheme ("http" or "https") and host:port of a
// host:port or URL address.
func splitAddress(addr string) (scheme, hostport string, err error) {
	if !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", err
		}
		return "http", addr, nil
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

// newClient builds the API client. Its transport keeps enough idle
// connections for every concurrent query (MaxWatches blocking health queries,
// the catalog and state/any queries and the re-read workers), so connections
// are reused instead of churned, and it gives up on a response that outlives
// the blocking wait (Consul adds up to wait/16 of jitter).
//
// MaxConnsPerHost caps open connections, idle ones included, at the same
// number: the agent counts every open connection against
// limits.http_max_conns_per_client (200), and without the cap a burst of
// queries returning together (a node-level check flapping wakes every watch)
// dials new connections before the old ones are back in the idle pool.
func newClient(c Config) (*api.Client, error) {
	scheme, hostport, err := splitAddress(c.Address)
	if err != nil {
		return nil, err
	}
	conns := c.MaxWatches + rereadWorkers + 4
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = conns
	tr.IdleConnTimeout = 90 * time.Second
	tr.ResponseHeaderTimeout = c.WaitTime + c.WaitTime/16 + 30*time.Second
	return api.NewClient(&api.Config{
		Address:    hostport,
		Scheme:     scheme,
		Datacenter: c.Datacenter,
		Token:      c.Token,
		TokenFile:  c.TokenFile,
		Transport:  tr,
		TLSConfig: api.TLSConfig{
			Address:            c.TLS.ServerName,
			CAFile:             c.TLS.CAFile,
			CertFile:           c.TLS.CertFile,
			KeyFile:            c.TLS.KeyFile,
			InsecureSkipVerify: c.TLS.InsecureSkipVerify,
		},
	})
}

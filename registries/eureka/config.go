package eureka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// Defaults applied to zero fields of Config.
const (
	// DefaultServer is Spring Cloud Netflix's default
	// eureka.client.serviceUrl.defaultZone.
	DefaultServer = "http://127.0.0.1:8761/eureka/"
	// DefaultInterval is how often the delta is read: Eureka's own
	// client reads it every 30 s (registryFetchIntervalSeconds); the
	// server's response cache refreshes every 30 s
	// (responseCacheUpdateIntervalMs), so a shorter interval only helps
	// where that cache is shortened or off (README "Eureka").
	DefaultInterval = 5 * time.Second
	// DefaultRelistInterval is how often the whole registry is read
	// whatever the hashcode says (doc.go rule 3).
	DefaultRelistInterval = 5 * time.Minute
	// DefaultRequestTimeout bounds the wait for a server's answer, and
	// for each part of its body: a server that leaves a request unanswered
	// that long is hung, and the next server is tried.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultReconnectGrace is Eureka's default lease duration (90 s,
	// leaseExpirationDurationInSeconds): a restarted server lists an
	// instance again once its client renews (every 30 s by default) and is
	// told to register again.
	DefaultReconnectGrace = 90 * time.Second

	minInterval       = time.Second
	minRequestTimeout = 100 * time.Millisecond
	maxRequestTimeout = time.Minute
)

// TLSConfig configures TLS to the servers, used for https:// servers.
type TLSConfig struct {
	// CAFile is a PEM bundle of CAs that verify the servers' certificates,
	// added to the system roots; empty means the system roots only.
	CAFile string `json:"caFile,omitempty"`
}

// Config configures one Eureka registry; the README's "Configuration"
// block documents the same keys.
type Config struct {
	// Name is the registry name, a DNS-1123 label.
	Name string
	// Servers are the Eureka servers' base URLs, as
	// eureka.client.serviceUrl.defaultZone lists them
	// ("http://eureka-1:8761/eureka/"): read in order, the next one on an
	// error or a hang (doc.go rule 6). A URL with credentials is refused:
	// they go in Username and PasswordFile.
	Servers []string
	// Username and PasswordFile (its content trimmed of surrounding white
	// space) authenticate with HTTP basic auth, as Spring Security in front
	// of a Eureka server expects. Never logged.
	Username     string
	PasswordFile string
	TLS          TLSConfig
	// Services is an allow-list of path.Match globs on the application
	// name, matched case-insensitively (Eureka upper-cases names); empty
	// means every application.
	Services []string
	// Interval is how often the delta (GET apps/delta) is read; at least 1 s.
	Interval time.Duration
	// RelistInterval is how often the whole registry (GET apps) is read
	// whatever the delta's hashcode says; at least Interval.
	RelistInterval time.Duration
	// RequestTimeout bounds a server's silence: to its answer's headers,
	// and between two parts of its body; 100ms-1m.
	RequestTimeout time.Duration
	// ReconnectGrace is how long after an outage or a failover an
	// application the server no longer lists, or lists with no instance,
	// keeps its last instances (registries.ReporterConfig.ReconnectGrace):
	// a restarted server forgets its instances until they renew. 0 turns it
	// off.
	ReconnectGrace time.Duration
	Logger         *slog.Logger
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if len(c.Servers) == 0 {
		c.Servers = []string{DefaultServer}
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.RelistInterval == 0 {
		c.RelistInterval = DefaultRelistInterval
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports every invalid field of c (defaults applied).
func (c Config) validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, registries.Invalid(field, format, args...))
	}
	if !labelRE.MatchString(c.Name) || len(c.Name) > 63 {
		add("name", "%q must be a DNS-1123 label", c.Name)
	}
	https := false
	for i, s := range c.Servers {
		u, err := parseServer(s)
		if err != nil {
			add(fmt.Sprintf("servers[%d]", i), "%w", err)
			continue
		}
		https = https || u.Scheme == "https"
	}
	if c.TLS.CAFile != "" && !https {
		add("tls.caFile", "is set but no server is https://: the CA would not be used")
	}
	if (c.Username == "") != (c.PasswordFile == "") {
		add("username", "username and passwordFile go together (HTTP basic auth)")
	}
	for i, p := range c.Services {
		if _, err := path.Match(p, ""); err != nil {
			add(fmt.Sprintf("services[%d]", i), "%q is not a valid glob (path.Match): %v", p, err)
		}
	}
	if c.Interval < minInterval {
		add("interval", "%s is under %s", c.Interval, minInterval)
	}
	if c.RelistInterval < c.Interval {
		add("relistInterval", "%s is under interval (%s)", c.RelistInterval, c.Interval)
	}
	if c.RequestTimeout < minRequestTimeout || c.RequestTimeout > maxRequestTimeout {
		add("requestTimeout", "%s is outside %s-%s", c.RequestTimeout, minRequestTimeout, maxRequestTimeout)
	}
	if c.ReconnectGrace < 0 {
		add("reconnectGrace", "%s is negative", c.ReconnectGrace)
	}
	return errors.Join(errs...)
}

// parseServer reads a server's base URL: http or https, a host, no
// credentials, query or fragment. The path ends in "/" (the REST paths are
// relative to it).
func parseServer(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse quotes the whole URL: it has no credentials (they are
		// refused below only once it parses), but say nothing more of it.
		return nil, errors.New("not a URL")
	}
	switch {
	case u.User != nil:
		return nil, errors.New("credentials in the URL are refused: set username and passwordFile")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: want an http:// or https:// URL such as %s", s, DefaultServer)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", s)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: a query or fragment is not allowed", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// clientTLS is the TLS configuration of https:// servers: the system roots
// plus CAFile's.
func clientTLS(c Config) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLS.CAFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(c.TLS.CAFile)
	if err != nil {
		return nil, registries.Invalid("tls.caFile", "%w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, registries.Invalid("tls.caFile", "%s holds no PEM certificate", c.TLS.CAFile)
	}
	cfg.RootCAs = roots
	return cfg, nil
}

// readPassword reads PasswordFile, trimmed of surrounding white space.
func readPassword(c Config) (string, error) {
	if c.PasswordFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", registries.Invalid("passwordFile", "%w", err)
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return "", registries.Invalid("passwordFile", "%s is empty", c.PasswordFile)
	}
	return p, nil
}

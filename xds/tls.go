package xds

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSConfig names the PEM files that secure a listener (the xDS port, the MCP
// port). CertFile and KeyFile make it a TLS server; ClientCAFile also requires
// every client to present a certificate signed by one of its CAs (mTLS). The files are re-read when they
// change (see tlsReloader), so a rotated Kubernetes Secret takes effect for new
// connections without a restart.
type TLSConfig struct {
	CertFile     string
	KeyFile      string
	ClientCAFile string
}

// tlsRecheck bounds how often the files are stat'ed: at most once per
// interval, on a handshake.
const tlsRecheck = time.Second

// fileStamp identifies a file's content cheaply: a rename over the file (how
// editors, cert-manager and the kubelet's ..data symlink swap replace it)
// changes its modification time or size.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path) // follows symlinks: a swapped ..data target shows
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// tlsReloader hands every new TLS handshake the current key pair and client
// CAs. It re-reads the files when their stamps change; a change that does not
// parse (e.g. a key written before its certificate) keeps the previous pair
// and is logged, and the next handshake tries again.
type tlsReloader struct {
	cfg TLSConfig
	log *slog.Logger

	// recheck bounds how often the files are stat'ed (tlsRecheck).
	recheck time.Duration

	mu      sync.Mutex
	checked time.Time
	stamps  [3]fileStamp
	config  *tls.Config
}

// newTLSReloader loads the files once; an error here (missing file, bad PEM,
// key not matching the certificate) is a configuration error.
func newTLSReloader(cfg TLSConfig, log *slog.Logger) (*tlsReloader, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls: certFile and keyFile are required")
	}
	r := &tlsReloader{cfg: cfg, log: log, recheck: tlsRecheck}
	stamps, config, err := r.load()
	if err != nil {
		return nil, err
	}
	r.stamps, r.config, r.checked = stamps, config, time.Now()
	return r, nil
}

// ServerConfig is the tls.Config for a listener.
func (r *tlsReloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current(), nil
		},
	}
}

func (r *tlsReloader) current() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < r.recheck {
		return r.config
	}
	r.checked = time.Now()
	stamps, err := r.stampAll()
	if err != nil || stamps == r.stamps {
		if err != nil {
			r.log.Warn("Kept the current TLS files; a file could not be read", "err", err)
		}
		return r.config
	}
	stamps, config, err := r.load()
	if err != nil {
		r.log.Warn("Kept the current TLS files; the new ones do not load", "err", err)
		return r.config
	}
	r.stamps, r.config = stamps, config
	r.log.Info("Reloaded TLS files", "mtls", r.cfg.ClientCAFile != "")
	return r.config
}

func (r *tlsReloader) stampAll() ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, p := range []string{r.cfg.CertFile, r.cfg.KeyFile, r.cfg.ClientCAFile} {
		if p == "" {
			continue
		}
		s, err := stampOf(p)
		if err != nil {
			return out, err
		}
		out[i] = s
	}
	return out, nil
}

// load reads every file and builds the per-handshake config.
func (r *tlsReloader) load() ([3]fileStamp, *tls.Config, error) {
	stamps, err := r.stampAll()
	if err != nil {
		return stamps, nil, fmt.Errorf("tls: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return stamps, nil, fmt.Errorf("tls: load %s and %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	config := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2"},
		Certificates: []tls.Certificate{pair},
	}
	if r.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(r.cfg.ClientCAFile)
		if err != nil {
			return stamps, nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return stamps, nil, fmt.Errorf("tls: %s holds no PEM certificate", r.cfg.ClientCAFile)
		}
		config.ClientCAs = pool
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return stamps, config, nil
}

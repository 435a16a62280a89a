package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshbridge/meshbridge/xds/bootstrap"
)

const bootstrapUsage = `Usage: meshbridge bootstrap --node-id ID [flags]

Prints the xDS bootstrap of a proxyless gRPC client (grpc-go, grpc-js with
@grpc/grpc-js-xds, gRPC C-core) of this bridge. Write it to a file and point
the client at it with GRPC_XDS_BOOTSTRAP=FILE, then dial xds:///<host>:<port>.

The xDS address is --xds-address, else xds.address of --config (which must
then name a host clients can dial, not 0.0.0.0), else 127.0.0.1:15010. The
connection is plaintext unless a TLS flag is given or --config serves TLS
(xds.tls); gRFC A65 "tls" credentials need grpc-go >= 1.61 or C-core >= 1.65,
grpc-js-xds has none, and a client without them rejects the bootstrap.

The --upstream-* flags give the client the certificates of backends whose
DestinationRule asks for TLS (gRFC A29): they become the bootstrap's
file_watcher certificate provider "default", declared in node.metadata
(CERTIFICATE_PROVIDER); a client whose bootstrap has none is refused those
backends, never served them in plaintext. The client must opt in to xDS
credentials (grpc-go credentials/xds, grpc-java XdsChannelCredentials,
grpc-js-xds XdsChannelCredentials, Python grpc.xds_channel_credentials).

--locality and --label say where the client runs: a DestinationRule's
localityLbSetting serves each client the priorities (failover, with
outlierDetection) or weights (distribute) of its locality, and
failoverPriority compares its labels (node.metadata LABELS; the
topology.kubernetes.io/region and /zone and topology.istio.io/subzone labels
are the locality's parts where it has them) with the backends'.

Flags:
`

// bootstrapFlags are the flags of `meshbridge bootstrap`.
type bootstrapFlags struct {
	nodeID, cluster, locality string
	labels                    map[string]string // --label, repeated
	config, xdsAddress        string
	tls                       bool
	caFile, certFile, keyFile string
	// upstream: the certificate provider's files (gRFC A29).
	upstreamCA, upstreamCert, upstreamKey string
}

func (f *bootstrapFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.nodeID, "node-id", "", "node.id: names the client in the bridge's logs (required)")
	fs.StringVar(&f.cluster, "cluster", "", "node.cluster: the client's service cluster (optional)")
	fs.StringVar(&f.locality, "locality", "", "node.locality where the client runs, as region/zone/subzone (trailing parts optional)")
	fs.Func("label", "a client label as key=value (repeatable), sent in the node metadata LABELS: a DestinationRule's failoverPriority compares it with the backends' labels", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", s)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
		if f.labels == nil {
			f.labels = map[string]string{}
		}
		f.labels[k] = v
		return nil
	})
	fs.StringVar(&f.config, "config", "", "the bridge's configuration: default xDS address and TLS from its xds block")
	fs.StringVar(&f.xdsAddress, "xds-address", "", "the bridge's xDS address as clients dial it: host:port or a gRPC target URI (default: --config's xds.address, else 127.0.0.1:15010)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS, verifying the bridge's certificate against the system roots unless --ca-file is given")
	fs.StringVar(&f.caFile, "ca-file", "", "CA certificates (PEM) that verify the bridge's certificate; implies --tls")
	fs.StringVar(&f.certFile, "cert-file", "", "client certificate chain (PEM) for an mTLS xDS port (xds.tls.clientCAFile); with --key-file; implies --tls")
	fs.StringVar(&f.keyFile, "key-file", "", "client private key (PEM) for --cert-file")
	fs.StringVar(&f.upstreamCA, "upstream-ca-file", "", "CA certificates (PEM) that verify backends whose DestinationRule asks for TLS (gRFC A29 certificate provider)")
	fs.StringVar(&f.upstreamCert, "upstream-cert-file", "", "client certificate chain (PEM) for backends asking mTLS (MUTUAL, ISTIO_MUTUAL); with --upstream-key-file and --upstream-ca-file")
	fs.StringVar(&f.upstreamKey, "upstream-key-file", "", "client private key (PEM) for --upstream-cert-file")
}

// cmdBootstrap prints the xDS bootstrap (package xds/bootstrap) of a
// proxyless gRPC client. It returns 0 on success and for -h/--help (usage on
// stdout), 2 for a usage error, 1 when --config cannot be loaded.
func cmdBootstrap(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	var f bootstrapFlags
	f.register(fs)
	if done, code := parseFlags(fs, args, bootstrapUsage, stdout, stderr); done {
		return code
	}
	cfg, code := f.bootstrapConfig(stderr)
	if cfg == nil {
		return code
	}
	out, err := bootstrap.Render(*cfg)
	if err != nil {
		fmt.Fprintf(stderr, "meshbridge bootstrap: %v\n", err)
		return 2
	}
	if cfg.TLS == nil && !isLoopback(cfg.ServerURI) {
		fmt.Fprintf(stderr, "meshbridge bootstrap: warning: the xDS connection to %s is plaintext; give --tls or --ca-file if the bridge serves xds.tls\n", cfg.ServerURI)
	}
	for _, w := range clientFileWarnings(cfg) {
		fmt.Fprintf(stderr, "meshbridge bootstrap: warning: %s\n", w)
	}
	_, _ = stdout.Write(out)
	return 0
}

// clientFileWarnings returns a warning for each file of cfg that the
// client may not find: a relative path (the client resolves it against its
// own working directory when it starts), or one missing on this machine
// (the bootstrap may be meant for another; the warning says so).
func clientFileWarnings(cfg *bootstrap.Config) []string {
	type file struct{ flag, path string }
	var files []file
	if t := cfg.TLS; t != nil {
		files = append(files, file{"--ca-file", t.CAFile}, file{"--cert-file", t.CertFile}, file{"--key-file", t.KeyFile})
	}
	if c := cfg.Certificates; c != nil {
		files = append(files, file{"--upstream-ca-file", c.CAFile}, file{"--upstream-cert-file", c.CertFile},
			file{"--upstream-key-file", c.KeyFile})
	}
	var out []string
	for _, f := range files {
		switch {
		case f.path == "":
		case !filepath.IsAbs(f.path):
			out = append(out, fmt.Sprintf("%s %q is a relative path, written as given: the client resolves it against "+
				"its own working directory when it starts; give an absolute path", f.flag, f.path))
		default:
			if _, err := os.Stat(f.path); err != nil {
				out = append(out, fmt.Sprintf("%s %s: %v; the client must find it at that path when it starts",
					f.flag, f.path, errors.Unwrap(err)))
			}
		}
	}
	return out
}

// bootstrapConfig turns the flags into a bootstrap.Config, taking the xDS
// address and TLS mode from --config when the flags leave them unset. On
// failure it prints the error and returns nil and the exit code.
func (f *bootstrapFlags) bootstrapConfig(stderr io.Writer) (*bootstrap.Config, int) {
	fail := func(code int, format string, args ...any) (*bootstrap.Config, int) {
		fmt.Fprintf(stderr, "meshbridge bootstrap: "+format+"\n", args...)
		return nil, code
	}
	if f.nodeID == "" {
		return fail(2, "--node-id is required: it names the client in the bridge's logs")
	}
	loc, err := bootstrap.ParseLocality(f.locality)
	if err != nil {
		return fail(2, "--locality: %v", err)
	}
	cfg := &bootstrap.Config{NodeID: f.nodeID, Cluster: f.cluster, Locality: loc, Labels: f.labels, ServerURI: f.xdsAddress}
	if f.keyFile != "" && f.certFile == "" || f.certFile != "" && f.keyFile == "" {
		return fail(2, "--cert-file and --key-file go together")
	}
	if f.tls || f.caFile != "" || f.certFile != "" {
		cfg.TLS = &bootstrap.TLS{CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile}
	}
	if f.upstreamCA != "" || f.upstreamCert != "" || f.upstreamKey != "" {
		if f.upstreamCA == "" {
			return fail(2, "--upstream-ca-file is required with --upstream-cert-file: a TLS backend is always verified")
		}
		if (f.upstreamCert == "") != (f.upstreamKey == "") {
			return fail(2, "--upstream-cert-file and --upstream-key-file go together")
		}
		cfg.Certificates = &bootstrap.Certificates{CAFile: f.upstreamCA, CertFile: f.upstreamCert, KeyFile: f.upstreamKey}
	}
	if f.config == "" {
		if cfg.ServerURI == "" {
			cfg.ServerURI = "127.0.0.1:15010"
		}
		return cfg, 0
	}
	// Only the xds block matters here: the files the registries name (tokens,
	// passwords) need not exist where bootstrap runs.
	c, err := readConfig(f.config)
	if err != nil {
		return fail(1, "%v", err)
	}
	serverTLS := c.XDS.TLS
	if cfg.ServerURI == "" {
		host, _, err := net.SplitHostPort(c.XDS.Address)
		if err != nil {
			return fail(1, "xds.address of %s: %v", f.config, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			return fail(2, "xds.address %s of %s listens on every interface; give --xds-address with the address clients dial", c.XDS.Address, f.config)
		}
		cfg.ServerURI = c.XDS.Address
		if cfg.TLS != nil && serverTLS == nil {
			return fail(2, "--tls, --ca-file or --cert-file given, but xds.address %s of %s serves plaintext (no xds.tls)", c.XDS.Address, f.config)
		}
	}
	if serverTLS != nil && cfg.TLS == nil {
		cfg.TLS = &bootstrap.TLS{}
	}
	if serverTLS != nil && serverTLS.ClientCAFile != "" && cfg.TLS.CertFile == "" {
		return fail(2, "%s requires client certificates (xds.tls.clientCAFile): give --cert-file and --key-file", f.config)
	}
	return cfg, 0
}

// isLoopback reports whether a server URI stays on this machine: a Unix
// socket, localhost or a loopback address.
func isLoopback(serverURI string) bool {
	if strings.HasPrefix(serverURI, "unix:") || strings.HasPrefix(serverURI, "unix-abstract:") {
		return true
	}
	host, _, err := net.SplitHostPort(serverURI)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

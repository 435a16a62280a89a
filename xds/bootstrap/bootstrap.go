package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

const (
	// GeneratorGRPC is the node metadata GENERATOR value of a proxyless gRPC
	// client (xds.GeneratorGRPC).
	GeneratorGRPC = "grpc"
	// ServerFeatureXDSv3 tells the client to speak xDS transport protocol v3
	// (gRFC A30).
	ServerFeatureXDSv3 = "xds_v3"
	// CertificateProviderInstance is the certificate provider instance
	// (gRFC A29) of Config.Certificates: the one every cluster with a
	// DestinationRule's tls names (istio-agent's and istiod's "default").
	CertificateProviderInstance = "default"
	// MetadataCertificateProvider is the node metadata field that declares
	// the bootstrap's CertificateProviderInstance (its value is the
	// instance's name). A client whose node does not declare it is refused
	// TLS clusters rather than served ones it would NACK: the bridge cannot
	// see the client's bootstrap otherwise.
	MetadataCertificateProvider = "CERTIFICATE_PROVIDER"
	// MetadataLabels is the node metadata field that holds the client's
	// labels, a JSON object of strings, as Istio's proxies send theirs: a
	// DestinationRule's failoverPriority compares them with the
	// backends'.
	MetadataLabels = "LABELS"
	// certificateRefresh is how often a file_watcher instance reads its
	// files again (a rotated certificate is used from then on).
	certificateRefresh = "60s"
)

// Config is what one client's bootstrap says.
type Config struct {
	// ServerURI is the gRPC target of meshbridge's xDS port: "host:port"
	// ("127.0.0.1:15010", "[::1]:15010", "meshbridge.istio-system:15010")
	// or a gRPC target URI of scheme dns, unix, unix-abstract, ipv4 or ipv6
	// ("dns:///meshbridge:15010", "unix:///run/meshbridge.sock"). Required.
	ServerURI string
	// TLS, when set, secures the connection to the xDS server ("tls" channel
	// credentials, gRFC A65); nil is plaintext ("insecure").
	TLS *TLS
	// NodeID identifies the client in meshbridge's logs (node.id). Required.
	NodeID string
	// Cluster is the client's service cluster (node.cluster); "" omits it.
	Cluster string
	// Locality is where the client runs (node.locality).
	Locality Locality
	// Labels are the client's labels (node metadata MetadataLabels);
	// empty omits them.
	Labels map[string]string
	// Certificates, when set, are the PEM files of the client's connections
	// to backends whose DestinationRule asks for TLS (gRFC A29): written as
	// the file_watcher certificate provider CertificateProviderInstance and
	// declared in the node metadata (MetadataCertificateProvider); nil: the
	// client is refused TLS backends.
	Certificates *Certificates
}

// Certificates name the PEM files of a file_watcher certificate provider
// (gRFC A29), the client's paths.
type Certificates struct {
	// CAFile verifies backends' certificates (ca_certificate_file).
	// Required: a TLS cluster always verifies the server.
	CAFile string
	// CertFile and KeyFile are the client's certificate chain and key
	// (certificate_file, private_key_file), for backends asking mTLS
	// (MUTUAL, ISTIO_MUTUAL); both or neither.
	CertFile string
	KeyFile  string
}

// TLS names the client's PEM files for "tls" channel credentials (gRFC A65).
type TLS struct {
	// CAFile verifies the server's certificate (ca_certificate_file); ""
	// uses the system roots. The certificate must name the host of
	// Config.ServerURI.
	CAFile string
	// CertFile and KeyFile are the client's certificate chain and key
	// (certificate_file, private_key_file) for an mTLS server; both or
	// neither.
	CertFile string
	KeyFile  string
}

// Locality is an envoy.config.core.v3.Locality. Every field may be empty.
type Locality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// ParseLocality parses "region/zone/subzone", the form of Istio's
// istio-locality label and of the file registry's instance locality: missing
// trailing parts are empty ("eu-west-1" is a region only), "" is no locality.
// More than three parts is an error.
func ParseLocality(s string) (Locality, error) {
	if s == "" {
		return Locality{}, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) > 3 {
		return Locality{}, fmt.Errorf("locality %q has %d parts; want region/zone/subzone", s, len(parts))
	}
	parts = append(parts, "", "")
	return Locality{Region: parts[0], Zone: parts[1], SubZone: parts[2]}, nil
}

// String returns the locality as "region/zone/subzone", without trailing
// empty parts.
func (l Locality) String() string {
	return strings.TrimRight(l.Region+"/"+l.Zone+"/"+l.SubZone, "/")
}

// Validate reports every error of c, joined.
func (c Config) Validate() error {
	var errs []error
	if err := validateServerURI(c.ServerURI); err != nil {
		errs = append(errs, err)
	}
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is required (grpc-js rejects a bootstrap without node.id)"))
	}
	if t := c.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("tls: the client certificate and key files go together (gRFC A65)"))
	}
	if p := c.Certificates; p != nil {
		if p.CAFile == "" {
			errs = append(errs, errors.New("upstream certificates: the CA file is required (a TLS cluster always verifies the server, gRFC A29)"))
		}
		if (p.CertFile == "") != (p.KeyFile == "") {
			errs = append(errs, errors.New("upstream certificates: the certificate and key files go together"))
		}
	}
	return errors.Join(errs...)
}

// targetSchemes are the gRPC name resolver schemes a server URI may start
// with (gRPC doc/naming.md); anything else must be host:port.
var targetSchemes = map[string]bool{"dns": true, "unix": true, "unix-abstract": true, "ipv4": true, "ipv6": true}

// validateServerURI accepts host:port with a port in 1-65535, or a target
// URI of one of targetSchemes.
func validateServerURI(s string) error {
	if s == "" {
		return errors.New("xDS server address is required")
	}
	if scheme, rest, ok := strings.Cut(s, ":"); ok && targetSchemes[scheme] && strings.Trim(rest, "/") != "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("xDS server address %q is neither host:port nor a gRPC target URI (dns:, unix:, ipv4:, ipv6:)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("xDS server address %q: port %q is not in 1-65535", s, port)
	}
	if host == "" || strings.ContainsAny(host, "/?#@") {
		return fmt.Errorf("xDS server address %q: %q is not a host", s, host)
	}
	return nil
}

// Render validates c and returns its bootstrap: indented JSON ending in a
// newline, the same bytes for the same Config.
func Render(c Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	creds := channelCreds{Type: "insecure"}
	if t := c.TLS; t != nil {
		creds = channelCreds{Type: "tls", Config: &tlsConfig{
			CACertificateFile: t.CAFile,
			CertificateFile:   t.CertFile,
			PrivateKeyFile:    t.KeyFile,
		}}
	}
	doc := document{
		XDSServers: []xdsServer{{
			ServerURI:      c.ServerURI,
			ChannelCreds:   []channelCreds{creds},
			ServerFeatures: []string{ServerFeatureXDSv3},
		}},
		Node: node{
			ID:       c.NodeID,
			Cluster:  c.Cluster,
			Locality: c.Locality,
			Metadata: map[string]any{"GENERATOR": GeneratorGRPC},
		},
	}
	if len(c.Labels) > 0 {
		doc.Node.Metadata[MetadataLabels] = c.Labels
	}
	if p := c.Certificates; p != nil {
		doc.CertificateProviders = map[string]certificateProvider{CertificateProviderInstance: {
			PluginName: "file_watcher",
			Config: fileWatcher{
				CertificateFile:   p.CertFile,
				PrivateKeyFile:    p.KeyFile,
				CACertificateFile: p.CAFile,
				RefreshInterval:   certificateRefresh,
			},
		}}
		doc.Node.Metadata[MetadataCertificateProvider] = CertificateProviderInstance
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// document is the bootstrap's JSON, fields in the order gRPC documents them.
type document struct {
	XDSServers           []xdsServer                    `json:"xds_servers"`
	Node                 node                           `json:"node"`
	CertificateProviders map[string]certificateProvider `json:"certificate_providers,omitempty"`
}

// certificateProvider is a certificate_providers instance (gRFC A29).
type certificateProvider struct {
	PluginName string      `json:"plugin_name"`
	Config     fileWatcher `json:"config"`
}

// fileWatcher is the file_watcher plugin's config; grpc-js requires
// refresh_interval.
type fileWatcher struct {
	CertificateFile   string `json:"certificate_file,omitempty"`
	PrivateKeyFile    string `json:"private_key_file,omitempty"`
	CACertificateFile string `json:"ca_certificate_file,omitempty"`
	RefreshInterval   string `json:"refresh_interval"`
}

type xdsServer struct {
	ServerURI      string         `json:"server_uri"`
	ChannelCreds   []channelCreds `json:"channel_creds"`
	ServerFeatures []string       `json:"server_features"`
}

type channelCreds struct {
	Type   string     `json:"type"`
	Config *tlsConfig `json:"config,omitempty"`
}

// tlsConfig is the "tls" channel credentials' config (gRFC A65); an empty
// one is TLS verified against the system roots.
type tlsConfig struct {
	CACertificateFile string `json:"ca_certificate_file,omitempty"`
	CertificateFile   string `json:"certificate_file,omitempty"`
	PrivateKeyFile    string `json:"private_key_file,omitempty"`
}

type node struct {
	ID       string         `json:"id"`
	Cluster  string         `json:"cluster,omitempty"`
	Locality Locality       `json:"locality"`
	Metadata map[string]any `json:"metadata"`
}

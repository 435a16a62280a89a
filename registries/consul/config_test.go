package consul

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/test/harness"
)

func TestNewValidates(t *testing.T) {
	tests := map[string]struct {
		cfg     Config
		wantErr string // substring naming the field; "" = valid
	}{
		"a minimal config is valid":         {cfg: Config{Name: "consul-dc1"}},
		"a URL address is valid":            {cfg: Config{Name: "c", Address: "https://consul.example:8501"}},
		"the name must be a DNS-1123 label": {cfg: Config{Name: "Consul_DC1"}, wantErr: "name"},
		"the address needs a port":          {cfg: Config{Name: "c", Address: "consul.example"}, wantErr: "address"},
		"the address scheme is http(s)":     {cfg: Config{Name: "c", Address: "ftp://x:1"}, wantErr: "address"},
		"token and tokenFile exclude each other": {
			cfg: Config{Name: "c", Token: "t", TokenFile: "/f"}, wantErr: "tokenFile"},
		"a client cert needs its key":  {cfg: Config{Name: "c", TLS: TLSConfig{CertFile: "/c"}}, wantErr: "tls.keyFile"},
		"service globs must be valid":  {cfg: Config{Name: "c", Services: []string{"web-["}}, wantErr: "services[0]"},
		"maxWatches is not negative":   {cfg: Config{Name: "c", MaxWatches: -1}, wantErr: "maxWatches"},
		"waitTime is at most Consul's": {cfg: Config{Name: "c", WaitTime: 11 * 60e9}, wantErr: "waitTime"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New error = %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewErrorNeverShowsTheToken(t *testing.T) {
	_, err := New(Config{Name: "c", Token: "s3cr3t", TokenFile: "/f"})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("New error = %v; want an error without the token", err)
	}
}

func TestSelectServices(t *testing.T) {
	listed := map[string][]string{"consul": nil, "web": nil, "api": nil, "web-admin": nil}
	tests := map[string]struct {
		allow []string
		want  []string
	}{
		"no allow-list follows all but consul, sorted":   {want: []string{"api", "web", "web-admin"}},
		"globs select by name":                           {allow: []string{"web*"}, want: []string{"web", "web-admin"}},
		"consul is followed when an allow-list names it": {allow: []string{"consul", "api"}, want: []string{"api", "consul"}},
		"an allow-list matching nothing follows nothing": {allow: []string{"db"}, want: []string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, selectServices(listed, tc.allow)); diff != "" {
				t.Errorf("selectServices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorReason(t *testing.T) {
	tests := map[string]struct {
		err  error
		want string
	}{
		"403 is forbidden":                 {err: api.StatusError{Code: 403, Body: "ACL not found"}, want: reasonForbidden},
		"401 is forbidden":                 {err: api.StatusError{Code: 401}, want: reasonForbidden},
		"500 is unavailable":               {err: api.StatusError{Code: 500, Body: "No cluster leader"}, want: reasonUnavailable},
		"429 is unavailable":               {err: api.StatusError{Code: 429}, want: reasonUnavailable},
		"a wrapped status error is seen":   {err: errorsJoin(api.StatusError{Code: 503}), want: reasonUnavailable},
		"a 400 is the loop's":              {err: api.StatusError{Code: 400}, want: reasonHealth},
		"a connection error is the loop's": {err: errors.New("connection refused"), want: reasonHealth},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := errorReason(reasonHealth, tc.err); got != tc.want {
				t.Errorf("errorReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("read"), err) }

// TestResolveEndpoint: the scheme and TLS settings after the environment
// fallbacks, as Consul's CLI reads them (api.HTTPCAFile, ...), and the rule
// that plain HTTP never carries a TLS setting.
func TestResolveEndpoint(t *testing.T) {
	tests := map[string]struct {
		cfg     Config
		env     map[string]string
		want    endpoint // compared on scheme, hostport and the settings
		wantErr []string // substrings, all required; nil = valid
	}{
		"a bare address is plain HTTP": {
			cfg:  Config{Address: "127.0.0.1:8500"},
			want: endpoint{scheme: "http", hostport: "127.0.0.1:8500"},
		},
		"an https URL is HTTPS with the system roots": {
			cfg:  Config{Address: "https://consul.example:8501"},
			want: endpoint{scheme: "https", hostport: "consul.example:8501"},
		},
		"a caFile makes a scheme-less address HTTPS": {
			cfg: Config{Address: "127.0.0.1:8501", TLS: TLSConfig{CAFile: "ca.pem"}},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				ca: setting{"ca.pem", "tls.caFile"}},
		},
		"insecureSkipVerify alone makes it HTTPS": {
			cfg: Config{Address: "127.0.0.1:8501", TLS: TLSConfig{InsecureSkipVerify: true}},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				insecure: setting{"true", "tls.insecureSkipVerify"}},
		},
		"http:// with a TLS field is an error naming both": {
			cfg:     Config{Address: "http://127.0.0.1:8501", TLS: TLSConfig{CAFile: "ca.pem", ServerName: "consul"}},
			wantErr: []string{`address "http://127.0.0.1:8501"`, "tls.caFile, tls.serverName", "cleartext", "https://127.0.0.1:8501"},
		},
		"CONSUL_CACERT fills an empty caFile and implies HTTPS": {
			cfg: Config{Address: "127.0.0.1:8501"},
			env: map[string]string{"CONSUL_CACERT": "/env/ca.pem"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				ca: setting{"/env/ca.pem", "CONSUL_CACERT"}},
		},
		"a caFile field wins over CONSUL_CACERT": {
			cfg: Config{Address: "127.0.0.1:8501", TLS: TLSConfig{CAFile: "ca.pem"}},
			env: map[string]string{"CONSUL_CACERT": "/env/ca.pem"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				ca: setting{"ca.pem", "tls.caFile"}},
		},
		"http:// with CONSUL_CACERT is an error naming the variable": {
			cfg:     Config{Address: "http://127.0.0.1:8500"},
			env:     map[string]string{"CONSUL_CACERT": "/env/ca.pem"},
			wantErr: []string{`address "http://127.0.0.1:8500"`, "CONSUL_CACERT"},
		},
		"the client pair comes from the environment as a pair": {
			cfg: Config{Address: "127.0.0.1:8501"},
			env: map[string]string{"CONSUL_CLIENT_CERT": "/env/c.pem", "CONSUL_CLIENT_KEY": "/env/k.pem",
				"CONSUL_TLS_SERVER_NAME": "server.dc1.consul"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				cert: setting{"/env/c.pem", "CONSUL_CLIENT_CERT"}, key: setting{"/env/k.pem", "CONSUL_CLIENT_KEY"},
				serverName: setting{"server.dc1.consul", "CONSUL_TLS_SERVER_NAME"}},
		},
		"a configured pair ignores the environment's": {
			cfg: Config{Address: "127.0.0.1:8501", TLS: TLSConfig{CertFile: "c.pem", KeyFile: "k.pem"}},
			env: map[string]string{"CONSUL_CLIENT_CERT": "/env/c.pem", "CONSUL_CLIENT_KEY": "/env/k.pem"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				cert: setting{"c.pem", "tls.certFile"}, key: setting{"k.pem", "tls.keyFile"}},
		},
		"a half pair in the environment is an error": {
			cfg:     Config{Address: "127.0.0.1:8501"},
			env:     map[string]string{"CONSUL_CLIENT_CERT": "/env/c.pem"},
			wantErr: []string{"CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY: set both or neither"},
		},
		"a configured cert needs the configured key, whatever the environment": {
			cfg:     Config{Address: "127.0.0.1:8501", TLS: TLSConfig{CertFile: "c.pem"}},
			env:     map[string]string{"CONSUL_CLIENT_KEY": "/env/k.pem"},
			wantErr: []string{"tls.certFile and tls.keyFile: set both or neither"},
		},
		"CONSUL_HTTP_SSL=true makes a bare address HTTPS": {
			cfg:  Config{Address: "127.0.0.1:8501"},
			env:  map[string]string{"CONSUL_HTTP_SSL": "true"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501"},
		},
		"CONSUL_HTTP_SSL=false with a TLS field is an error": {
			cfg:     Config{Address: "127.0.0.1:8501", TLS: TLSConfig{CAFile: "ca.pem"}},
			env:     map[string]string{"CONSUL_HTTP_SSL": "false"},
			wantErr: []string{"CONSUL_HTTP_SSL=false", "tls.caFile"},
		},
		"the address's scheme wins over CONSUL_HTTP_SSL=false": {
			cfg:  Config{Address: "https://127.0.0.1:8501"},
			env:  map[string]string{"CONSUL_HTTP_SSL": "false"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501"},
		},
		"http:// with CONSUL_HTTP_SSL=true is an error": {
			cfg:     Config{Address: "http://127.0.0.1:8501"},
			env:     map[string]string{"CONSUL_HTTP_SSL": "1"},
			wantErr: []string{`address "http://127.0.0.1:8501" and CONSUL_HTTP_SSL=1`},
		},
		"CONSUL_HTTP_SSL must be a boolean": {
			cfg:     Config{Address: "127.0.0.1:8501"},
			env:     map[string]string{"CONSUL_HTTP_SSL": "yes please"},
			wantErr: []string{`CONSUL_HTTP_SSL "yes please": not a boolean`},
		},
		"CONSUL_HTTP_SSL_VERIFY=false turns verification off and implies HTTPS": {
			cfg: Config{Address: "127.0.0.1:8501"},
			env: map[string]string{"CONSUL_HTTP_SSL_VERIFY": "false"},
			want: endpoint{scheme: "https", hostport: "127.0.0.1:8501",
				insecure: setting{"true", "CONSUL_HTTP_SSL_VERIFY=false"}},
		},
		"CONSUL_HTTP_SSL_VERIFY=true changes nothing": {
			cfg:  Config{Address: "127.0.0.1:8500"},
			env:  map[string]string{"CONSUL_HTTP_SSL_VERIFY": "true"},
			want: endpoint{scheme: "http", hostport: "127.0.0.1:8500"},
		},
		"CONSUL_HTTP_ADDR with its scheme is used when address is empty": {
			env:  map[string]string{"CONSUL_HTTP_ADDR": "https://consul.example:8501"},
			want: endpoint{scheme: "https", hostport: "consul.example:8501"},
		},
		"no address anywhere is the default, plain HTTP": {
			want: endpoint{scheme: "http", hostport: DefaultAddress},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			cfg := tc.cfg
			cfg.Name = "c"
			got, err := resolveEndpoint(cfg.withDefaults(getenv), getenv)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("resolveEndpoint = %+v, want an error naming %q", got, tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("resolveEndpoint: %v", err)
			}
			got.schemeFrom = ""
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(endpoint{}, setting{})); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewReadsTLSFiles: a TLS file that is missing or not PEM is an error
// from New naming its setting, not a failure at the first read.
func TestNewReadsTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := harness.NewCA(t, "test-ca")
	client := ca.ClientCert(t, "meshbridge")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := map[string]struct {
		tls     TLSConfig
		env     map[string]string
		wantErr string // "" = valid
	}{
		"readable files are fine":       {tls: TLSConfig{CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}},
		"a missing caFile is named":     {tls: TLSConfig{CAFile: missing}, wantErr: "tls.caFile: open " + missing},
		"a missing certFile is named":   {tls: TLSConfig{CertFile: missing, KeyFile: client.KeyFile}, wantErr: "tls.certFile: open " + missing},
		"a missing keyFile is named":    {tls: TLSConfig{CertFile: client.CertFile, KeyFile: missing}, wantErr: "tls.keyFile: open " + missing},
		"a caFile without PEM is named": {tls: TLSConfig{CAFile: garbage}, wantErr: "tls.caFile " + garbage},
		"a key not matching the cert is named": {
			tls:     TLSConfig{CertFile: client.CertFile, KeyFile: ca.ClientCert(t, "other").KeyFile},
			wantErr: "tls.certFile " + client.CertFile + " and tls.keyFile"},
		"a missing CONSUL_CACERT is named": {
			env: map[string]string{"CONSUL_CACERT": missing}, wantErr: "CONSUL_CACERT: open " + missing},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := New(Config{Name: "c", Address: "127.0.0.1:8501", TLS: tc.tls})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestClassify: the errors retrying cannot fix are marked permanent.
func TestClassify(t *testing.T) {
	tests := map[string]struct {
		err           error
		wantPermanent bool
		wantReason    string
	}{
		"403 ACL not found": {err: api.StatusError{Code: 403, Body: "ACL not found"}, wantPermanent: true, wantReason: reasonForbidden},
		"403 Permission denied": {
			err: fmt.Errorf("list: %w", api.StatusError{Code: 403, Body: "Permission denied"}), wantPermanent: true, wantReason: reasonForbidden},
		"500 No cluster leader": {err: api.StatusError{Code: 500, Body: "No cluster leader"}, wantReason: reasonUnavailable},
		"connection refused":    {err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, wantReason: reasonCatalog},
		"an unknown authority": {
			err:           &url.Error{Op: "Get", URL: "https://x", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}},
			wantPermanent: true, wantReason: reasonTLS},
		"a wrong host name": {err: x509.HostnameError{Host: "x", Certificate: &x509.Certificate{}}, wantPermanent: true, wantReason: reasonTLS},
		"the agent refuses our certificate": {
			err:           &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "remote error", Err: alertText("tls: certificate required")}},
			wantPermanent: true, wantReason: reasonTLS},
		"another remote TLS alert is transient": {
			err: &net.OpError{Op: "remote error", Err: alertText("tls: internal error")}, wantReason: reasonCatalog},
		"HTTP to an HTTPS port": {
			err: api.StatusError{Code: 400, Body: "Client sent an HTTP request to an HTTPS server.\n"}, wantPermanent: true, wantReason: reasonCatalog},
		"HTTPS to an HTTP port": {
			err:           &url.Error{Op: "Get", URL: "https://x", Err: errors.New("http: server gave HTTP response to HTTPS client")},
			wantPermanent: true, wantReason: reasonCatalog},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := classify(tc.err)
			if p := registries.IsPermanent(got); p != tc.wantPermanent {
				t.Errorf("IsPermanent(classify(%v)) = %v, want %v", tc.err, p, tc.wantPermanent)
			}
			if got.Error() != tc.err.Error() {
				t.Errorf("classify changed the message: %q, want %q", got, tc.err)
			}
			if r := errorReason(reasonCatalog, got); r != tc.wantReason {
				t.Errorf("errorReason = %q, want %q", r, tc.wantReason)
			}
		})
	}
}

// alertText stands for crypto/tls's unexported alert type, whose Error is
// its text.
type alertText string

func (a alertText) Error() string { return string(a) }

// TestStatusJSON: /debug/registryz shows the read health next to the Consul
// view, and never a zero time (0001-01-01) for a read that did not happen.
func TestStatusJSON(t *testing.T) {
	reg, err := New(Config{Name: "c", Address: "127.0.0.1:8501", TLS: TLSConfig{InsecureSkipVerify: true}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(reg.Status())
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{`"address":"https://127.0.0.1:8501"`, `"up":false`, `"errors":0`, `"aclFiltered":false`, `"watched":0`} {
		if !strings.Contains(got, want) {
			t.Errorf("Status JSON %s lacks %s", got, want)
		}
	}
	for _, unwanted := range []string{"0001-01-01", "lastSuccess", "lastErrorTime", "lastError"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("Status JSON %s shows %s before any read", got, unwanted)
		}
	}
}

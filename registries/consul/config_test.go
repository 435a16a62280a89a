package consul

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"
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

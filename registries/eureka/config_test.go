package eureka

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		cfg  Config
		want string // a part of the error; "" valid
	}{
		"defaults":                {cfg: Config{Name: "eureka"}},
		"several servers":         {cfg: Config{Name: "e", Servers: []string{"http://e1:8761/eureka/", "https://e2:8761/eureka"}}},
		"name":                    {cfg: Config{Name: "Eureka"}, want: "name: \"Eureka\" must be a DNS-1123 label"},
		"credentials in the URL":  {cfg: Config{Name: "e", Servers: []string{"http://u:s3cret@e1:8761/eureka/"}}, want: "servers[0]: credentials in the URL are refused"},
		"scheme":                  {cfg: Config{Name: "e", Servers: []string{"e1:8761"}}, want: "servers[0]"},
		"query":                   {cfg: Config{Name: "e", Servers: []string{"http://e1/eureka/?x=1"}}, want: "servers[0]"},
		"ca without https":        {cfg: Config{Name: "e", TLS: TLSConfig{CAFile: "ca.pem"}}, want: "tls.caFile: is set but no server is https://"},
		"username alone":          {cfg: Config{Name: "e", Username: "u"}, want: "username"},
		"password alone":          {cfg: Config{Name: "e", PasswordFile: pw}, want: "username"},
		"username and password":   {cfg: Config{Name: "e", Username: "u", PasswordFile: pw}},
		"bad glob":                {cfg: Config{Name: "e", Services: []string{"["}}, want: "services[0]"},
		"interval":                {cfg: Config{Name: "e", Interval: time.Millisecond}, want: "interval: 1ms is under 1s"},
		"relist under interval":   {cfg: Config{Name: "e", Interval: 10 * time.Second, RelistInterval: 5 * time.Second}, want: "relistInterval"},
		"request timeout":         {cfg: Config{Name: "e", RequestTimeout: 2 * time.Minute}, want: "requestTimeout"},
		"negative reconnectGrace": {cfg: Config{Name: "e", ReconnectGrace: -time.Second}, want: "reconnectGrace"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.withDefaults().validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

func TestNewReadsThePasswordFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(Config{Name: "e", Username: "u", PasswordFile: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "passwordFile") {
		t.Errorf("missing password file: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	if _, err := New(Config{Name: "e", Username: "u", PasswordFile: empty}); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty password file: %v", err)
	}
	notPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(notPEM, []byte("no"), 0o600)
	if _, err := New(Config{Name: "e", Servers: []string{"https://e1/eureka/"}, TLS: TLSConfig{CAFile: notPEM}}); err == nil || !strings.Contains(err.Error(), "tls.caFile") {
		t.Errorf("CA file without a certificate: %v", err)
	}
}

// TestBlockZeroDurationRefused: a duration the block gives as zero is
// refused, not replaced by its default; reconnectGrace: 0s turns the grace
// off.
func TestBlockZeroDurationRefused(t *testing.T) {
	for key, want := range map[string]string{"interval": "interval", "relistInterval": "relistInterval", "requestTimeout": "requestTimeout", "reconnectGrace": ""} {
		var b Block
		if err := json.Unmarshal([]byte(`{"`+key+`":"0s"}`), &b); err != nil {
			t.Fatal(err)
		}
		b.Default()
		errs := b.Validate()
		switch {
		case want == "" && len(errs) != 0:
			t.Errorf("%s: 0s: %v", key, errs)
		case want != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), want)):
			t.Errorf("%s: 0s: errors %v, want one naming it", key, errs)
		}
	}
	var b Block
	b.Default()
	if errs := b.Validate(); len(errs) != 0 || b.ReconnectGrace.Duration != DefaultReconnectGrace {
		t.Errorf("defaults: %v, reconnectGrace %s", errs, b.ReconnectGrace)
	}
}

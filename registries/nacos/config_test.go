package nacos

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/test/harness"
)

// decodeBlock decodes a nacos block as the command does: strict YAML, then
// Default.
func decodeBlock(t *testing.T, yaml string) *Block {
	t.Helper()
	b := Type().NewConfig().(*Block)
	if err := strict.Unmarshal([]byte(yaml), b); err != nil {
		t.Fatalf("decode %q: %v", yaml, err)
	}
	b.Default()
	return b
}

// TestBlockDefaults: an empty block is valid and takes the README's
// defaults.
func TestBlockDefaults(t *testing.T) {
	t.Setenv(EnvUsername, "")
	t.Setenv(EnvPassword, "")
	b := decodeBlock(t, "{}")
	if errs := b.Validate(); len(errs) > 0 {
		t.Fatalf("Validate() = %v", errs)
	}
	if b.RelistInterval.Duration != 10*time.Second || b.ReconcileInterval.Duration != 5*time.Minute {
		t.Errorf("intervals = %s, %s; want 10s, 5m", b.RelistInterval, b.ReconcileInterval)
	}
	c := b.config("n", nil).withDefaults(func(string) string { return "" })
	if strings.Join(c.Addresses, ",") != "127.0.0.1:8848" || c.ContextPath != "/nacos" ||
		strings.Join(c.Namespaces, ",") != "public" || strings.Join(c.Groups, ",") != "DEFAULT_GROUP" ||
		c.CacheDir != filepath.Join(os.TempDir(), "meshbridge-nacos", "n") {
		t.Errorf("defaults = %+v", c)
	}
	reg, err := b.New("n", nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	st := reg.(*Registry).Status()
	if strings.Join(st.GRPCAddresses, ",") != "127.0.0.1:9848" {
		t.Errorf("gRPC addresses = %v, want the HTTP port + 1000", st.GRPCAddresses)
	}
	if b.Dubbo.IsEnabled() || b.Dubbo.Mode != dubbo.ModeBoth || c.Dubbo.Mode != dubbo.ModeBoth {
		t.Errorf("dubbo = %+v, want disabled, mode both", b.Dubbo)
	}
	if Type().HostTemplate != "{{.Service}}.{{.Group}}.{{.Namespace}}.nacos" {
		t.Errorf("host template = %q", Type().HostTemplate)
	}
}

// TestBlockValidate: every invalid key is reported, named relative to the
// block.
func TestBlockValidate(t *testing.T) {
	t.Setenv(EnvUsername, "")
	t.Setenv(EnvPassword, "")
	for _, tc := range []struct {
		yaml string
		want []string // substrings, one error each
	}{
		{"addresses: [nacos.example]", []string{"addresses[0]: \"nacos.example\" is not host:port"}},
		{"addresses: ['http://a:8848']", []string{"addresses[0]: \"http://a:8848\": write host:port without a scheme"}},
		{"addresses: ['a:65000']", []string{"addresses[0]: \"a:65000\": its gRPC port 66000"}},
		{"{addresses: ['a:65000'], grpcPort: 9848}", nil},
		{"grpcPort: 70000", []string{"grpcPort: 70000 is outside 0-65535"}},
		{"contextPath: nacos", []string{"contextPath: \"nacos\" must start with \"/\""}},
		{"namespaces: [public, 'a b']", []string{"namespaces[1]: \"a b\" must be"}},
		{"namespaces: ['', public]", []string{"namespaces[1]: \"public\" is listed twice"}},
		{"groups: [G, 'x@@y']", []string{"groups[1]: \"x@@y\" must be"}},
		{"services: ['[']", []string{"services[0]: \"[\" is not a valid glob"}},
		{"{username: u, password: p, passwordFile: /f}", []string{"password and passwordFile: set one of them"}},
		{"password: p", []string{"username: required with a password"}},
		{"username: u", []string{"password: required with username \"u\""}},
		{"accessKey: ak", []string{"secretKey: required with accessKey"}},
		{"secretKey: sk", []string{"accessKey: required with a secret key"}},
		{"tls: {certFile: c.pem}", []string{"tls.certFile and tls.keyFile: set both or neither"}},
		{"relistInterval: 0s", []string{"relistInterval: 0s is below the minimum 1s"}},
		{"reconcileInterval: 10ms", []string{"reconcileInterval: 10ms is below the minimum 1s"}},
		{"dubbo: {enabled: true}", nil},
		{"dubbo: {enabled: true, mode: interface, dropParams: [owner], interfaceHostTemplate: '{{.Interface}}.rpc', " +
			"applicationHostTemplate: '{{.Application}}.app'}", nil},
		{"dubbo: {enabled: true, mode: all}", []string{`dubbo.mode: "all" is not one of interface, application, both`}},
		{"dubbo: {dropParams: [owner, '']}", []string{"dubbo.dropParams[1]: empty"}},
	} {
		errs := decodeBlock(t, tc.yaml).Validate()
		if len(errs) != len(tc.want) {
			t.Errorf("%s: Validate() = %v, want %d errors %q", tc.yaml, errs, len(tc.want), tc.want)
			continue
		}
		for i, want := range tc.want {
			if !strings.Contains(errs[i].Error(), want) {
				t.Errorf("%s: error %d = %q, want it to contain %q", tc.yaml, i, errs[i], want)
			}
		}
	}
}

// TestDubboHostTemplates: the block's Dubbo host templates name the
// registry's Dubbo services (package dubbo rule 10), the defaults when it
// sets none; a template that does not compile is refused under its key,
// whether or not dubbo.enabled is true.
func TestDubboHostTemplates(t *testing.T) {
	for _, tc := range []struct {
		yaml               string
		wantIface, wantApp string // the hosts of a.B and of application app
		wantErr            string
	}{
		{yaml: "{}", wantIface: "a.B.dubbo", wantApp: "app.dubbo"},
		{yaml: "dubbo: {enabled: true}", wantIface: "a.B.dubbo", wantApp: "app.dubbo"},
		{
			yaml:      "dubbo: {enabled: true, interfaceHostTemplate: '{{.Interface}}.rpc', applicationHostTemplate: '{{.Application}}.{{.Namespace}}.app'}",
			wantIface: "a.B.rpc", wantApp: "app.public.app",
		},
		{yaml: "dubbo: {interfaceHostTemplate: '{{.Interfac}}'}", wantErr: "dubbo.interfaceHostTemplate: "},
		{yaml: "dubbo: {enabled: true, applicationHostTemplate: '{{'}", wantErr: "dubbo.applicationHostTemplate: "},
	} {
		b := decodeBlock(t, tc.yaml)
		if errs := b.Validate(); tc.wantErr != "" {
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.wantErr) {
				t.Errorf("%s: Validate() = %v, want one error starting %q", tc.yaml, errs, tc.wantErr)
			}
			continue
		} else if len(errs) > 0 {
			t.Fatalf("%s: Validate() = %v", tc.yaml, errs)
		}
		reg, err := b.New("n", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		d := reg.(*Registry).dubbo
		iface := d.Named(dubbo.Identity{Interface: "a.B"}, "providers:a.B::", "public", nil)
		app := d.Named(dubbo.Identity{Application: "app"}, "app", "public", nil)
		if iface.Host != tc.wantIface || app.Host != tc.wantApp {
			t.Errorf("%s: hosts %q, %q; want %q, %q", tc.yaml, iface.Host, app.Host, tc.wantIface, tc.wantApp)
		}
	}
}

// TestCredentialsFromEnvironment: with no username and no password
// configured, NACOS_USERNAME and NACOS_PASSWORD are used; the password stays
// out of Status and errors.
func TestCredentialsFromEnvironment(t *testing.T) {
	t.Setenv(EnvUsername, "env-user")
	t.Setenv(EnvPassword, "env-s3cret")
	reg, err := New(Config{Name: "env"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if reg.secrets.username != "env-user" || reg.secrets.password != "env-s3cret" {
		t.Errorf("credentials = %q/%q, want the environment's", reg.secrets.username, reg.secrets.password)
	}
	st, _ := json.Marshal(reg.Status())
	if strings.Contains(string(st), "env-s3cret") {
		t.Errorf("Status shows the password: %s", st)
	}
	// A configured username takes no password from the environment.
	if _, err := New(Config{Name: "env", Username: "u"}); err == nil || strings.Contains(err.Error(), "env-s3cret") {
		t.Errorf("New(username without password) = %v, want an error without the password", err)
	}
}

// TestRedacted: /debug/config never shows the password or secret key.
func TestRedacted(t *testing.T) {
	b := decodeBlock(t, "{username: u, password: pw, accessKey: ak, secretKey: sk}")
	r := b.Redacted().(*Block)
	if r.Password != registries.Redacted || r.SecretKey != registries.Redacted || r.Username != "u" || r.AccessKey != "ak" {
		t.Errorf("Redacted() = %+v", r)
	}
	if b.Password != "pw" {
		t.Errorf("Redacted changed the block")
	}
}

// TestFiles: every credential and TLS file is checked at load; cacheDir is
// only resolved.
func TestFiles(t *testing.T) {
	b := decodeBlock(t, "{}")
	got := map[string]registries.File{}
	for _, f := range b.Files() {
		got[f.Key] = f
	}
	for key, pem := range map[string]bool{"passwordFile": false, "secretKeyFile": false, "tls.caFile": true, "tls.certFile": true, "tls.keyFile": true} {
		if f, ok := got[key]; !ok || !f.MustExist || f.PEM != pem {
			t.Errorf("Files()[%s] = %+v, want MustExist, PEM %v", key, f, pem)
		}
	}
	if f := got["cacheDir"]; f.Path == nil || f.MustExist {
		t.Errorf("Files()[cacheDir] = %+v, want resolved, not required", f)
	}
}

// TestNewReadsFiles: New reads the secret and TLS files itself and reports
// an unreadable one naming its key (nacos-sdk-go would log.Fatalf on an
// unreadable client certificate and drop an unreadable CA file); with TLS
// the login goes over https and the SDK's TLS settings are appointed.
func TestNewReadsFiles(t *testing.T) {
	dir := t.TempDir()
	ca := harness.NewCA(t, "nacos-test")
	client := ca.ClientCert(t, "meshbridge")
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("file-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing client certificate", Config{TLS: TLSConfig{CertFile: filepath.Join(dir, "nope.pem"), KeyFile: client.KeyFile}}, "tls.certFile"},
		{"certificate and key that do not match", Config{TLS: TLSConfig{CertFile: client.CertFile, KeyFile: ca.CertFile}}, "tls.certFile"},
		{"missing CA", Config{TLS: TLSConfig{CAFile: filepath.Join(dir, "nope.pem")}}, "tls.caFile: open"},
		{"CA without a certificate", Config{TLS: TLSConfig{CAFile: notPEM}}, "tls.caFile: " + notPEM + " holds no PEM certificate"},
		{"missing password file", Config{Username: "u", PasswordFile: filepath.Join(dir, "nope")}, "passwordFile: open"},
	} {
		tc.cfg.Name = "files"
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	reg, err := New(Config{Name: "files", Username: "u", PasswordFile: pw,
		TLS: TLSConfig{CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if reg.secrets.password != "file-s3cret" {
		t.Errorf("password from file = %q", reg.secrets.password)
	}
	if sc := reg.serverConfigs()[0]; sc.Scheme != "https" || sc.GrpcPort != 9848 || sc.ContextPath != "/nacos" {
		t.Errorf("server config = %+v, want https, gRPC port 9848, /nacos", sc)
	}
	tc := reg.clientConfig("public").TLSCfg
	if !tc.Appointed || !tc.Enable || tc.CaFile != ca.CertFile || tc.CertFile != client.CertFile || tc.TrustAll {
		t.Errorf("SDK TLS config = %+v, want appointed, enabled, our files, verifying", tc)
	}
	if plain := reg.clientConfig("public"); plain.NamespaceId != "public" || !plain.NotLoadCacheAtStart {
		t.Errorf("client config = %+v", plain)
	}
	noTLS, err := New(Config{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if tc := noTLS.clientConfig("public").TLSCfg; !tc.Appointed || tc.Enable {
		t.Errorf("SDK TLS config without TLS = %+v, want appointed (the environment cannot turn it on), disabled", tc)
	}
}

package nacos

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// fakeNacosLoginServer serves Nacos's login (POST
// /nacos/v1/auth/users/login) for one user over TLS, which the test's Nacos
// server does not serve its HTTP API over. Every other path is a 404. It
// records each login form it gets.
type fakeNacosLoginServer struct {
	*httptest.Server
	user, password, token string

	mu     sync.Mutex
	logins []loginAttempt
}

type loginAttempt struct {
	username, password string
	tls                bool
}

func newFakeNacosLoginServer(t *testing.T, user, password string, tlsCfg *tls.Config) *fakeNacosLoginServer {
	f := &fakeNacosLoginServer{user: user, password: password, token: "fake-access-token-93f1"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /nacos/v1/auth/users/login", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.logins = append(f.logins, loginAttempt{r.PostForm.Get("username"), r.PostForm.Get("password"), r.TLS != nil})
		f.mu.Unlock()
		if r.PostForm.Get("username") != f.user || r.PostForm.Get("password") != f.password {
			// Nacos 2.x's answer to a wrong user or password.
			http.Error(w, "unknown user!", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"accessToken": f.token, "tokenTtl": 18000, "globalAdmin": true})
	})
	f.Server = httptest.NewUnstartedServer(mux)
	if tlsCfg != nil {
		f.Server.TLS = tlsCfg
		f.Server.StartTLS()
	} else {
		f.Server.Start()
	}
	t.Cleanup(f.Close)
	return f
}

func (f *fakeNacosLoginServer) attempts() []loginAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.logins)
}

func (f *fakeNacosLoginServer) address() string { return f.Listener.Addr().String() }

// checkNoSecret fails the test when any secret shows in the registry's log,
// its Status, its Health or a snapshot's error (doc.go rule 11).
func checkNoSecret(t *testing.T, logs string, reg *Registry, rec *registrytest.Recorder, secrets ...string) {
	t.Helper()
	st, err := json.Marshal(reg.Status())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("secret %q in the log", s)
		}
		if strings.Contains(string(st), s) {
			t.Errorf("secret %q in Status: %s", s, st)
		}
		for _, snap := range rec.Snapshots() {
			if snap.Err != nil && strings.Contains(snap.Err.Error(), s) {
				t.Errorf("secret %q in a snapshot error: %v", s, snap.Err)
			}
		}
	}
}

// TestLoginCredentials: against a Nacos server with auth on, the registry
// logs in with the username and password and reads through the token it
// got (every request is refused without one), RAM signatures
// (AccessKey/SecretKey) along; neither the password, the secret key nor a
// token (a JWT, "eyJ...") shows in the (debug) log, Status or errors.
func TestLoginCredentials(t *testing.T) {
	p := harness.StartNacos(t, harness.WithNacosAuth())
	p.RegisterInstance(t, "", "", "web", "10.0.8.1", 80, 1, nil, true, true, true)
	waitListed(t, p, "", "", "web")
	const secretKey = "s3cret-key-5b2e"
	var logs harness.LockedBuffer
	reg, rec := runRegistry(t, Config{
		Addresses: []string{p.Address()}, Username: harness.NacosAdmin, Password: p.AdminPassword(),
		AccessKey: "LTAI-test-access-key", SecretKey: secretKey, // signs every request (RAM auth)
	}, &logs)
	rec.Eventually(t, "web through the token", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(key("public", "DEFAULT_GROUP", "web"))) == 1
	})
	harness.EventuallyTrue(t, waitTimeout, "the registry is up", func() bool { return reg.Health().Up })
	checkNoSecret(t, logs.String(), reg, rec, p.AdminPassword(), secretKey, "eyJhbGciOi")
}

// TestWrongPassword: a login the real server refuses takes the registry
// down within 15 s with a clear, permanent error naming the user, counted
// as a refused login, and nothing is read (every request needs a token);
// the password appears nowhere.
func TestWrongPassword(t *testing.T) {
	p := harness.StartNacos(t, harness.WithNacosAuth())
	p.RegisterInstance(t, "", "", "web", "10.0.8.2", 80, 1, nil, true, true, true)
	waitListed(t, p, "", "", "web")
	const password = "Wr0ng-Passw0rd-7731"
	var logs harness.LockedBuffer
	const name = "nacos-wrong-password"
	start := time.Now()
	reg, rec := runRegistry(t, Config{
		Name: name, Addresses: []string{p.Address()}, Username: harness.NacosAdmin, Password: password,
	}, &logs)
	harness.EventuallyTrue(t, 15*time.Second, "the registry is down, the refused login counted", func() bool {
		h := reg.Health()
		return !h.Up && h.LastError != "" && counted(name, reasonLogin)+counted(name, reasonForbidden) > 0
	})
	t.Logf("start → down: %s", time.Since(start).Round(time.Millisecond))
	h := reg.Health()
	if !strings.Contains(h.LastError, `user "nacos"`) && !strings.Contains(h.LastError, "403") {
		t.Errorf("Health = %+v, want an error naming the user or the server's refusal", h)
	}
	if !strings.Contains(logs.String(), "Cannot read the registry") && !strings.Contains(logs.String(), "Registry read failed") {
		t.Errorf("the refused login was not logged as the registry going down:\n%s", logs.String())
	}
	for _, s := range rec.Snapshots() {
		if s.Err == nil {
			t.Errorf("a snapshot without an error while every request is refused: %+v", s)
		}
	}
	checkNoSecret(t, logs.String(), reg, rec, password)
}

// TestLoginOverTLS: with TLS set the login goes over https and verifies the
// server against tls.caFile (nacos-sdk-go's own HTTP agent would skip
// verification without a CA file: doc.go rule 1).
func TestLoginOverTLS(t *testing.T) {
	ca := harness.NewCA(t, "nacos-login")
	server := ca.ServerCert(t, "127.0.0.1")
	login := newFakeNacosLoginServer(t, "nacos", "pw", &tls.Config{Certificates: []tls.Certificate{server.TLSCertificate(t)}})
	reg, _ := runRegistry(t, Config{
		Addresses: []string{login.address()}, GRPCPort: harness.FreePort(t), Username: "nacos", Password: "pw",
		TLS: TLSConfig{CAFile: ca.CertFile},
	}, nil)
	harness.EventuallyTrue(t, waitTimeout, "a login over TLS", func() bool {
		a := login.attempts()
		return len(a) > 0 && a[0].tls && a[0].password == "pw"
	})
	if err, answered := reg.agent.login(); !answered || err != nil {
		t.Errorf("login = %v (answered %v), want a success", err, answered)
	}
}

// TestRealServerOverTLS: against the real server serving its HTTP API and
// its gRPC API over TLS only, with auth on, the registry logs in over https
// and reads over gRPC with TLS, verifying the server against tls.caFile; a
// registry that does not trust the server's CA reads nothing and is down with
// an error naming the certificate, not silently connected in plaintext.
func TestRealServerOverTLS(t *testing.T) {
	ca := harness.NewCA(t, "nacos-server")
	p := harness.StartNacos(t, harness.WithNacosAuth(), harness.WithNacosTLS(ca.ServerCert(t, "127.0.0.1"), ca))
	p.RegisterInstance(t, "", "", "web", "10.0.8.3", 80, 1, nil, true, true, true)
	waitListed(t, p, "", "", "web")
	var logs harness.LockedBuffer
	reg, rec := runRegistry(t, Config{
		Addresses: []string{p.Address()}, Username: harness.NacosAdmin, Password: p.AdminPassword(),
		TLS: TLSConfig{CAFile: ca.CertFile},
	}, &logs)
	rec.Eventually(t, "web over TLS", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(key("public", "DEFAULT_GROUP", "web"))) == 1
	})
	harness.EventuallyTrue(t, waitTimeout, "the registry is up", func() bool { return reg.Health().Up })
	checkNoSecret(t, logs.String(), reg, rec, p.AdminPassword(), "eyJhbGciOi")

	const name = "nacos-untrusted"
	other := harness.NewCA(t, "other")
	untrusted, rec2 := runRegistry(t, Config{
		Name: name, Addresses: []string{p.Address()}, Username: harness.NacosAdmin, Password: p.AdminPassword(),
		TLS: TLSConfig{CAFile: other.CertFile},
	}, nil)
	harness.EventuallyTrue(t, 15*time.Second, "the registry that does not trust the server is down", func() bool {
		h := untrusted.Health()
		return !h.Up && strings.Contains(h.LastError, "certificate")
	})
	t.Logf("untrusted: %s", untrusted.Health().LastError)
	for _, s := range rec2.Snapshots() {
		if s.Err == nil {
			t.Errorf("a snapshot without an error from a server the registry does not trust: %+v", s)
		}
	}
}

// fakeNacos1Server answers like a Nacos 1.x server, which the tests do not
// run: its HTTP API reports version 1.4.1 and it has no gRPC port.
func fakeNacos1Server(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /nacos/v1/console/server/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"standalone_mode":"standalone","function_mode":null,"version":"1.4.1"}`))
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestNacos1Server: a server without a gRPC port whose HTTP API says Nacos
// 1.x gets one permanent error per group naming its address and version, in
// Health and the Sink, instead of endless silent reconnects (doc.go rule
// 10).
func TestNacos1Server(t *testing.T) {
	s := fakeNacos1Server(t)
	addr := s.Listener.Addr().String()
	reg, rec := runRegistry(t, Config{Addresses: []string{addr}, GRPCPort: harness.FreePort(t), RelistInterval: time.Second}, nil)
	harness.EventuallyTrue(t, waitTimeout, "the 1.x server is reported", func() bool {
		return strings.Contains(reg.Health().LastError, "1.4.1")
	})
	h := reg.Health()
	if h.Up || !strings.Contains(h.LastError, "Nacos at "+addr+" is version 1.4.1") {
		t.Errorf("Health = %+v, want down with the address and version", h)
	}
	snaps := rec.Snapshots()
	if len(snaps) != 1 || snaps[0].Service.Name != "" || !registries.IsPermanent(snaps[0].Err) ||
		!strings.Contains(snaps[0].Err.Error(), addr) {
		t.Fatalf("snapshots = %+v, want one permanent registry-wide error naming %s", snaps, addr)
	}
	// It stays one snapshot per run of failures while the registry retries.
	harness.EventuallyTrue(t, waitTimeout, "a second attempt", func() bool { return reg.Health().Errors >= 2 })
	if n := len(rec.Snapshots()); n != 1 {
		t.Errorf("%d snapshots after a second attempt, want still 1", n)
	}
}

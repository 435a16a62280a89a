package consul

import (
	"slices"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestTLSServerVerified: against an agent serving its API over HTTPS only
// (no client certificate required), a scheme-less address with a CA — from
// tls.caFile or from CONSUL_CACERT, as Consul's CLI reads it — goes HTTPS and
// follows services; a registry trusting another CA is refused with a
// permanent registry-wide error and serves nothing; plain HTTP to the HTTPS
// port is refused likewise.
func TestTLSServerVerified(t *testing.T) {
	ca := harness.NewCA(t, "consul-ca")
	c := harness.StartConsul(t, harness.WithConsulTLS(ca, false))
	node := c.Node()
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 8080)

	t.Run("caFile on a scheme-less address", func(t *testing.T) {
		reg, rec := runRegistry(t, Config{Address: c.Address(), TLS: TLSConfig{CAFile: ca.CertFile}})
		rec.Eventually(t, "Synced with web over HTTPS", func(st registrytest.State) bool {
			return st.Synced == 1 && slices.Equal(st.IDs("web"), []string{node + "/web-1"})
		})
		if st := reg.Status(); !strings.HasPrefix(st.Address, "https://") || !st.Up {
			t.Errorf("Status = %+v, want an https:// address and up", st)
		}
	})

	t.Run("CONSUL_CACERT on a scheme-less address", func(t *testing.T) {
		t.Setenv("CONSUL_CACERT", ca.CertFile)
		_, rec := runRegistry(t, Config{Address: c.Address()})
		rec.Eventually(t, "Synced with web over HTTPS", func(st registrytest.State) bool {
			return st.Synced == 1 && slices.Equal(st.IDs("web"), []string{node + "/web-1"})
		})
	})

	t.Run("another CA is refused", func(t *testing.T) {
		other := harness.NewCA(t, "other-ca")
		reg, rec := runRegistry(t, Config{Name: "wrong-ca", Address: c.Address(), TLS: TLSConfig{CAFile: other.CertFile}})
		expectRefused(t, reg, rec, "certificate signed by unknown authority")
		if n := counted("wrong-ca", reasonTLS); n == 0 {
			t.Errorf("meshbridge_registry_errors_total{reason=tls} = 0, want the refusals counted")
		}
	})

	t.Run("plain HTTP to the HTTPS port is refused", func(t *testing.T) {
		reg, rec := runRegistry(t, Config{Name: "plain", Address: "http://" + c.Address()})
		expectRefused(t, reg, rec, "HTTP request to an HTTPS server")
	})
}

// TestTLSMutual: against an agent with tls.https.verify_incoming, a
// registry presenting a client certificate of the agent's CA follows
// services; one without a client certificate is refused with a permanent
// registry-wide error and serves nothing.
func TestTLSMutual(t *testing.T) {
	ca := harness.NewCA(t, "consul-ca")
	c := harness.StartConsul(t, harness.WithConsulTLS(ca, true))
	node := c.Node()
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 8080)

	t.Run("client certificate", func(t *testing.T) {
		client := ca.ClientCert(t, "meshbridge", "spiffe://cluster.local/ns/meshbridge/sa/meshbridge")
		_, rec := runRegistry(t, Config{Address: c.Address(),
			TLS: TLSConfig{CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}})
		rec.Eventually(t, "Synced with web over mTLS", func(st registrytest.State) bool {
			return st.Synced == 1 && slices.Equal(st.IDs("web"), []string{node + "/web-1"})
		})
		registerPassing(t, c, "web", "web-2", "10.0.0.2", 8080)
		rec.Eventually(t, "web-2 is seen", func(st registrytest.State) bool {
			return slices.Equal(st.IDs("web"), []string{node + "/web-1", node + "/web-2"})
		})
	})

	t.Run("no client certificate is refused", func(t *testing.T) {
		reg, rec := runRegistry(t, Config{Name: "no-cert", Address: c.Address(), TLS: TLSConfig{CAFile: ca.CertFile}})
		// TLS 1.3 alert certificate_required; bad_certificate under TLS 1.2.
		expectRefused(t, reg, rec, "tls: certificate required", "tls: bad certificate")
	})
}

// expectRefused waits for the registry-wide error snapshot and checks that
// it is permanent and mentions one of want, that nothing else was emitted,
// and that the registry reports itself down with that error.
func expectRefused(t *testing.T, reg *Registry, rec *registrytest.Recorder, want ...string) {
	t.Helper()
	rec.Eventually(t, "a registry-wide error snapshot", func(st registrytest.State) bool { return len(st.All) > 0 })
	waitFor(t, "a few failed reads", func() bool { return reg.Health().Errors >= 2 })
	snaps := rec.Snapshots()
	if len(snaps) != 1 || snaps[0].Service.Name != "" || snaps[0].Err == nil {
		t.Fatalf("snapshots = %+v, want exactly one registry-wide error (empty Service.Name)", snaps)
	}
	err := snaps[0].Err
	t.Logf("refused: %v", err)
	mentions := func(s string) bool {
		return slices.ContainsFunc(want, func(w string) bool { return strings.Contains(s, w) })
	}
	if !registries.IsPermanent(err) || !mentions(err.Error()) {
		t.Errorf("Err = %v (permanent %v), want a permanent error mentioning %q", err, registries.IsPermanent(err), want)
	}
	synced := rec.State().Synced
	if synced != 0 {
		t.Errorf("Synced called; want nothing synced while refused")
	}
	if h := reg.Health(); h.Up || !mentions(h.LastError) || h.LastErrorTime.IsZero() {
		t.Errorf("Health = %+v, want down with the last error", h)
	}
}

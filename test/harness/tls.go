package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certValidity is how long test certificates are valid: from an hour ago
// (clock skew between processes) to a day from now.
const certValidity = 24 * time.Hour

// CA is a certificate authority made for one test: an ECDSA P-256 key and a
// self-signed CA certificate, written as PEM to CertFile.
type CA struct {
	// Name is the CA certificate's common name.
	Name string
	// CertPEM is the CA certificate, PEM-encoded.
	CertPEM []byte
	// CertFile is the path of CertPEM on disk (in the test's temp dir).
	CertFile string

	cert *x509.Certificate
	key  crypto.Signer
	dir  string
}

// KeyPair is a certificate issued by a CA and its private key, PEM-encoded
// and written to files in the test's temp dir.
type KeyPair struct {
	CertPEM  []byte
	KeyPEM   []byte // PKCS #8
	CertFile string
	KeyFile  string
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
}

// TLSCertificate returns the pair as a tls.Certificate, for a Go client or
// server configured in the test itself.
func (k *KeyPair) TLSCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(k.CertPEM, k.KeyPEM)
	if err != nil {
		t.Fatalf("key pair %s: %v", k.CertFile, err)
	}
	return c
}

// NewCA makes a CA named name, valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"meshbridge tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	dir := t.TempDir()
	ca := &CA{Name: name, cert: cert, key: key, dir: dir,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.CertFile = writeFile(t, dir, fileName(name)+"-ca.pem", ca.CertPEM)
	return ca
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ServerCert issues a server certificate (extended key usage serverAuth and
// clientAuth, as servers that also dial peers need) for hosts: each is an IP
// address (an IP SAN) or a DNS name (a DNS SAN); the first is the common
// name. Go, Envoy and Consul verify the SANs, never the common name.
func (ca *CA) ServerCert(t testing.TB, hosts ...string) *KeyPair {
	t.Helper()
	if len(hosts) == 0 {
		t.Fatal("ServerCert: at least one host is required")
	}
	tmpl := ca.leafTemplate(t, hosts[0])
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(t, tmpl)
}

// ClientCert issues a client certificate (extended key usage clientAuth)
// with commonName and uris as URI SANs, e.g.
// "spiffe://cluster.local/ns/default/sa/web" (each must parse as a URL).
func (ca *CA) ClientCert(t testing.TB, commonName string, uris ...string) *KeyPair {
	t.Helper()
	tmpl := ca.leafTemplate(t, commonName)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			t.Fatalf("ClientCert: URI SAN %q is not an absolute URL (%v)", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return ca.issue(t, tmpl)
}

func (ca *CA) leafTemplate(t testing.TB, commonName string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"meshbridge tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) *KeyPair {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("issue certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key: %v", err)
	}
	kp := &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}
	base := fileName(tmpl.Subject.CommonName) + "-" + leaf.SerialNumber.Text(16)[:8]
	kp.CertFile = writeFile(t, ca.dir, base+".pem", kp.CertPEM)
	kp.KeyFile = writeFile(t, ca.dir, base+"-key.pem", kp.KeyPEM)
	return kp
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("serial number: %v", err)
	}
	return n.Add(n, big.NewInt(1<<32)) // at least 8 hex digits, never 0
}

// fileName maps a common name to a safe file name part.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, s)
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	return p
}

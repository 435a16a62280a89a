package xds

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM certificate and key signed by the CA; server
// certificates are valid for 127.0.0.1.
func (ca *testCA) issue(t *testing.T, name string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	return ca.sign(t, tmpl)
}

// issueWorkload returns a client certificate shaped like an Istio workload
// certificate: an empty subject, the identity in a URI SAN, plus dnsNames.
func (ca *testCA) issueWorkload(t *testing.T, spiffeID string, dnsNames ...string) tls.Certificate {
	t.Helper()
	id, err := url.Parse(spiffeID)
	if err != nil {
		t.Fatal(err)
	}
	crt, key := ca.sign(t, &x509.Certificate{
		URIs: []*url.URL{id}, DNSNames: dnsNames,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// sign completes tmpl (serial, validity, key usage), signs it with a new
// key and returns PEM certificate and key.
func (ca *testCA) sign(t *testing.T, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// writeFile replaces path atomically, as a Secret update does.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serveTLS serves the gRPC health service with r's TLS on 127.0.0.1.
func serveTLS(t *testing.T, r *tlsReloader) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(r.ServerConfig())))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// call makes one RPC with a client trusting roots and presenting cert (if
// any) and returns its error.
func call(t *testing.T, addr string, roots []byte, cert *tls.Certificate) error {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestXDSTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	crt, key := serverCA.issue(t, "meshbridge", true)
	writeFile(t, certFile, crt)
	writeFile(t, keyFile, key)
	writeFile(t, caFile, clientCA.pem)
	ccrt, ckey := clientCA.issue(t, "client", false)
	clientCert, err := tls.X509KeyPair(ccrt, ckey)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Run("server TLS accepts a client that trusts its CA", func(t *testing.T) {
		r, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := call(t, serveTLS(t, r), serverCA.pem, nil); err != nil {
			t.Fatalf("TLS call: %v", err)
		}
	})
	t.Run("mTLS accepts a client certificate from the client CA", func(t *testing.T) {
		r, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := call(t, serveTLS(t, r), serverCA.pem, &clientCert); err != nil {
			t.Fatalf("mTLS call: %v", err)
		}
	})
	t.Run("mTLS refuses a client without a certificate", func(t *testing.T) {
		r, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := call(t, serveTLS(t, r), serverCA.pem, nil); err == nil {
			t.Fatal("a client without a certificate was served under mTLS")
		}
	})
	t.Run("rotated files serve new connections without a restart", func(t *testing.T) {
		r, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile}, log)
		if err != nil {
			t.Fatal(err)
		}
		r.recheck = 0
		addr := serveTLS(t, r)
		rotated := newTestCA(t, "rotated-ca")
		crt2, key2 := rotated.issue(t, "meshbridge", true)
		writeFile(t, keyFile, key2)
		writeFile(t, certFile, crt2)
		if err := call(t, addr, rotated.pem, nil); err != nil {
			t.Fatalf("after rotation, a client trusting the new CA failed: %v", err)
		}
		// A half-written rotation (key without its certificate) keeps the pair.
		_, key3 := rotated.issue(t, "meshbridge", true)
		writeFile(t, keyFile, key3)
		if err := call(t, addr, rotated.pem, nil); err != nil {
			t.Fatalf("a key without its certificate replaced the working pair: %v", err)
		}
	})
	t.Run("missing or mismatched files are a configuration error", func(t *testing.T) {
		if _, err := newTLSReloader(TLSConfig{CertFile: filepath.Join(dir, "nope"), KeyFile: keyFile}, log); err == nil {
			t.Error("a missing certificate file was accepted")
		}
		if _, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: keyFile}, log); err == nil {
			t.Error("a client CA file without certificates was accepted")
		}
	})
}

// TestDiscoveryServerOverMTLS: with Options.TLS naming a client CA, the ADS
// port answers a client presenting a certificate from that CA and refuses a
// client without one (rule 13).
func TestDiscoveryServerOverMTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	crt, key := serverCA.issue(t, "meshbridge", true)
	opts := &TLSConfig{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: filepath.Join(dir, "ca.crt")}
	writeFile(t, opts.CertFile, crt)
	writeFile(t, opts.KeyFile, key)
	writeFile(t, opts.ClientCAFile, clientCA.pem)

	src := &staticSource{}
	src.set(grpcService("a.example", 8080))
	srv := runServer(t, src, Options{Address: "127.0.0.1:0", TLS: opts, DebounceAfter: time.Millisecond})
	close(srv.ready)
	<-srv.Serving()

	dial := func(cert *tls.Certificate) *grpc.ClientConn {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(serverCA.pem)
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		cc, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ccrt, ckey := clientCA.issue(t, "client", false)
	clientCert, err := tls.X509KeyPair(ccrt, ckey)
	if err != nil {
		t.Fatal(err)
	}
	c := openSotW(t, dial(&clientCert))
	c.send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, Node: &core.Node{Id: "mtls-client"}})
	if resp := c.next(t); len(resp.Resources) != 1 {
		t.Fatalf("CDS over mTLS: %d clusters, want 1", len(resp.Resources))
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(dial(nil)).StreamAggregatedResources(ctx2)
	if err == nil {
		err = stream.Send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
		if err == nil {
			_, err = stream.Recv()
		}
	}
	if err == nil {
		t.Fatal("a client without a certificate was served under mTLS")
	}
}

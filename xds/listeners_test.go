package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// The listeners: a separate MCP port with server TLS next to an mTLS xDS
// port, who connected, refused TLS handshakes, stopping.

// testPKI is a server certificate for 127.0.0.1 from serverCA and a client
// CA, written to files.
type testPKI struct {
	serverCA, clientCA        *testCA
	certFile, keyFile, caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{
		serverCA: newTestCA(t, "server-ca"), clientCA: newTestCA(t, "client-ca"),
		certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), caFile: filepath.Join(dir, "ca.crt"),
	}
	crt, key := p.serverCA.issue(t, "meshbridge", true)
	writeFile(t, p.certFile, crt)
	writeFile(t, p.keyFile, key)
	writeFile(t, p.caFile, p.clientCA.pem)
	return p
}

// serverTLS is server TLS with the PKI's certificate.
func (p *testPKI) serverTLS() *TLSConfig {
	return &TLSConfig{CertFile: p.certFile, KeyFile: p.keyFile}
}

// mutualTLS is serverTLS requiring a client certificate from the client CA.
func (p *testPKI) mutualTLS() *TLSConfig {
	return &TLSConfig{CertFile: p.certFile, KeyFile: p.keyFile, ClientCAFile: p.caFile}
}

// clientCert is a client certificate from the client CA with subject
// CN=<name>.
func (p *testPKI) clientCert(t *testing.T, name string) *tls.Certificate {
	t.Helper()
	crt, key := p.clientCA.issue(t, name, false)
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// dial opens a gRPC connection to addr trusting the server CA and
// presenting cert, if any.
func (p *testPKI) dial(t *testing.T, addr string, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: certPool(p.serverCA.pem), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func certPool(pemCerts []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCerts)
	return pool
}

// firstResponse sends req on a new SotW stream of conn and returns the
// first response, or the error that ended the stream or kept it from
// opening, within wait. It closes conn: a refused connection would be
// retried.
func firstResponse(conn *grpc.ClientConn, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := ads.OpenSotW(ctx, conn, ads.Options{Manual: true})
	if err != nil {
		return nil, err
	}
	s.Receive(nil)
	// A failed send leaves Next the status that ended the stream.
	_ = s.Send(req)
	return s.Next(wait)
}

// TestMCPOnItsOwnListener: with MCPAddress, istiod (no client certificate:
// its xds:// client supports server TLS only) gets ServiceEntries from the
// server-TLS MCP port, which opens with the mTLS xDS port once the first
// full push is done; each port refuses the other's types naming the
// configuration key of the other.
func TestMCPOnItsOwnListener(t *testing.T) {
	pki := newTestPKI(t)
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	configs := &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}}
	configs.put(serviceEntry("a", "h-a"))
	mcpAddr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	var logs harness.LockedBuffer
	ts := runServer(t, src, Options{
		Address: "127.0.0.1:0", DebounceAfter: time.Millisecond, TLS: pki.mutualTLS(),
		MCP: mcpOptions(configs), MCPAddress: mcpAddr, MCPTLS: pki.serverTLS(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})

	// Bound at once (a taken port fails Run at once), served only after the
	// first full push (TestNoXDSBeforeReady checks no answer comes before).
	harness.EventuallyTrue(t, 10*time.Second, "the MCP port bound before ready", func() bool {
		return ts.MCPAddr() != nil && ts.MCPAddr().String() == mcpAddr
	})
	select {
	case <-ts.Serving():
		t.Fatal("the MCP port serves before the first full push")
	default:
	}
	close(ts.ready)
	<-ts.Serving()
	if got := ts.MCPAddr().String(); got != mcpAddr {
		t.Fatalf("MCPAddr() = %s, want %s", got, mcpAddr)
	}
	xdsAddr := ts.Addr().String()

	t.Run("istiod without a client certificate gets the ServiceEntries on the MCP port", func(t *testing.T) {
		c := openSotW(t, pki.dial(t, mcpAddr, nil))
		askLikeIstiod(c, seV1, true)
		resp := c.next(t)
		assertEqual(t, map[string]string{"mesh/a": "h-a"}, decodeMCP(t, resp))
		lines := logs.Messages("Connected xDS client")
		if len(lines) != 1 || !strings.Contains(lines[0], " listener=mcp ") || !strings.Contains(lines[0], " generator=mcp ") ||
			strings.Contains(lines[0], "uriSANs=") {
			t.Fatalf("want one Connected line for istiod, listener=mcp generator=mcp without a verified identity; log:\n%s", logs.String())
		}
	})
	t.Run("istiod without a client certificate is refused on the mTLS xDS port", func(t *testing.T) {
		resp, err := firstResponse(pki.dial(t, xdsAddr, nil), &discovery.DiscoveryRequest{Node: apiNode(), TypeUrl: seV1})
		if err == nil {
			t.Fatalf("served %s without a client certificate under mTLS", resp.GetTypeUrl())
		}
	})

	xdsClient := pki.dial(t, xdsAddr, pki.clientCert(t, "envoy"))
	t.Run("the xDS port serves xDS", func(t *testing.T) {
		c := openSotW(t, xdsClient)
		c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
		assertEqual(t, []string{clusterA}, resourceNames(t, c.next(t)))
	})
	refusals := map[string]struct {
		conn     *grpc.ClientConn
		typeURL  string
		mentions string
	}{
		"the xDS port refuses an Istio config type, naming mcp.address": {
			conn: xdsClient, typeURL: seV1, mentions: "mcp.address",
		},
		"the MCP port refuses CDS, naming xds.address": {
			conn: pki.dial(t, mcpAddr, nil), typeURL: resourcev3.ClusterType, mentions: "xds.address",
		},
		"the MCP port refuses a proto type it does not serve, naming xds.address": {
			conn: pki.dial(t, mcpAddr, nil), typeURL: secretType, mentions: "xds.address",
		},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			c := openSotW(t, tc.conn)
			c.send(&discovery.DiscoveryRequest{Node: apiNode(), TypeUrl: tc.typeURL})
			assertStatus(t, c.end(t), codes.FailedPrecondition, tc.mentions)
		})
	}
}

// TestRunStopsBothListenersGracefully: when ctx ends, open streams on both
// ports end cleanly, with a status and not a broken connection: OK from
// go-control-plane's MCP server, Canceled from meshbridge's ADS server
// (whose handlers are woken from Recv by their context, ads rule 12); Run
// returns nil and neither port accepts connections.
func TestRunStopsBothListenersGracefully(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	configs := &fakeConfigs{objs: map[model.ConfigKey]*model.Config{}}
	configs.put(serviceEntry("a", "h-a"))
	srv := NewDiscoveryServer(src, Options{
		Address: "127.0.0.1:0", DebounceAfter: time.Millisecond,
		MCP: mcpOptions(configs), MCPAddress: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	close(ready)
	<-srv.Serving()
	xdsAddr, mcpAddr := srv.Addr().String(), srv.MCPAddr().String()

	xdsStream := openSotW(t, rawClient(t, xdsAddr))
	xdsStream.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
	xdsStream.next(t)
	mcpStream := openSotW(t, rawClient(t, mcpAddr))
	askLikeIstiod(mcpStream, seV1, true)
	mcpStream.next(t)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(wait):
		t.Fatalf("Run did not return within %v of its context's end", wait)
	}
	if err := mcpStream.end(t); !errors.Is(err, io.EOF) {
		t.Errorf("MCP stream ended with %v, want a clean end (EOF)", err)
	}
	if err := xdsStream.end(t); status.Code(err) != codes.Canceled {
		t.Errorf("xDS stream ended with %v, want status Canceled", err)
	}
	for _, addr := range []string{xdsAddr, mcpAddr} {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			t.Errorf("%s accepts connections after Run returned", addr)
		}
	}
}

// TestOptionsThatCannotServeAreRefused: Run returns at once, before the
// registries are synced, for options that could never serve.
func TestOptionsThatCannotServeAreRefused(t *testing.T) {
	pki := newTestPKI(t)
	mcp := mcpOptions(&fakeConfigs{})
	tests := map[string]struct {
		opts     Options
		mentions string
	}{
		"an MCP address without MCP": {
			opts: Options{MCPAddress: "127.0.0.1:0"}, mentions: "mcp.enabled",
		},
		"MCP TLS without an MCP address": {
			opts: Options{MCP: mcp, MCPTLS: pki.serverTLS()}, mentions: "mcp.address",
		},
		"a client CA for MCP, which istiod cannot satisfy": {
			opts: Options{MCP: mcp, MCPAddress: "127.0.0.1:0", MCPTLS: pki.mutualTLS()}, mentions: "client certificate",
		},
		"MCP TLS files that do not load": {
			opts:     Options{MCP: mcp, MCPAddress: "127.0.0.1:0", MCPTLS: &TLSConfig{CertFile: pki.caFile, KeyFile: pki.keyFile}},
			mentions: "mcp.tls",
		},
		"xDS TLS files that do not load": {
			opts:     Options{TLS: &TLSConfig{CertFile: pki.certFile, KeyFile: pki.caFile}},
			mentions: "xds.tls",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opts.Address = "127.0.0.1:0"
			tc.opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			never := make(chan struct{})
			err := NewDiscoveryServer(&staticSource{}, tc.opts).Run(t.Context(), never)
			if err == nil || !strings.Contains(err.Error(), tc.mentions) {
				t.Fatalf("Run = %v, want an error mentioning %s", err, tc.mentions)
			}
		})
	}
}

// TestConnectedClientIsLoggedWithItsIdentity: a stream's first request logs
// the node, generator, peer address and, under mTLS, the URI and DNS SANs of
// the verified client certificate (an Istio workload certificate has an
// empty subject, which is left out); later requests log nothing; the
// stream's end is logged at debug.
func TestConnectedClientIsLoggedWithItsIdentity(t *testing.T) {
	pki := newTestPKI(t)
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	var logs harness.LockedBuffer
	ts := runServer(t, src, Options{
		Address: "127.0.0.1:0", DebounceAfter: time.Millisecond, TLS: pki.mutualTLS(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	close(ts.ready)
	<-ts.Serving()
	const spiffeID = "spiffe://cluster.local/ns/mesh/sa/echo"
	workload := pki.clientCA.issueWorkload(t, spiffeID, "echo.mesh.svc")

	c := openSotW(t, pki.dial(t, ts.Addr().String(), &workload))
	c.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.ClusterType, ResourceNames: []string{clusterA}})
	c.next(t)
	c.send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.ListenerType, ResourceNames: []string{"a.local:80"}})
	c.next(t)

	lines := logs.Messages("Connected xDS client")
	if len(lines) != 1 {
		t.Fatalf("%d Connected lines for one stream, want 1; log:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{
		" level=INFO ", " listener=xds ", " node=grpc-1 ", " generator=grpc ", " peer=127.0.0.1:",
		" uriSANs=[" + spiffeID + "] ", " dnsSANs=[echo.mesh.svc]",
	} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("Connected line lacks %q: %s", want, lines[0])
		}
	}
	if strings.Contains(lines[0], "subject=") {
		t.Errorf("Connected line names the empty subject: %s", lines[0])
	}

	c.cancel()
	eventually(t, "the stream's end logged", func() bool {
		closed := logs.Messages("Closed xDS stream")
		return len(closed) == 1 && strings.Contains(closed[0], " level=DEBUG ") && strings.Contains(closed[0], " node=grpc-1 ")
	})
}

// TestSubjectIsLoggedWhenPresent: a client certificate with a subject (and
// no SANs) is logged by its subject.
func TestSubjectIsLoggedWhenPresent(t *testing.T) {
	pki := newTestPKI(t)
	var logs harness.LockedBuffer
	ts := runServer(t, &staticSource{}, Options{
		Address: "127.0.0.1:0", DebounceAfter: time.Millisecond, TLS: pki.mutualTLS(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	close(ts.ready)
	<-ts.Serving()
	c := openSotW(t, pki.dial(t, ts.Addr().String(), pki.clientCert(t, "envoy-gateway")))
	c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ClusterType})
	c.next(t)
	lines := logs.Messages("Connected xDS client")
	if len(lines) != 1 || !strings.Contains(lines[0], ` subject="CN=envoy-gateway"`) {
		t.Fatalf("want one Connected line with subject=CN=envoy-gateway; log:\n%s", logs.String())
	}
}

// TestRefusedTLSHandshakesAreCountedAndLoggedOnce: a burst of refused
// handshakes on an mTLS port (no client certificate, a client that does not
// trust the server, plaintext) is counted one by one and logged once, with
// the peer address and the error; a connection closed before its first TLS
// record (a TCP probe) is neither.
func TestRefusedTLSHandshakesAreCountedAndLoggedOnce(t *testing.T) {
	pki := newTestPKI(t)
	var logs harness.LockedBuffer
	ts := runServer(t, &staticSource{}, Options{
		Address: "127.0.0.1:0", DebounceAfter: time.Millisecond, TLS: pki.mutualTLS(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	close(ts.ready)
	<-ts.Serving()
	addr := ts.Addr().String()
	refused := func() float64 { return testutil.ToFloat64(tlsHandshakeErrors.WithLabelValues(listenerXDS)) }
	before := refused()

	probe, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = probe.Close()
	eventually(t, "the probe seen", func() bool { return len(logs.Messages("Connection closed before a TLS handshake")) == 1 })

	// One handshake each: crypto/tls and raw TCP clients do not reconnect.
	handshake := func(cfg *tls.Config) {
		cfg.MinVersion, cfg.NextProtos = tls.VersionTLS12, []string{"h2"}
		conn, err := tls.Dial("tcp", addr, cfg)
		if err == nil {
			// TLS 1.3: the server checks the client's certificate after
			// the client finished; read its verdict.
			_, _ = conn.Read(make([]byte, 1))
			_ = conn.Close()
		}
	}
	const burst = 4
	handshake(&tls.Config{RootCAs: certPool(pki.serverCA.pem)}) // no client certificate
	handshake(&tls.Config{RootCAs: certPool(pki.serverCA.pem)})
	handshake(&tls.Config{RootCAs: certPool(pki.clientCA.pem)}) // does not trust the server
	plain, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := firstResponse(plain, &discovery.DiscoveryRequest{TypeUrl: resourcev3.ClusterType}); err == nil {
		t.Fatal("a plaintext client was served on the TLS port")
	}

	eventually(t, "every refused handshake counted", func() bool { return refused()-before >= burst })
	if got := refused() - before; got != burst {
		t.Errorf("%v refused handshakes counted, want %d", got, burst)
	}
	lines := logs.Messages("Refused TLS handshake")
	if len(lines) != 1 {
		t.Fatalf("%d lines for a burst of refused handshakes, want 1; log:\n%s", len(lines), logs.String())
	}
	for _, want := range []string{" level=WARN ", " listener=xds ", " peer=127.0.0.1:", " err=", " suppressed=0"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("refusal line lacks %q: %s", want, lines[0])
		}
	}
}

// TestRefusedHandshakeLogIsRateLimited: one line per handshakeLogEvery per
// listener, the next one saying how many were left out.
func TestRefusedHandshakeLogIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs harness.LockedBuffer
		before := testutil.ToFloat64(tlsHandshakeErrors.WithLabelValues("test"))
		w := watchHandshakes(insecure.NewCredentials(), "test", slog.New(slog.NewTextHandler(&logs, nil))).(*handshakeWatch)
		peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
		refusal := errors.New("tls: client didn't provide a certificate")
		for range 5 {
			w.failed(peer, refusal)
		}
		w.failed(peer, io.EOF) // a probe: not a refusal
		time.Sleep(handshakeLogEvery)
		w.failed(peer, refusal)

		lines := logs.Messages("Refused TLS handshake")
		if len(lines) != 2 || !strings.Contains(lines[0], " suppressed=0") || !strings.Contains(lines[1], " suppressed=4") {
			t.Fatalf("want 2 lines, suppressed=0 then suppressed=4; log:\n%s", logs.String())
		}
		if got := testutil.ToFloat64(tlsHandshakeErrors.WithLabelValues("test")) - before; got != 6 {
			t.Errorf("%v refusals counted, want 6", got)
		}
	})
}

// TestListenersWithoutGeneratorAreHintedOncePerNode: a node without
// GENERATOR: grpc that asks for a Listener by name (a proxyless gRPC client
// with a hand-written bootstrap) gets none, and is told why once, however
// often it asks or reconnects; an Envoy asking by wildcard is not.
func TestListenersWithoutGeneratorAreHintedOncePerNode(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80))
	var logs harness.LockedBuffer
	ts := runServer(t, src, Options{Address: "127.0.0.1:0", DebounceAfter: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	close(ts.ready)
	<-ts.Serving()
	const hint = "A client asked for Listeners by name without node metadata GENERATOR: grpc: it is served as an " +
		"Envoy, which gets Clusters and ClusterLoadAssignments only, so it gets no Listener; a proxyless gRPC client " +
		"needs GENERATOR: grpc in its bootstrap's node.metadata (meshbridge bootstrap writes it)"
	ask := func(names ...string) {
		c := openSotW(t, rawClient(t, ts.Addr().String()))
		c.send(&discovery.DiscoveryRequest{Node: envoyNode(), TypeUrl: resourcev3.ListenerType, ResourceNames: names})
		if got := len(c.next(t).GetResources()); got != 0 {
			t.Fatalf("an Envoy node got %d Listeners", got)
		}
	}
	ask() // wildcard: an Envoy
	if n := len(logs.Messages(hint)); n != 0 {
		t.Fatalf("a wildcard Listener request was hinted:\n%s", logs.String())
	}
	ask("a.local:80")
	ask("a.local:80") // the same node again, on a new stream
	eventually(t, "the hint logged", func() bool { return len(logs.Messages(hint)) > 0 })
	lines := logs.Messages(hint)
	if len(lines) != 1 || !strings.Contains(lines[0], " node=envoy-1 ") || !strings.Contains(lines[0], "a.local:80") {
		t.Fatalf("want one hint naming node envoy-1 and the Listener; log:\n%s", logs.String())
	}
}

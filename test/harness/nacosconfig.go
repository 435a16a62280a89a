package harness

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"path/filepath"
	"strconv"
)

// This file holds what starting the Nacos server needs outside a test (it
// takes no testing.TB): its ports and its JVM's arguments. StartNacos uses
// it; so does examples/demo (make demo-nacos).

const (
	// NacosGRPCOffset is how far the Nacos gRPC API's port lies above the
	// HTTP port (the server's and every client's rule); the server's
	// cluster gRPC port is one above it, its JRaft port NacosRaftOffset
	// below the HTTP port.
	NacosGRPCOffset = 1000
	// NacosRaftOffset is how far below the HTTP port the server's JRaft
	// port lies. JRaft binds it on every interface (no setting changes
	// that): StartNacos runs the server only in the test binary's own
	// network namespace (netns.go).
	NacosRaftOffset = -1000
	// nacosMain is the main class of tools/nacos: the server's core and
	// web contexts, without the console.
	nacosMain = "io.meshbridge.nacos.NacosServer"
	// NacosReadyLine is what the server prints once it serves.
	NacosReadyLine = "nacos server ready"
	// NacosIdentityKey is the server-identity header the harness sends:
	// Nacos lets a request carrying it (and the value NacosServer
	// generates) through auth, as it does its cluster peers'.
	NacosIdentityKey = "meshbridge-harness"
	// NacosAdmin is the admin user's name.
	NacosAdmin = "nacos"
)

// NacosServer is how to run one Nacos server: its home directory, HTTP
// port, and auth. NewNacosServer fills in the secrets.
type NacosServer struct {
	Home string // nacos.home: data/ and logs/
	Port int    // HTTP API; gRPC Port+1000 and Port+1001, JRaft Port-1000
	// Auth turns on Nacos's own auth: every API needs a token, got by
	// logging in (the admin NacosAdmin with AdminPassword, created once
	// the server runs).
	Auth bool
	// SecretKey signs tokens (Base64 of 32 random bytes); Nacos 3 refuses to
	// start without one, with auth off too.
	SecretKey string
	// IdentityValue is the value of the NacosIdentityKey header: Nacos 3
	// refuses to start without a server identity, with auth off too.
	IdentityValue string
	// AdminPassword is the admin's password, set when Auth.
	AdminPassword string
	// TLS, when set, serves the HTTP API and the clients' gRPC API over TLS
	// only (no plaintext fallback).
	TLS *NacosTLS
}

// NacosTLS is the server's certificate and PKCS #8 key, PEM files.
type NacosTLS struct{ CertFile, KeyFile string }

// Scheme is the HTTP API's scheme: https with TLS, else http.
func (s NacosServer) Scheme() string {
	if s.TLS != nil {
		return "https"
	}
	return "http"
}

// NewNacosServer returns a NacosServer with fresh random secrets.
func NewNacosServer(home string, port int, auth bool) (NacosServer, error) {
	secret := make([]byte, 32)
	id := make([]byte, 12)
	pw := make([]byte, 12)
	for _, b := range [][]byte{secret, id, pw} {
		if _, err := rand.Read(b); err != nil {
			return NacosServer{}, err
		}
	}
	s := NacosServer{Home: home, Port: port, Auth: auth, SecretKey: base64.StdEncoding.EncodeToString(secret),
		IdentityValue: hex.EncodeToString(id)}
	if auth {
		s.AdminPassword = "Mb-" + hex.EncodeToString(pw)
	}
	return s, nil
}

// GRPCPort is the gRPC API's port: Port + 1000.
func (s NacosServer) GRPCPort() int { return s.Port + NacosGRPCOffset }

// Address is the HTTP API's address, "127.0.0.1:port".
func (s NacosServer) Address() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// JavaArgs are java's arguments that run the server from classpath (tools/
// build.sh nacos's): a small JVM (javaJVMFlags); standalone mode with the
// embedded store; every listener it lets one choose on 127.0.0.1; auth as
// s says; the embedded store's (Apache Derby's) log under s.Home, not in the
// working directory; with TLS, the HTTP and gRPC APIs over TLS. What is
// not set here comes from tools/nacos's application.properties.
func (s NacosServer) JavaArgs(classpath string) []string {
	args := append([]string(nil), javaJVMFlags...)
	args = append(args,
		"-Dnacos.home="+s.Home,
		"-Dderby.stream.error.file="+filepath.Join(s.Home, "derby.log"),
		"-Dnacos.standalone=true",
		"-Dnacos.server.main.port="+strconv.Itoa(s.Port),
		"-Dserver.address=127.0.0.1",
		"-Dnacos.remote.grpc.listen.ip=127.0.0.1",
		"-Dnacos.inetutils.ip-address=127.0.0.1",
		"-Dnacos.core.auth.enabled="+strconv.FormatBool(s.Auth),
		"-Dnacos.core.auth.plugin.nacos.token.secret.key="+s.SecretKey,
		"-Dnacos.core.auth.server.identity.key="+NacosIdentityKey,
		"-Dnacos.core.auth.server.identity.value="+s.IdentityValue,
	)
	if s.TLS != nil {
		args = append(args,
			// The HTTP API: Spring Boot's PEM certificate settings. Both
			// servers read a path without "file:" as a classpath resource.
			"-Dserver.ssl.enabled=true",
			"-Dserver.ssl.certificate=file:"+s.TLS.CertFile,
			"-Dserver.ssl.certificate-private-key=file:"+s.TLS.KeyFile,
			// The clients' gRPC API (Nacos's RpcServerTlsConfig); without
			// compatibility a plaintext client is refused.
			"-Dnacos.remote.server.rpc.tls.enableTls=true",
			"-Dnacos.remote.server.rpc.tls.compatibility=false",
			"-Dnacos.remote.server.rpc.tls.certChainFile=file:"+s.TLS.CertFile,
			"-Dnacos.remote.server.rpc.tls.certPrivateKey=file:"+s.TLS.KeyFile,
		)
	}
	return append(args, "-cp", classpath, nacosMain)
}

// FindNacosPort picks an HTTP port p on 127.0.0.1 such that p, p+1000,
// p+1001 and p-1000 were all free a moment ago.
func FindNacosPort() (int, error) {
	return freePortSet(NacosRaftOffset, NacosGRPCOffset, NacosGRPCOffset+1)
}

package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/xds/bootstrap"
)

func TestCmdBootstrap(t *testing.T) {
	plain := fileConfig(t, "xds: {address: 127.0.0.1:25010}\n")
	anyIf := fileConfig(t, "xds: {address: 0.0.0.0:15010}\n")
	// The configuration loads only with readable PEM files.
	ca := harness.NewCA(t, "bootstrap-test")
	server := ca.ServerCert(t, "meshbridge.example", "127.0.0.1")
	tlsCfg := fileConfig(t, fmt.Sprintf("xds: {address: 'meshbridge.example:15010', tls: {certFile: %q, keyFile: %q}}\n",
		server.CertFile, server.KeyFile))
	mtlsCfg := fileConfig(t, fmt.Sprintf("xds: {address: '127.0.0.1:15010', tls: {certFile: %q, keyFile: %q, clientCAFile: %q}}\n",
		server.CertFile, server.KeyFile, ca.CertFile))
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		want       *bootstrap.Config // stdout is exactly its rendering
		wantStdout string            // else a substring of stdout
		wantStderr string            // a substring of stderr; "" = stderr empty
	}{
		{name: "-h", args: []string{"-h"}, wantStdout: "Usage: meshbridge bootstrap --node-id ID"},
		{name: "--help", args: []string{"--help"}, wantStdout: "-xds-address"},
		{name: "node id is required", args: nil, wantCode: 2, wantStderr: "--node-id is required"},
		{name: "stray argument", args: []string{"--node-id", "n", "extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
		{name: "unknown flag", args: []string{"--node-id", "n", "--zone", "z"}, wantCode: 2, wantStderr: "flag provided but not defined: -zone"},
		{
			name: "defaults: loopback, plaintext, empty locality",
			args: []string{"--node-id", "client-1"},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "client-1"},
		},
		{
			name: "cluster and locality",
			args: []string{"--node-id", "n", "--cluster", "checkout", "--locality", "eu-west-1/eu-west-1a/rack-4"},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n", Cluster: "checkout",
				Locality: bootstrap.Locality{Region: "eu-west-1", Zone: "eu-west-1a", SubZone: "rack-4"}},
		},
		{
			name: "labels",
			args: []string{"--node-id", "n", "--label", "tier=gold", "--label", "topology.kubernetes.io/zone=z1"},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n", Labels: map[string]string{"tier": "gold", "topology.kubernetes.io/zone": "z1"}},
		},
		{name: "a label without a value", args: []string{"--node-id", "n", "--label", "tier"}, wantCode: 2, wantStderr: `"tier" is not key=value`},
		{name: "an invalid label value", args: []string{"--node-id", "n", "--label", "tier=a b"}, wantCode: 2, wantStderr: `label "tier" value "a b"`},
		{name: "locality with four parts", args: []string{"--node-id", "n", "--locality", "a/b/c/d"}, wantCode: 2, wantStderr: "--locality"},
		{name: "invalid address", args: []string{"--node-id", "n", "--xds-address", "meshbridge"}, wantCode: 2, wantStderr: `"meshbridge" is neither host:port`},
		{
			name:       "plaintext to another host warns",
			args:       []string{"--node-id", "n", "--xds-address", "meshbridge.istio-system:15010"},
			want:       &bootstrap.Config{ServerURI: "meshbridge.istio-system:15010", NodeID: "n"},
			wantStderr: "warning: the xDS connection to meshbridge.istio-system:15010 is plaintext",
		},
		{
			name: "plaintext over a Unix socket does not warn",
			args: []string{"--node-id", "n", "--xds-address", "unix:///run/meshbridge/xds.sock"},
			want: &bootstrap.Config{ServerURI: "unix:///run/meshbridge/xds.sock", NodeID: "n"},
		},
		{
			name: "--tls alone: system roots",
			args: []string{"--node-id", "n", "--xds-address", "meshbridge.example:15010", "--tls"},
			want: &bootstrap.Config{ServerURI: "meshbridge.example:15010", NodeID: "n", TLS: &bootstrap.TLS{}},
		},
		{
			name: "--ca-file implies TLS",
			args: []string{"--node-id", "n", "--ca-file", "/etc/meshbridge/ca.pem"},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n", TLS: &bootstrap.TLS{CAFile: "/etc/meshbridge/ca.pem"}},
			// Not on this machine: written as given, with a warning.
			wantStderr: "warning: --ca-file /etc/meshbridge/ca.pem: no such file or directory",
		},
		{
			name:       "mTLS",
			args:       []string{"--node-id", "n", "--ca-file", "ca.pem", "--cert-file", "c.pem", "--key-file", "k.pem"},
			want:       &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n", TLS: &bootstrap.TLS{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}},
			wantStderr: `warning: --ca-file "ca.pem" is a relative path`,
		},
		{
			name: "upstream certificates: the certificate provider (gRFC A29)",
			args: []string{"--node-id", "n", "--upstream-ca-file", "/etc/certs/ca.pem", "--upstream-cert-file", "/etc/certs/tls.crt",
				"--upstream-key-file", "/etc/certs/tls.key"},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n",
				Certificates: &bootstrap.Certificates{CAFile: "/etc/certs/ca.pem", CertFile: "/etc/certs/tls.crt", KeyFile: "/etc/certs/tls.key"}},
			wantStderr: "warning: --upstream-cert-file /etc/certs/tls.crt: no such file or directory",
		},
		{name: "upstream certificate without a CA", args: []string{"--node-id", "n", "--upstream-cert-file", "c.pem", "--upstream-key-file", "k.pem"},
			wantCode: 2, wantStderr: "--upstream-ca-file is required"},
		{name: "upstream certificate without key", args: []string{"--node-id", "n", "--upstream-ca-file", "ca.pem", "--upstream-cert-file", "c.pem"},
			wantCode: 2, wantStderr: "--upstream-cert-file and --upstream-key-file go together"},
		{name: "certificate without key", args: []string{"--node-id", "n", "--cert-file", "c.pem"}, wantCode: 2, wantStderr: "--cert-file and --key-file go together"},
		{name: "key without certificate", args: []string{"--node-id", "n", "--key-file", "k.pem"}, wantCode: 2, wantStderr: "--cert-file and --key-file go together"},
		{
			name: "address from --config",
			args: []string{"--node-id", "n", "--config", plain},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:25010", NodeID: "n"},
		},
		{
			name: "--xds-address wins over --config",
			args: []string{"--node-id", "n", "--config", plain, "--xds-address", "127.0.0.2:15010"},
			want: &bootstrap.Config{ServerURI: "127.0.0.2:15010", NodeID: "n"},
		},
		{name: "--config listening on every interface", args: []string{"--node-id", "n", "--config", anyIf}, wantCode: 2, wantStderr: "listens on every interface; give --xds-address"},
		{
			name: "--config listening on every interface, with --xds-address",
			args: []string{"--node-id", "n", "--config", anyIf, "--xds-address", "127.0.0.1:15010"},
			want: &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n"},
		},
		{name: "TLS flags against a plaintext --config", args: []string{"--node-id", "n", "--config", plain, "--tls"}, wantCode: 2, wantStderr: "serves plaintext"},
		{
			name: "--config serving TLS: TLS by default",
			args: []string{"--node-id", "n", "--config", tlsCfg},
			want: &bootstrap.Config{ServerURI: "meshbridge.example:15010", NodeID: "n", TLS: &bootstrap.TLS{}},
		},
		{
			name:       "--config serving TLS, with a CA",
			args:       []string{"--node-id", "n", "--config", tlsCfg, "--ca-file", "ca.pem"},
			want:       &bootstrap.Config{ServerURI: "meshbridge.example:15010", NodeID: "n", TLS: &bootstrap.TLS{CAFile: "ca.pem"}},
			wantStderr: `warning: --ca-file "ca.pem" is a relative path`,
		},
		{name: "--config serving mTLS needs a client certificate", args: []string{"--node-id", "n", "--config", mtlsCfg}, wantCode: 2, wantStderr: "requires client certificates"},
		{
			name:       "--config serving mTLS, with a client certificate",
			args:       []string{"--node-id", "n", "--config", mtlsCfg, "--cert-file", "c.pem", "--key-file", "k.pem"},
			want:       &bootstrap.Config{ServerURI: "127.0.0.1:15010", NodeID: "n", TLS: &bootstrap.TLS{CertFile: "c.pem", KeyFile: "k.pem"}},
			wantStderr: `warning: --cert-file "c.pem" is a relative path`,
		},
		{name: "unreadable --config", args: []string{"--node-id", "n", "--config", "/nonexistent/meshbridge.yaml"}, wantCode: 1, wantStderr: "read config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cmdBootstrap(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if tc.wantStderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr = %q, want nothing", stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.wantStderr)
			}
			switch {
			case tc.want != nil:
				want, err := bootstrap.Render(*tc.want)
				if err != nil {
					t.Fatal(err)
				}
				if stdout.String() != string(want) {
					t.Errorf("stdout =\n%s\nwant\n%s", stdout.String(), want)
				}
			case tc.wantCode != 0 && stdout.Len() > 0:
				t.Errorf("stdout = %q, want nothing on failure", stdout.String())
			case !strings.Contains(stdout.String(), tc.wantStdout):
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tc.wantStdout)
			}
		})
	}
}

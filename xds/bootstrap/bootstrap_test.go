package bootstrap

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{{
		name: "insecure, no locality: locality is still present",
		cfg:  Config{ServerURI: "127.0.0.1:15010", NodeID: "client-1"},
		want: `{
  "xds_servers": [
    {
      "server_uri": "127.0.0.1:15010",
      "channel_creds": [
        {
          "type": "insecure"
        }
      ],
      "server_features": [
        "xds_v3"
      ]
    }
  ],
  "node": {
    "id": "client-1",
    "locality": {},
    "metadata": {
      "GENERATOR": "grpc"
    }
  }
}
`,
	}, {
		name: "mTLS, cluster, full locality and labels",
		cfg: Config{
			ServerURI: "dns:///meshbridge.istio-system.svc:15010",
			TLS:       &TLS{CAFile: "/etc/meshbridge/ca.pem", CertFile: "/etc/client/tls.crt", KeyFile: "/etc/client/tls.key"},
			NodeID:    "checkout~10.0.0.7",
			Cluster:   "checkout",
			Locality:  Locality{Region: "eu-west-1", Zone: "eu-west-1a", SubZone: "rack-4"},
			Labels:    map[string]string{"tier": "gold", "app": "checkout"},
		},
		want: `{
  "xds_servers": [
    {
      "server_uri": "dns:///meshbridge.istio-system.svc:15010",
      "channel_creds": [
        {
          "type": "tls",
          "config": {
            "ca_certificate_file": "/etc/meshbridge/ca.pem",
            "certificate_file": "/etc/client/tls.crt",
            "private_key_file": "/etc/client/tls.key"
          }
        }
      ],
      "server_features": [
        "xds_v3"
      ]
    }
  ],
  "node": {
    "id": "checkout~10.0.0.7",
    "cluster": "checkout",
    "locality": {
      "region": "eu-west-1",
      "zone": "eu-west-1a",
      "sub_zone": "rack-4"
    },
    "metadata": {
      "GENERATOR": "grpc",
      "LABELS": {
        "app": "checkout",
        "tier": "gold"
      }
    }
  }
}
`,
	}, {
		name: "TLS with system roots: an empty config, no fallback to insecure",
		cfg:  Config{ServerURI: "[::1]:15010", TLS: &TLS{}, NodeID: "n", Locality: Locality{Zone: "z"}},
		want: `{
  "xds_servers": [
    {
      "server_uri": "[::1]:15010",
      "channel_creds": [
        {
          "type": "tls",
          "config": {}
        }
      ],
      "server_features": [
        "xds_v3"
      ]
    }
  ],
  "node": {
    "id": "n",
    "locality": {
      "zone": "z"
    },
    "metadata": {
      "GENERATOR": "grpc"
    }
  }
}
`,
	}, {
		name: "paths with characters HTML escaping would change are written as is",
		cfg:  Config{ServerURI: "unix:///run/mesh&bridge.sock", TLS: &TLS{CAFile: "certs/<ca>.pem"}, NodeID: "a&b"},
		want: `{
  "xds_servers": [
    {
      "server_uri": "unix:///run/mesh&bridge.sock",
      "channel_creds": [
        {
          "type": "tls",
          "config": {
            "ca_certificate_file": "certs/<ca>.pem"
          }
        }
      ],
      "server_features": [
        "xds_v3"
      ]
    }
  ],
  "node": {
    "id": "a&b",
    "locality": {},
    "metadata": {
      "GENERATOR": "grpc"
    }
  }
}
`,
	}, {
		name: "upstream certificates: the file_watcher instance, declared in the node metadata",
		cfg: Config{ServerURI: "127.0.0.1:15010", NodeID: "n",
			Certificates: &Certificates{CAFile: "/etc/certs/ca.pem", CertFile: "/etc/certs/tls.crt", KeyFile: "/etc/certs/tls.key"}},
		want: `{
  "xds_servers": [
    {
      "server_uri": "127.0.0.1:15010",
      "channel_creds": [
        {
          "type": "insecure"
        }
      ],
      "server_features": [
        "xds_v3"
      ]
    }
  ],
  "node": {
    "id": "n",
    "locality": {},
    "metadata": {
      "CERTIFICATE_PROVIDER": "default",
      "GENERATOR": "grpc"
    }
  },
  "certificate_providers": {
    "default": {
      "plugin_name": "file_watcher",
      "config": {
        "certificate_file": "/etc/certs/tls.crt",
        "private_key_file": "/etc/certs/tls.key",
        "ca_certificate_file": "/etc/certs/ca.pem",
        "refresh_interval": "60s"
      }
    }
  }
}
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.cfg)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("Render =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error, each required
	}{
		{"no node id", Config{ServerURI: "127.0.0.1:15010"}, []string{"node id is required"}},
		{"no server", Config{NodeID: "n"}, []string{"xDS server address is required"}},
		{"port zero", Config{ServerURI: "127.0.0.1:0", NodeID: "n"}, []string{`port "0" is not in 1-65535`}},
		{"port out of range", Config{ServerURI: "127.0.0.1:65536", NodeID: "n"}, []string{"not in 1-65535"}},
		{"named port", Config{ServerURI: "meshbridge:xds", NodeID: "n"}, []string{`port "xds"`}},
		{"no host", Config{ServerURI: ":15010", NodeID: "n"}, []string{`"" is not a host`}},
		{"no port", Config{ServerURI: "meshbridge", NodeID: "n"}, []string{"neither host:port nor a gRPC target URI"}},
		{"unknown scheme", Config{ServerURI: "http://meshbridge:15010", NodeID: "n"}, []string{"neither host:port"}},
		{"path in host", Config{ServerURI: "meshbridge/xds:15010", NodeID: "n"}, []string{`"meshbridge/xds" is not a host`}},
		{"scheme without target", Config{ServerURI: "dns:///", NodeID: "n"}, []string{`port "///" is not in 1-65535`}},
		{"IPv6 without brackets", Config{ServerURI: "::1:15010", NodeID: "n"}, []string{"neither host:port"}},
		{"certificate without key", Config{ServerURI: "127.0.0.1:15010", NodeID: "n", TLS: &TLS{CertFile: "c.pem"}}, []string{"go together"}},
		{"key without certificate", Config{ServerURI: "127.0.0.1:15010", NodeID: "n", TLS: &TLS{KeyFile: "k.pem"}}, []string{"go together"}},
		{"upstream certificates without a CA", Config{ServerURI: "127.0.0.1:15010", NodeID: "n",
			Certificates: &Certificates{CertFile: "c.pem", KeyFile: "k.pem"}}, []string{"the CA file is required"}},
		{"upstream certificate without key", Config{ServerURI: "127.0.0.1:15010", NodeID: "n",
			Certificates: &Certificates{CAFile: "ca.pem", CertFile: "c.pem"}}, []string{"upstream certificates: the certificate and key files go together"}},
		{"every error at once", Config{TLS: &TLS{KeyFile: "k.pem"}}, []string{"address is required", "node id is required", "go together"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tc.cfg)
			if err == nil {
				t.Fatalf("Render = %s, want an error", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseLocality(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Locality
		wantErr bool
	}{
		{in: "", want: Locality{}},
		{in: "eu-west-1", want: Locality{Region: "eu-west-1"}},
		{in: "eu-west-1/eu-west-1a", want: Locality{Region: "eu-west-1", Zone: "eu-west-1a"}},
		{in: "eu-west-1/eu-west-1a/rack-4", want: Locality{Region: "eu-west-1", Zone: "eu-west-1a", SubZone: "rack-4"}},
		{in: "r//s", want: Locality{Region: "r", SubZone: "s"}},
		{in: "a/b/c/d", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLocality(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseLocality(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseLocality(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if !tc.wantErr && got.String() != strings.TrimRight(tc.in, "/") {
				t.Errorf("String() = %q, want %q", got.String(), tc.in)
			}
		})
	}
}

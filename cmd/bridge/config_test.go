package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("registries:\n- name: dc1\n  type: consul\n  consul: {address: 127.0.0.1:8500}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Registries[0]
	checks := map[string]bool{
		"output.namespace is meshbridge":    cfg.Output.Namespace == "meshbridge",
		"output.endpoints is workloadentry": cfg.Output.Endpoints == "workloadentry",
		"xds.address is 127.0.0.1:15010":    cfg.XDS.Address == "127.0.0.1:15010",
		"http.address is 127.0.0.1:15014":   cfg.HTTP.Address == "127.0.0.1:15014",
		"debounce.after is 100ms":           cfg.Debounce.After.Duration == 100*time.Millisecond,
		"debounce.max is 10s":               cfg.Debounce.Max.Duration == 10*time.Second,
		"debounce.eds is true":              *cfg.Debounce.EDS,
		"sync.timeout is 30s":               cfg.Sync.Timeout.Duration == 30*time.Second,
		"resolution is STATIC":              r.Resolution == "STATIC",
		"consul.healthyOnly is true":        *r.Consul.HealthyOnly,
		"consul.maxWatches is 100":          r.Consul.MaxWatches == 100,
		"mcp.enabled is false":              !cfg.MCP.Enabled,
		"kubernetes.enabled is false":       !cfg.Kubernetes.Enabled,
		"kubernetes.qps is 50":              cfg.Kubernetes.QPS == 50,
		"kubernetes.burst is 100":           cfg.Kubernetes.Burst == 100,
		"kubernetes.resyncPeriod is 5m":     cfg.Kubernetes.ResyncPeriod.Duration == 5*time.Minute,
		"leaderElection.enabled is true":    *cfg.Kubernetes.LeaderElection.Enabled,
		"leaseName is meshbridge":           cfg.Kubernetes.LeaderElection.LeaseName == "meshbridge",
		"leaseNamespace is output's":        cfg.Kubernetes.LeaderElection.LeaseNamespace == "meshbridge",
		"leaseDuration is 15s":              cfg.Kubernetes.LeaderElection.LeaseDuration.Duration == 15*time.Second,
		"renewDeadline is 10s":              cfg.Kubernetes.LeaderElection.RenewDeadline.Duration == 10*time.Second,
		"retryPeriod is 2s":                 cfg.Kubernetes.LeaderElection.RetryPeriod.Duration == 2*time.Second,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("default: want %s", what)
		}
	}
}

func TestParseConfigErrorsNameTheField(t *testing.T) {
	const consul = "registries:\n- name: dc1\n  type: consul\n  consul: {address: 127.0.0.1:8500}\n"
	cases := map[string]struct {
		yaml string
		want string
	}{
		"unknown top-level key":           {consul + "xsd: {}\n", "xsd: unknown field"},
		"unknown nested key":              {"registries:\n- name: a\n  type: consul\n  consul: {adress: x}\n", "registries[0].consul.adress: unknown field"},
		"wrong value type":                {"registries:\n- name: a\n  type: consul\n  servicePort: http\n", "servicePort"},
		"no registries":                   {"output: {namespace: x}\n", "registries: at least one registry is required"},
		"registry name not a label":       {"registries:\n- name: DC_1\n  type: file\n  file: {path: x}\n", `registries[0].name: "DC_1" is not a DNS-1123 label`},
		"duplicate registry name":         {"registries:\n- {name: a, type: file, file: {path: x}}\n- {name: a, type: file, file: {path: other}}\n", `registries[1].name: "a" is already used by registries[0]`},
		"unknown registry type":           {"registries:\n- {name: a, type: eureka}\n", `registries[0].type: "eureka" is not one of consul, file`},
		"consul block missing":            {"registries:\n- {name: a, type: consul}\n", "registries[0].consul: required for type consul"},
		"consul address missing":          {"registries:\n- {name: a, type: consul, consul: {}}\n", "registries[0].consul.address: required"},
		"consul address not host:port":    {"registries:\n- {name: a, type: consul, consul: {address: nowhere}}\n", `registries[0].consul.address: "nowhere" is not host:port`},
		"token and tokenFile":             {"registries:\n- {name: a, type: consul, consul: {address: a:1, token: x, tokenFile: f}}\n", "registries[0].consul.tokenFile: set either token or tokenFile"},
		"maxWatches over the agent limit": {"registries:\n- {name: a, type: consul, consul: {address: a:1, maxWatches: 500}}\n", "registries[0].consul.maxWatches: 500 is outside 1-190"},
		"cert without key":                {"registries:\n- {name: a, type: consul, consul: {address: a:1, tls: {certFile: c}}}\n", "registries[0].consul.tls: certFile and keyFile go together"},
		"file path missing":               {"registries:\n- {name: a, type: file}\n", "registries[0].file.path: required for type file"},
		"resolution unknown":              {"registries:\n- {name: a, type: file, file: {path: x}, resolution: NONE}\n", `registries[0].resolution: "NONE" is not one of STATIC, DNS`},
		"servicePort too large":           {"registries:\n- {name: a, type: file, file: {path: x}, servicePort: 70000}\n", "registries[0].servicePort: 70000 is not a port"},
		"endpoints mode unknown":          {consul + "output: {endpoints: both}\n", `output.endpoints: "both" is not one of workloadentry, inline`},
		"namespace not a label":           {consul + "output: {namespace: Mesh}\n", `output.namespace: "Mesh" is not a DNS-1123 label`},
		"xds address invalid":             {consul + "xds: {address: localhost}\n", `xds.address: "localhost" is not host:port`},
		"xds tls without a key":           {consul + "xds: {tls: {certFile: c.pem}}\n", "xds.tls: certFile and keyFile are both required"},
		"duration invalid":                {consul + "debounce: {after: soon}\n", "debounce.after"},
		"debounce max below after":        {consul + "debounce: {after: 2s, max: 1s}\n", "debounce.max: 1s is shorter than debounce.after (2s)"},
		"kubernetes unknown key":          {consul + "kubernetes: {enabled: true, kubeConfig: x}\n", "kubernetes.kubeConfig: unknown field"},
		"kubernetes qps negative":         {consul + "kubernetes: {qps: -1}\n", "kubernetes.qps: must not be negative"},
		"lease name not a label":          {consul + "kubernetes: {leaderElection: {leaseName: Mesh_Bridge}}\n", `kubernetes.leaderElection.leaseName: "Mesh_Bridge" is not a DNS-1123 label`},
		"lease shorter than renew":        {consul + "kubernetes: {leaderElection: {leaseDuration: 5s}}\n", "kubernetes.leaderElection.leaseDuration: 5s must be longer than renewDeadline (10s)"},
		"renew too close to retry":        {consul + "kubernetes: {leaderElection: {retryPeriod: 9s}}\n", "kubernetes.leaderElection.renewDeadline: 10s must be longer than 1.2 × retryPeriod (9s)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestExampleConfigsLoad keeps the shipped examples valid.
func TestExampleConfigsLoad(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*/meshbridge.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example configurations found: %v", err)
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			cfg, err := LoadConfig(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range cfg.Registries {
				if r.File != nil {
					if _, err := os.Stat(r.File.Path); err != nil {
						t.Errorf("registry %s: %v (relative paths resolve against the config's directory)", r.Name, err)
					}
				}
			}
		})
	}
}

func TestRelativePathsResolveAgainstTheConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	body := "registries:\n- {name: f, type: file, file: {path: svc.yaml}}\n- {name: c, type: consul, consul: {address: a:1, tokenFile: /abs/token, tls: {caFile: ca.pem}}}\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Registries[0].File.Path; got != filepath.Join(dir, "svc.yaml") {
		t.Errorf("file.path = %q", got)
	}
	if got := cfg.Registries[1].Consul.TokenFile; got != "/abs/token" {
		t.Errorf("absolute tokenFile changed to %q", got)
	}
	if got := cfg.Registries[1].Consul.TLS.CAFile; got != filepath.Join(dir, "ca.pem") {
		t.Errorf("tls.caFile = %q", got)
	}
}

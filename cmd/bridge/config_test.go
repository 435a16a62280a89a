package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/test/harness"
)

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("registries:\n- name: dc1\n  type: consul\n  consul: {address: 127.0.0.1:8500}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Registries[0]
	checks := map[string]bool{
		"output.namespace is meshbridge":       cfg.Output.Namespace == "meshbridge",
		"output.endpoints is workloadentry":    cfg.Output.Endpoints == "workloadentry",
		"xds.address is 127.0.0.1:15010":       cfg.XDS.Address == "127.0.0.1:15010",
		"http.address is 127.0.0.1:15014":      cfg.HTTP.Address == "127.0.0.1:15014",
		"debounce.after is 100ms":              cfg.Debounce.After.Duration == 100*time.Millisecond,
		"debounce.max is 10s":                  cfg.Debounce.Max.Duration == 10*time.Second,
		"debounce.edsMax is 500ms":             cfg.Debounce.EDSMax.Duration == 500*time.Millisecond,
		"xds.dnsRefreshRate is 30s":            cfg.XDS.DNSRefreshRate.Duration == 30*time.Second,
		"debounce.eds is true":                 *cfg.Debounce.EDS,
		"sync.timeout is 30s":                  cfg.Sync.Timeout.Duration == 30*time.Second,
		"resolution is AUTO":                   r.Resolution == "AUTO",
		"consul.healthyOnly is true":           *r.Block.(*consul.Block).HealthyOnly,
		"consul.maxWatches is 100":             r.Block.(*consul.Block).MaxWatches == 100,
		"mcp.enabled is false":                 !cfg.MCP.Enabled,
		"kubernetes.enabled is false":          !cfg.Kubernetes.Enabled,
		"kubernetes.qps is 50":                 cfg.Kubernetes.QPS == 50,
		"kubernetes.burst is 100":              cfg.Kubernetes.Burst == 100,
		"kubernetes.resyncPeriod is 5m":        cfg.Kubernetes.ResyncPeriod.Duration == 5*time.Minute,
		"leaderElection.enabled is true":       *cfg.Kubernetes.LeaderElection.Enabled,
		"leaseName is meshbridge":              cfg.Kubernetes.LeaderElection.LeaseName == "meshbridge",
		"leaseNamespace is output's":           cfg.Kubernetes.LeaderElection.LeaseNamespace == "meshbridge",
		"leaseDuration is 15s":                 cfg.Kubernetes.LeaderElection.LeaseDuration.Duration == 15*time.Second,
		"renewDeadline is 10s":                 cfg.Kubernetes.LeaderElection.RenewDeadline.Duration == 10*time.Second,
		"retryPeriod is 2s":                    cfg.Kubernetes.LeaderElection.RetryPeriod.Duration == 2*time.Second,
		"http.debugAddress is 127.0.0.1:15015": cfg.HTTP.DebugAddress == "127.0.0.1:15015",
		"mcp.address is empty":                 cfg.MCP.Address == "",
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
		"unknown registry type":           {"registries:\n- {name: a, type: etcd}\n", `registries[0].type: "etcd" is not one of consul, eureka, file`},
		"another type's block":            {"registries:\n- {name: a, type: file, file: {path: x}, consul: {}}\n", "registries[0].consul: not allowed for type file"},
		"a wrong value in a block":        {"registries:\n- {name: a, type: consul, consul: {maxWatches: many}}\n", `registries[0].consul.maxWatches: must be a whole number, not the string "many"`},
		"an unknown key beside the block": {"registries:\n- {name: a, type: file, file: {path: x}, hostTemplat: x}\n", "registries[0].hostTemplat: unknown field"},
		"consul address not host:port":    {"registries:\n- {name: a, type: consul, consul: {address: nowhere}}\n", `registries[0].consul.address: "nowhere": address nowhere: missing port in address`},
		"token and tokenFile":             {"registries:\n- {name: a, type: consul, consul: {address: a:1, token: x, tokenFile: f}}\n", "registries[0].consul.tokenFile: set either token or tokenFile"},
		"maxWatches over the agent limit": {"registries:\n- {name: a, type: consul, consul: {address: a:1, maxWatches: 500}}\n", "registries[0].consul.maxWatches: 500 is outside 1-190"},
		"cert without key":                {"registries:\n- {name: a, type: consul, consul: {address: a:1, tls: {certFile: c}}}\n", "registries[0].consul: tls.certFile and tls.keyFile: set both or neither"},
		"file path missing":               {"registries:\n- {name: a, type: file}\n", "registries[0].file.path: required"},
		"zookeeper with a hostTemplate":   {"registries:\n- {name: a, type: zookeeper, hostTemplate: \"{{.Service}}.zk\"}\n", "registries[0].hostTemplate: a zookeeper registry names its services with zookeeper.dubbo.interfaceHostTemplate"},
		"zookeeper unknown layout":        {"registries:\n- {name: a, type: zookeeper, zookeeper: {layout: eureka}}\n", `registries[0].zookeeper.layout: "eureka" is not one of dubbo, spring-cloud`},
		"zookeeper spring-cloud dubbo":    {"registries:\n- {name: a, type: zookeeper, zookeeper: {layout: spring-cloud, dubbo: {mode: both}}}\n", "registries[0].zookeeper.dubbo: layout spring-cloud reads Spring Cloud Zookeeper instances"},
		"file maxSize not positive":       {"registries:\n- {name: a, type: file, file: {path: x, maxSize: 0}}\n", "registries[0].file.maxSize: 0 is not a positive size in bytes"},
		"file maxSize not a quantity":     {"registries:\n- {name: a, type: file, file: {path: x, maxSize: lots}}\n", "registries[0].file.maxSize"},
		"file with a hostTemplate":        {"registries:\n- {name: a, type: file, file: {path: x}, hostTemplate: \"{{.Service}}.static\"}\n", "registries[0].hostTemplate: a file registry names its services with the host of each service in its file (services[].host), not hostTemplate"},
		"xds address is http address":     {consul + "xds: {address: 127.0.0.1:9000}\nhttp: {address: 127.0.0.1:9000}\n", `http.address: "127.0.0.1:9000" is xds.address too`},
		"a port taken on every interface": {consul + "xds: {address: 0.0.0.0:9000}\nhttp: {debugAddress: 127.0.0.1:9000}\n", `http.debugAddress: "127.0.0.1:9000" is xds.address too`},
		"zookeeper server not host:port":  {"registries:\n- {name: a, type: zookeeper, zookeeper: {servers: [zk]}}\n", `registries[0].zookeeper.servers[0]: "zk" is not host:port`},
		"zookeeper dubbo mode":            {"registries:\n- {name: a, type: zookeeper, zookeeper: {dubbo: {mode: all}}}\n", `registries[0].zookeeper.dubbo.mode: "all" is not one of interface, application, both`},
		"zookeeper dubbo host template":   {"registries:\n- {name: a, type: zookeeper, zookeeper: {dubbo: {interfaceHostTemplate: \"{{.Iface}}\"}}}\n", "registries[0].zookeeper.dubbo.interfaceHostTemplate: template"},
		"host template unparsable":        {"registries:\n- {name: a, type: file, file: {path: x}, hostTemplate: \"{{\"}\n", "registries[0].hostTemplate: template: host:1: unclosed action"},
		"host template unknown field":     {"registries:\n- {name: a, type: file, file: {path: x}, hostTemplate: \"{{.Nope}}\"}\n", "registries[0].hostTemplate: template: host:1:2: executing"},
		"revision not a label value":      {consul + "output: {revision: \"a b\"}\n", "output.revision:"},
		"conflict policy unknown":         {consul + "conflictPolicy: last\n", `conflictPolicy: "last" is not one of merge, first`},
		"policy namespace not a label":    {consul + "policy: {kubernetes: {enabled: true, namespaces: [Mesh]}}\n", `policy.kubernetes.namespaces[0]: "Mesh" is not a namespace name`},
		"policy namespaces when off":      {consul + "policy: {kubernetes: {namespaces: [mesh]}}\n", `policy.kubernetes.namespaces[0]: is set but policy.kubernetes.enabled is false`},
		"policy namespace twice":          {consul + "policy: {kubernetes: {enabled: true, namespaces: [a, a]}}\n", `policy.kubernetes.namespaces[1]: "a" is listed twice`},
		"outage ratio zero":               {consul + "outage: {maxDeleteRatio: 0}\n", "outage.maxDeleteRatio: 0 is outside (0, 1]"},
		"outage hold-down negative":       {consul + "outage: {holdDown: -1s}\n", "outage.holdDown: must not be negative"},
		"registry outage guard timeout":   {"registries:\n- {name: a, type: file, file: {path: x}, outage: {deleteGuardTimeout: 0s}}\n", "registries[0].outage.deleteGuardTimeout: must be positive"},
		"resolution unknown":              {"registries:\n- {name: a, type: file, file: {path: x}, resolution: NONE}\n", `registries[0].resolution: "NONE" is not one of AUTO, STATIC, DNS`},
		"servicePort too large":           {"registries:\n- {name: a, type: file, file: {path: x}, servicePort: 70000}\n", "registries[0].servicePort: 70000 is not a port"},
		"endpoints mode unknown":          {consul + "output: {endpoints: both}\n", `output.endpoints: "both" is not one of workloadentry, inline`},
		"namespace not a label":           {consul + "output: {namespace: Mesh}\n", `output.namespace: "Mesh" is not a DNS-1123 label`},
		"xds address invalid":             {consul + "xds: {address: localhost}\n", `xds.address: "localhost" is not host:port`},
		"xds tls without a key":           {consul + "xds: {tls: {certFile: c.pem}}\n", "xds.tls: certFile and keyFile are both required"},
		"duration invalid":                {consul + "debounce: {after: soon}\n", "debounce.after"},
		"debounce max below after":        {consul + "debounce: {after: 2s, max: 1s}\n", "debounce.max: 1s is shorter than debounce.after (2s)"},
		"dns refresh under a second":      {consul + "xds: {dnsRefreshRate: 100ms}\n", "xds.dnsRefreshRate: 100ms is under 1s"},
		"kubernetes unknown key":          {consul + "kubernetes: {enabled: true, kubeConfig: x}\n", "kubernetes.kubeConfig: unknown field"},
		"kubernetes qps negative":         {consul + "kubernetes: {qps: -1}\n", "kubernetes.qps: must not be negative"},
		"lease name not a label":          {consul + "kubernetes: {leaderElection: {leaseName: Mesh_Bridge}}\n", `kubernetes.leaderElection.leaseName: "Mesh_Bridge" is not a DNS-1123 label`},
		"lease shorter than renew":        {consul + "kubernetes: {leaderElection: {leaseDuration: 5s}}\n", "kubernetes.leaderElection.leaseDuration: 5s must be longer than renewDeadline (10s)"},
		"renew too close to retry":        {consul + "kubernetes: {leaderElection: {retryPeriod: 9s}}\n", "kubernetes.leaderElection.renewDeadline: 10s must be longer than 1.2 × retryPeriod (9s)"},
		"duplicate key names its line":    {consul + "output: {namespace: a}\noutput: {namespace: b}\n", `line 6: key "output" already set in map`},
		"second document names its line":  {consul + "---\noutput: {namespace: b}\n", "line 5: a second YAML document"},
		"http scheme with tls":            {"registries:\n- {name: a, type: consul, consul: {address: \"http://c:8500\", tls: {caFile: ca.pem}}}\n", `registries[0].consul: address "http://c:8500" and tls.caFile: plain HTTP with TLS settings would send the ACL token in cleartext`},
		"sync timeout zero":               {consul + "sync: {timeout: 0s}\n", "sync.timeout: must be positive"},
		"resync period zero":              {consul + "kubernetes: {resyncPeriod: 0s}\n", "kubernetes.resyncPeriod: must be positive"},
		"debounce after negative":         {consul + "debounce: {after: -1s}\n", "debounce.after: must not be negative"},
		"debounce max zero with after":    {consul + "debounce: {max: 0s}\n", "debounce.max: 0s is shorter than debounce.after (100ms)"},
		"debounce edsMax below after":     {consul + "debounce: {after: 200ms, edsMax: 100ms}\n", "debounce.edsMax: 100ms is not within debounce.after (200ms) and debounce.max (10s)"},
		"debounce edsMax above max":       {consul + "debounce: {max: 1s, edsMax: 2s}\n", "debounce.edsMax: 2s is not within debounce.after (100ms) and debounce.max (1s)"},
		"debug address same as http":      {consul + "http: {address: 127.0.0.1:9000, debugAddress: 127.0.0.1:9000}\n", `http.debugAddress: "127.0.0.1:9000" is http.address too`},
		"debug address invalid":           {consul + "http: {debugAddress: nowhere}\n", `http.debugAddress: "nowhere" is not host:port`},
		"mcp address without mcp":         {consul + "mcp: {address: 127.0.0.1:9001}\n", "mcp.address: set, but mcp.enabled is false"},
		"mcp address is the xds port":     {consul + "mcp: {enabled: true, address: 127.0.0.1:15010}\n", "mcp.address: \"127.0.0.1:15010\" is xds.address too"},
		"mcp tls without address":         {consul + "mcp: {enabled: true, tls: {certFile: c, keyFile: k}}\n", "mcp.tls: needs mcp.address"},
		"mcp tls asks client certs":       {consul + "mcp: {enabled: true, address: 127.0.0.1:9001, tls: {certFile: c, keyFile: k, clientCAFile: ca}}\n", "mcp.tls.clientCAFile: istiod's xds:// client cannot present a client certificate"},
		"allowLabels empty entry":         {consul + "output: {allowLabels: [\"\"]}\n", `output.allowLabels: allowLabels[0]: "" is neither a label key nor a prefix ending in '/'`},
		"allowLabels ownership key":       {consul + "output: {allowLabels: [meshbridge.io/registry]}\n", "output.allowLabels: allowLabels[0]"},
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

// TestZooKeeperSpringCloudTakesHostTemplate: a zookeeper registry of
// layout spring-cloud is named by hostTemplate (its block lifts the type's
// HostsFrom); layout dubbo still refuses it (above).
func TestZooKeeperSpringCloudTakesHostTemplate(t *testing.T) {
	cfg, err := ParseConfig([]byte("registries:\n- {name: a, type: zookeeper, hostTemplate: \"{{.Service}}.zk\", zookeeper: {layout: spring-cloud}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Registries[0]; r.HostTemplate != "{{.Service}}.zk" {
		t.Errorf("hostTemplate %q", r.HostTemplate)
	}
}

// inCluster lists the examples written for a pod: their paths are where the
// Deployment mounts Secrets, so they are parsed, not loaded, here.
var inCluster = map[string]bool{"kubernetes": true, "istiod": true}

// TestExampleConfigsLoad keeps the shipped examples valid: the local ones
// load on this machine as they are (every file they name exists), the
// in-cluster ones parse and name absolute paths.
func TestExampleConfigsLoad(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*/meshbridge*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example configurations found: %v", err)
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			cfg := loadExample(t, p)
			if inCluster[filepath.Base(filepath.Dir(p))] {
				for _, f := range cfg.files() {
					if *f.Path != "" && !filepath.IsAbs(*f.Path) {
						t.Errorf("%s: %q is relative; an in-cluster example names where the pod mounts it", f.Key, *f.Path)
					}
				}
				return
			}
			for _, r := range cfg.Registries {
				if fb, ok := r.Block.(*file.Block); ok {
					if _, err := os.Stat(fb.Path); err != nil {
						t.Errorf("registry %s: %v (relative paths resolve against the config's directory)", r.Name, err)
					}
				}
			}
		})
	}
}

func loadExample(t *testing.T, p string) *Config {
	t.Helper()
	if !inCluster[filepath.Base(filepath.Dir(p))] {
		cfg, err := LoadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestExamplesAreSafeAsShipped: a listener of a shipped example that is not
// on loopback authenticates its clients (xDS: mTLS) or is the MCP port with
// TLS that networkpolicy.yaml restricts; debug endpoints are on loopback.
func TestExamplesAreSafeAsShipped(t *testing.T) {
	paths, _ := filepath.Glob("../../examples/*/meshbridge*.yaml")
	loopback := func(addr string) bool {
		host, _, _ := net.SplitHostPort(addr)
		ip := net.ParseIP(host)
		return host == "localhost" || ip != nil && ip.IsLoopback()
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			cfg := loadExample(t, p)
			if !loopback(cfg.XDS.Address) && (cfg.XDS.TLS == nil || cfg.XDS.TLS.ClientCAFile == "") {
				t.Errorf("xds.address %s is not loopback and does not require mTLS", cfg.XDS.Address)
			}
			if a := cfg.MCP.Address; a != "" && !loopback(a) && cfg.MCP.TLS == nil {
				t.Errorf("mcp.address %s is not loopback and has no TLS", a)
			}
			if !loopback(cfg.HTTP.DebugAddress) {
				t.Errorf("http.debugAddress %s is not loopback", cfg.HTTP.DebugAddress)
			}
		})
	}
	np, err := os.ReadFile("../../examples/istiod/networkpolicy.yaml")
	if err != nil || !strings.Contains(string(np), "port: 15016") {
		t.Errorf("examples/istiod/networkpolicy.yaml does not restrict the MCP port 15016: %v", err)
	}
}

func TestRelativePathsResolveAgainstTheConfig(t *testing.T) {
	dir := t.TempDir()
	caPEM, _ := testPEM(t)
	token := filepath.Join(t.TempDir(), "token") // an absolute path elsewhere
	writeFile(t, token, "t0ken")
	writeFile(t, filepath.Join(dir, "ca.pem"), caPEM)
	p := filepath.Join(dir, "c.yaml")
	writeFile(t, p, fmt.Sprintf("registries:\n- {name: f, type: file, file: {path: svc.yaml}}\n- {name: c, type: consul, consul: {address: a:1, tokenFile: %q, tls: {caFile: ca.pem}}}\n", token))
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Registries[0].Block.(*file.Block).Path; got != filepath.Join(dir, "svc.yaml") {
		t.Errorf("file.path = %q", got)
	}
	cb := cfg.Registries[1].Block.(*consul.Block)
	if got := cb.TokenFile; got != token {
		t.Errorf("absolute tokenFile changed to %q", got)
	}
	if got := cb.TLS.CAFile; got != filepath.Join(dir, "ca.pem") {
		t.Errorf("tls.caFile = %q", got)
	}
}

// TestDurationsKeepAnExplicitZero: a key that is present keeps its value,
// zero included; an absent key takes its default.
func TestDurationsKeepAnExplicitZero(t *testing.T) {
	const consul = "registries:\n- name: dc1\n  type: consul\n  consul: {}\n"
	cases := map[string]struct {
		yaml               string
		after, max, edsMax time.Duration
	}{
		"absent keys take the defaults":   {consul, 100 * time.Millisecond, 10 * time.Second, 500 * time.Millisecond},
		"0s turns the quiet period off":   {consul + "debounce: {after: 0s, max: 50ms}\n", 0, 50 * time.Millisecond, 50 * time.Millisecond},
		"0s for both turns debounce off":  {consul + "debounce: {after: 0s, max: 0s}\n", 0, 0, 0},
		"an explicit value is kept as is": {consul + "debounce: {after: 5ms}\n", 5 * time.Millisecond, 10 * time.Second, 500 * time.Millisecond},
		"edsMax follows a longer after":   {consul + "debounce: {after: 2s}\n", 2 * time.Second, 10 * time.Second, 2 * time.Second},
		"edsMax 0s pushes EDS at once":    {consul + "debounce: {after: 0s, edsMax: 0s}\n", 0, 10 * time.Second, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if d := cfg.Debounce; d.After.Duration != tc.after || d.Max.Duration != tc.max || d.EDSMax.Duration != tc.edsMax {
				t.Fatalf("debounce = {after: %s, max: %s, edsMax: %s}, want {%s, %s, %s}", d.After, d.Max, d.EDSMax, tc.after, tc.max, tc.edsMax)
			}
		})
	}
	// The consul address is optional: $CONSUL_HTTP_ADDR, else 127.0.0.1:8500.
	if _, err := ParseConfig([]byte(consul)); err != nil {
		t.Errorf("consul without an address: %v", err)
	}
	if _, err := ParseConfig([]byte("registries:\n- {name: dc1, type: consul}\n")); err != nil {
		t.Errorf("consul without a block: %v", err)
	}
}

// TestConfigFilesAreCheckedAtLoad: every credential and certificate the
// configuration names must be readable (and PEM where it is a certificate)
// when it loads, and the error names the key.
func TestConfigFilesAreCheckedAtLoad(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := testPEM(t)
	_, otherKey := testPEM(t)
	writeFile(t, filepath.Join(dir, "cert.pem"), certPEM)
	writeFile(t, filepath.Join(dir, "key.pem"), keyPEM)
	writeFile(t, filepath.Join(dir, "other-key.pem"), otherKey)
	writeFile(t, filepath.Join(dir, "text.pem"), "not a certificate\n")
	const file = "registries:\n- {name: f, type: file, file: {path: services.yaml}}\n"
	const consulTLS = "registries:\n- {name: c, type: consul, consul: {tls: %s}}\n"
	cases := map[string]struct {
		yaml, want string
	}{
		"xds cert missing":               {file + "xds: {tls: {certFile: nope.pem, keyFile: key.pem}}\n", "xds.tls.certFile: stat " + filepath.Join(dir, "nope.pem")},
		"xds client CA not PEM":          {file + "xds: {tls: {certFile: cert.pem, keyFile: key.pem, clientCAFile: text.pem}}\n", "xds.tls.clientCAFile: " + filepath.Join(dir, "text.pem") + " holds no PEM data"},
		"xds key is a directory":         {file + "xds: {tls: {certFile: cert.pem, keyFile: .}}\n", "xds.tls.keyFile: " + dir + " is a directory"},
		"xds key does not match":         {file + "xds: {tls: {certFile: cert.pem, keyFile: other-key.pem}}\n", "xds.tls: certFile and keyFile: tls: private key does not match public key"},
		"consul CA missing":              {fmt.Sprintf(consulTLS, "{caFile: ca.pem}"), "registries[0].consul.tls.caFile: stat " + filepath.Join(dir, "ca.pem")},
		"consul client key gone":         {fmt.Sprintf(consulTLS, "{certFile: cert.pem, keyFile: gone.pem}"), "registries[0].consul.tls.keyFile: stat"},
		"consul token file gone":         {"registries:\n- {name: c, type: consul, consul: {tokenFile: token}}\n", "registries[0].consul.tokenFile: stat " + filepath.Join(dir, "token")},
		"mcp cert missing":               {file + "mcp: {enabled: true, address: 127.0.0.1:9001, tls: {certFile: gone.pem, keyFile: key.pem}}\n", "mcp.tls.certFile: stat"},
		"kubeconfig when enabled":        {file + "kubernetes: {enabled: true, kubeconfig: kc}\n", "kubernetes.kubeconfig: stat " + filepath.Join(dir, "kc")},
		"xds client CA holds a key":      {file + "xds: {tls: {certFile: cert.pem, keyFile: key.pem, clientCAFile: key.pem}}\n", "xds.tls.clientCAFile: " + filepath.Join(dir, "key.pem") + " holds no CA certificate (PEM blocks found: "},
		"a registry file may come later": {file, ""},
		"a matching pair loads":          {file + "xds: {tls: {certFile: cert.pem, keyFile: key.pem}}\n", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "c.yaml")
			writeFile(t, p, tc.yaml)
			_, err := LoadConfig(p)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// testPEM returns a server certificate for 127.0.0.1 and its key, PEM.
func testPEM(t *testing.T) (cert, key string) {
	t.Helper()
	kp := harness.NewCA(t, "config-test").ServerCert(t, "127.0.0.1")
	return string(kp.CertPEM), string(kp.KeyPEM)
}

// TestConfigRefusesCredentialsInAddresses: an address of any registry that
// carries user info is an error naming the key, and neither that error nor
// any other one of the block shows the credentials.
func TestConfigRefusesCredentialsInAddresses(t *testing.T) {
	const secret = "HUNTER2pw"
	for name, tc := range map[string]struct{ yaml, want string }{
		"consul URL": {`{name: a, type: consul, consul: {address: "http://admin:HUNTER2pw@127.0.0.1:1"}}`,
			`registries[0].consul.address: "http://<redacted>@127.0.0.1:1" carries user info`},
		"consul URL with a user alone (a token)": {`{name: a, type: consul, consul: {address: "https://HUNTER2pw@consul.example:8501/"}}`,
			`registries[0].consul.address: "https://<redacted>@consul.example:8501/" carries user info`},
		"consul URL of a wrong scheme": {`{name: a, type: consul, consul: {address: "ftp://admin:HUNTER2pw@127.0.0.1:1"}}`,
			`registries[0].consul.address: "ftp://<redacted>@127.0.0.1:1" carries user info`},
		"nacos address without a scheme": {`{name: a, type: nacos, nacos: {addresses: [127.0.0.1:8848, "nacos:HUNTER2pw@10.0.0.1:8848"]}}`,
			`registries[0].nacos.addresses[1]: "<redacted>@10.0.0.1:8848" carries user info`},
		"zookeeper server": {`{name: a, type: zookeeper, zookeeper: {servers: ["digest:HUNTER2pw@127.0.0.1:2181"]}}`,
			`registries[0].zookeeper.servers[0]: "<redacted>@127.0.0.1:2181" carries user info`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte("registries:\n- " + tc.yaml + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the credentials:\n%v", err)
			}
		})
	}
	// A user name with an @ is no address.
	if _, err := ParseConfig([]byte("registries:\n- {name: a, type: nacos, nacos: {username: ops@example.com, password: x}}\n")); err != nil {
		t.Errorf("nacos.username with an @: %v", err)
	}
}

// TestConsulExampleOnOneDatacenter: examples/consul works against a
// single-datacenter agent such as the one make demo starts: translate,
// pointed at a real agent instead of 127.0.0.1:8500, prints its service and
// the static registry's, without waiting for sync.timeout.
func TestConsulExampleOnOneDatacenter(t *testing.T) {
	c := harness.StartConsul(t)
	c.RegisterInstance(t, "web", "web-1", "10.0.0.1", 8080, nil, nil, "passing")
	data, err := os.ReadFile("../../examples/consul/meshbridge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	services, err := filepath.Abs("../../examples/file/services.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg["registries"].([]any) {
		reg := r.(map[string]any)
		if consul, ok := reg["consul"].(map[string]any); ok {
			consul["address"] = c.Address()
		}
		if f, ok := reg["file"].(map[string]any); ok {
			f["path"] = services
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "meshbridge.yaml")
	writeFile(t, p, string(out))
	t.Setenv("CONSUL_HTTP_TOKEN", "")
	start := time.Now()
	code, stdout, stderr := run("translate", "--config", p)
	if code != 0 || !strings.Contains(stdout, "name: web.service.consul") || !strings.Contains(stdout, "name: web.static.local") {
		t.Fatalf("translate of examples/consul against one datacenter: exit %d after %s\nstdout:\n%s\nstderr:\n%s",
			code, time.Since(start).Round(time.Second), stdout, stderr)
	}
}

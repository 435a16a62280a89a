package nacos

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/registries"
)

// TestWeight: Nacos's float weights on the common scale where each
// registry's default (Nacos 1.0) is 100 (doc.go rule 6).
func TestWeight(t *testing.T) {
	for _, tc := range []struct {
		in     float64
		want   uint32
		usable bool
	}{
		{1, 100, true},         // Nacos's default weight
		{0.5, 50, true},        // a half-weight instance
		{2.5, 250, true},       // fractions survive
		{1.006, 101, true},     // rounded, not truncated
		{0.001, 1, true},       // a positive weight never rounds to "unusable"
		{0.004, 1, true},       // rounds to 0: kept at 1
		{10000, 1000000, true}, // Nacos's maximum
		{20000, 1000000, true}, // beyond it: capped
		{0, 0, false},          // weight 0: no traffic (Nacos clients skip it)
		{-1, 0, false},
		{math.NaN(), 0, false},
	} {
		got, ok := Weight(tc.in)
		if got != tc.want || ok != tc.usable {
			t.Errorf("Weight(%v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.usable)
		}
	}
}

// TestReadService: which instances are usable and how they convert (doc.go
// rules 6 and 8).
func TestReadService(t *testing.T) {
	host := func(ip string, mod func(*nacosmodel.Instance)) nacosmodel.Instance {
		in := nacosmodel.Instance{Ip: ip, Port: 80, Weight: 1, Healthy: true, Enable: true, ClusterName: "DEFAULT"}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	for _, tc := range []struct {
		name     string
		hosts    []nacosmodel.Instance
		clusters []string
		want     []registries.Instance
		dubbo    bool
	}{
		{
			name: "metadata, cluster label, locality, protocol; internal-nacos-* dropped",
			hosts: []nacosmodel.Instance{host("10.0.0.1", func(in *nacosmodel.Instance) {
				in.Metadata = map[string]string{"protocol": "http", "region": "eu", "zone": "eu-1", "subzone": "r1",
					"internal-nacos-cluster": "DEFAULT", "version": "v1"}
				in.Weight = 2
			})},
			want: []registries.Instance{{
				ID: "ns/G/svc/DEFAULT/10.0.0.1:80", Address: "10.0.0.1", Port: 80, Protocol: "http", Weight: 200,
				Locality: "eu/eu-1/r1",
				Labels: map[string]string{"protocol": "http", "region": "eu", "zone": "eu-1", "subzone": "r1",
					"version": "v1", ClusterLabel: "DEFAULT"},
			}},
		},
		{
			name: "unhealthy, disabled and weight-0 instances are not usable",
			hosts: []nacosmodel.Instance{
				host("10.0.0.1", func(in *nacosmodel.Instance) { in.Healthy = false }),
				host("10.0.0.2", func(in *nacosmodel.Instance) { in.Enable = false }),
				host("10.0.0.3", func(in *nacosmodel.Instance) { in.Weight = 0 }),
				host("10.0.0.4", nil),
			},
			want: []registries.Instance{{ID: "ns/G/svc/DEFAULT/10.0.0.4:80", Address: "10.0.0.4", Port: 80, Weight: 100,
				Labels: map[string]string{ClusterLabel: "DEFAULT"}}},
		},
		{
			name: "a cluster-less instance has no cluster label; IPv6 IDs are bracketed; sorted by ID",
			hosts: []nacosmodel.Instance{
				host("fd00::2", func(in *nacosmodel.Instance) { in.ClusterName = "" }),
				host("10.0.0.9", func(in *nacosmodel.Instance) { in.ClusterName = "" }),
			},
			want: []registries.Instance{
				{ID: "ns/G/svc//10.0.0.9:80", Address: "10.0.0.9", Port: 80, Weight: 100},
				{ID: "ns/G/svc//[fd00::2]:80", Address: "fd00::2", Port: 80, Weight: 100},
			},
		},
		{
			name: "the cluster filter keeps the listed clusters only",
			hosts: []nacosmodel.Instance{
				host("10.0.0.1", func(in *nacosmodel.Instance) { in.ClusterName = "c1" }),
				host("10.0.0.2", func(in *nacosmodel.Instance) { in.ClusterName = "c2" }),
			},
			clusters: []string{"c1"},
			want: []registries.Instance{{ID: "ns/G/svc/c1/10.0.0.1:80", Address: "10.0.0.1", Port: 80, Weight: 100,
				Labels: map[string]string{ClusterLabel: "c1"}}},
		},
		{
			name: "a Dubbo 3 application-level instance marks the service",
			hosts: []nacosmodel.Instance{host("10.0.0.1", func(in *nacosmodel.Instance) {
				in.Metadata = map[string]string{"dubbo.metadata.revision": "abc"}
			})},
			dubbo: true,
			want: []registries.Instance{{ID: "ns/G/svc/DEFAULT/10.0.0.1:80", Address: "10.0.0.1", Port: 80, Weight: 100,
				Labels: map[string]string{"dubbo.metadata.revision": "abc", ClusterLabel: "DEFAULT"}}},
		},
		{
			name:  "no instances: an empty list",
			hosts: nil,
			want:  []registries.Instance{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readService(nacosmodel.Service{Hosts: tc.hosts}, "ns", "G", "svc", tc.clusters)
			if diff := cmp.Diff(tc.want, got.instances); diff != "" {
				t.Errorf("instances (-want +got):\n%s", diff)
			}
			if got.dubbo != tc.dubbo {
				t.Errorf("dubbo = %v, want %v", got.dubbo, tc.dubbo)
			}
		})
	}
}

// TestDubboNames: Dubbo's interface-level registrations are recognised by
// their category prefix (doc.go rule 8).
func TestDubboNames(t *testing.T) {
	for name, want := range map[string]bool{
		"providers:com.example.Greeter:1.0.0:": true,
		"consumers:com.example.Greeter::":      true,
		"routers:com.example.Greeter:1.0.0:g":  true,
		"configurators:com.example.Greeter::":  true,
		"greeter":                              false,
		"com.example.providers:x":              false,
		"providers":                            false,
	} {
		if got := isDubboName(name); got != want {
			t.Errorf("isDubboName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestAllowed: the services allow-list is path.Match globs; empty allows
// all.
func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		name     string
		want     bool
	}{
		{nil, "anything", true},
		{[]string{"web*"}, "web-a", true},
		{[]string{"web*"}, "api", false},
		{[]string{"api", "web?"}, "web1", true},
	} {
		if got := allowed(tc.patterns, tc.name); got != tc.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", tc.patterns, tc.name, got, tc.want)
		}
	}
}

// TestRedactSecrets: configured secrets and the credentials the SDK may
// print are replaced (doc.go rule 11).
func TestRedactSecrets(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`login failed for p4ss-w0rd`, `login failed for <redacted>`},
		{`body={"accessToken":"eyJ.tok","serviceName":"x"}`, `body={"accessToken":"<redacted>","serviceName":"x"}`},
		{`params: accessToken=abc&namespaceId=public`, `params: accessToken=<redacted>&namespaceId=public`},
		{`form password=hunter2 username=u`, `form password=<redacted> username=u`},
		{`"secretKey": "sk-1"`, `"secretKey": "<redacted>"`},
		{`headers:{key:"accessToken" value:"eyJ.tok"}}`, `headers:{key:"accessToken" value:"<redacted>"}}`},
		{`headers:{key:\"accessToken\" value:\"eyJ.tok\"}}`, `headers:{key:\"accessToken\" value:\"<redacted>\"}}`},
		{`nothing secret here`, `nothing secret here`},
	} {
		if got := redactSecrets(tc.in, []string{"p4ss-w0rd"}); got != tc.want {
			t.Errorf("redactSecrets(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSplitServiceName: a pushed name may come grouped.
func TestSplitServiceName(t *testing.T) {
	for in, want := range map[string][2]string{
		"svc":     {"", "svc"},
		"G2@@svc": {"G2", "svc"},
		"G2__svc": {"", "G2__svc"},
	} {
		g, n := splitServiceName(in)
		if g != want[0] || n != want[1] {
			t.Errorf("splitServiceName(%q) = %q, %q; want %q, %q", in, g, n, want[0], want[1])
		}
	}
}

package nacos

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
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
// rule 6).
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
				Labels:   map[string]string{"protocol": "http", "region": "eu", "zone": "eu-1", "subzone": "r1", "version": "v1", ClusterLabel: "DEFAULT"},
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
			name:  "no instances: an empty list",
			hosts: nil,
			want:  []registries.Instance{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readService(nacosmodel.Service{Hosts: tc.hosts}, "ns", "G", "svc", tc.clusters)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("instances (-want +got):\n%s", diff)
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

// TestIsDubboApplication: a service is a Dubbo 3 application when any of
// its instances, usable or not, carries dubbo.metadata.revision or
// dubbo.endpoints (doc.go rule 8).
func TestIsDubboApplication(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []nacosmodel.Instance
		want  bool
	}{
		{name: "no instances"},
		{name: "plain metadata", hosts: []nacosmodel.Instance{{Metadata: map[string]string{"protocol": "dubbo", "version": "v1"}}}},
		{name: "a revision", hosts: []nacosmodel.Instance{{}, {Metadata: map[string]string{"dubbo.metadata.revision": "abc"}}}, want: true},
		{name: "endpoints on an unhealthy instance", hosts: []nacosmodel.Instance{{Healthy: false, Metadata: map[string]string{"dubbo.endpoints": "[]"}}}, want: true},
	} {
		if got := isDubboApplication(tc.hosts); got != tc.want {
			t.Errorf("%s: isDubboApplication = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProvidersService: the Dubbo service a "providers:" name stands for.
func TestProvidersService(t *testing.T) {
	for name, want := range map[string]dubbo.Identity{
		"providers:com.foo.Greeter:1.0.0:g1": {Interface: "com.foo.Greeter", Version: "1.0.0", Group: "g1"},
		"providers:com.foo.Greeter::":        {Interface: "com.foo.Greeter"},
		"providers:com.foo.Greeter::g1":      {Interface: "com.foo.Greeter", Group: "g1"},
		"providers:com.foo.Greeter":          {Interface: "com.foo.Greeter"},
		"providers:com.foo.Greeter:1.0.0":    {Interface: "com.foo.Greeter", Version: "1.0.0"},
		"providers:com.foo.Greeter:1:g:x":    {Interface: "com.foo.Greeter", Version: "1", Group: "g:x"},
		"providers:::":                       {},
	} {
		if got := providersService(name); got != want {
			t.Errorf("providersService(%q) = %+v, want %+v", name, got, want)
		}
	}
}

// dubboHost is a usable Nacos instance of a Dubbo service with metadata.
func dubboHost(ip string, port uint64, meta map[string]string, mod func(*nacosmodel.Instance)) nacosmodel.Instance {
	in := nacosmodel.Instance{Ip: ip, Port: port, Weight: 1, Healthy: true, Enable: true, ClusterName: "DEFAULT", Metadata: meta}
	if mod != nil {
		mod(&in)
	}
	return in
}

// TestReadDubboInterface: a "providers:" service's instances are Dubbo
// providers (doc.go rule 8).
func TestReadDubboInterface(t *testing.T) {
	const name = "providers:com.foo.Greeter:1.0.0:g1"
	greeter := dubbo.Identity{Interface: "com.foo.Greeter", Version: "1.0.0", Group: "g1", Application: "app"}
	meta := func(kv ...string) map[string]string {
		m := map[string]string{"interface": "com.foo.Greeter", "version": "1.0.0", "group": "g1", "side": "provider",
			"application": "app", "internal-nacos-cluster": "DEFAULT"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	labels := func(kv ...string) map[string]string {
		m := map[string]string{"version": "1.0.0", "group": "g1", "application": "app"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		svcName  string // default name
		cfg      dubbo.Config
		hosts    []nacosmodel.Instance
		clusters []string
		want     registries.Service
	}{
		{
			name: "a dubbo-go provider: protocol from metadata, labels without Dubbo's own or internal keys, methods; weight=0 takes the Nacos weight",
			hosts: []nacosmodel.Instance{dubboHost("10.0.0.1", 50051, meta("protocol", "tri", "methods", "b,a", "pid", "42",
				"timestamp", "1700000000000", "weight", "0", "category", "providers", "path", "com.foo.Greeter"), func(in *nacosmodel.Instance) { in.Weight = 10 })},
			want: registries.Service{Name: name, Host: dubbotest.IdentityHost(greeter, ""), PortPerProtocol: true, Instances: []registries.Instance{{
				ID: "10.0.0.1:50051", Address: "10.0.0.1", Port: 50051, Protocol: "tri", Weight: 1000,
				Extra:  &registries.InstanceExtra{Methods: []string{"a", "b"}},
				Labels: labels(),
			}}},
		},
		{
			name: "a Dubbo weight wins over the Nacos weight; no protocol is dubbo; dropParams",
			cfg:  dubbo.Config{DropParams: []string{"owner"}},
			hosts: []nacosmodel.Instance{
				dubboHost("10.0.0.1", 20880, meta("weight", "30", "owner", "team"), func(in *nacosmodel.Instance) { in.Weight = 2 }),
				dubboHost("10.0.0.2", 20880, meta(), func(in *nacosmodel.Instance) { in.Weight = 2.5 }),
			},
			want: registries.Service{Name: name, Host: dubbotest.IdentityHost(greeter, ""), PortPerProtocol: true, Instances: []registries.Instance{
				{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 30, Labels: labels()},
				{ID: "10.0.0.2:20880", Address: "10.0.0.2", Port: 20880, Protocol: "dubbo", Weight: 250, Labels: labels()},
			}},
		},
		{
			name: "one process's dubbo and tri instances are one instance with both ports; duplicates across clusters are one",
			hosts: []nacosmodel.Instance{
				dubboHost("10.0.0.1", 50051, meta("protocol", "tri", "methods", "c"), nil),
				dubboHost("10.0.0.1", 20880, meta("protocol", "dubbo", "methods", "a"), nil),
				dubboHost("10.0.0.1", 20880, meta("protocol", "dubbo", "methods", "a"), func(in *nacosmodel.Instance) { in.ClusterName = "other" }),
			},
			want: registries.Service{Name: name, Host: dubbotest.IdentityHost(greeter, ""), PortPerProtocol: true, Instances: []registries.Instance{{
				ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 100,
				Extra: &registries.InstanceExtra{
					Ports:   []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}},
					Methods: []string{"a", "c"},
				},
				Labels: labels(),
			}}},
		},
		{
			name: "unhealthy, disabled, weight-0 and filtered-out instances are not usable; consumers are ignored",
			hosts: []nacosmodel.Instance{
				dubboHost("10.0.0.1", 20880, meta(), func(in *nacosmodel.Instance) { in.Healthy = false }),
				dubboHost("10.0.0.2", 20880, meta(), func(in *nacosmodel.Instance) { in.Enable = false }),
				dubboHost("10.0.0.3", 20880, meta(), func(in *nacosmodel.Instance) { in.Weight = 0 }),
				dubboHost("10.0.0.4", 20880, meta(), func(in *nacosmodel.Instance) { in.ClusterName = "c2" }),
				dubboHost("10.0.0.5", 20880, meta("side", "consumer"), nil),
				dubboHost("10.0.0.6", 20880, meta(), nil),
			},
			clusters: []string{"DEFAULT"},
			want: registries.Service{Name: name, Host: dubbotest.IdentityHost(greeter, ""), PortPerProtocol: true, Instances: []registries.Instance{
				{ID: "10.0.0.6:20880", Address: "10.0.0.6", Port: 20880, Protocol: "dubbo", Weight: 100, Labels: labels()},
			}},
		},
		{
			name:    "the name's interface, version and group, whatever the parameters; a missing interface parameter is the name's",
			svcName: "providers:com.foo.Greeter:2.0.0:",
			hosts:   []nacosmodel.Instance{dubboHost("10.0.0.1", 20880, map[string]string{"version": "1.0.0", "application": "app"}, nil)},
			want: registries.Service{Name: "providers:com.foo.Greeter:2.0.0:",
				Host: dubbotest.IdentityHost(dubbo.Identity{Interface: "com.foo.Greeter", Version: "2.0.0", Application: "app"}, ""), PortPerProtocol: true,
				Instances: []registries.Instance{{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 100,
					Labels: map[string]string{"version": "1.0.0", "application": "app"}}}},
		},
		{
			name:    "no interface in the name nor the parameters: malformed, named <ip>:<port>",
			svcName: "providers::1.0.0:",
			hosts:   []nacosmodel.Instance{dubboHost("10.0.0.9", 20880, map[string]string{"side": "provider"}, nil)},
			want: registries.Service{Name: "providers::1.0.0:", Host: dubbotest.IdentityHost(dubbo.Identity{Version: "1.0.0"}, ""), PortPerProtocol: true,
				Instances: []registries.Instance{registries.InvalidInstance("10.0.0.9:20880",
					"provider has no interface (no interface parameter and no path)")}},
		},
		{
			name: "no instance: the name's service, empty",
			want: registries.Service{Name: name, Host: dubbotest.IdentityHost(dubbo.Identity{Interface: "com.foo.Greeter", Version: "1.0.0", Group: "g1"}, ""), PortPerProtocol: true,
				Instances: []registries.Instance{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.svcName
			if n == "" {
				n = name
			}
			got := readDubboInterface(nacosmodel.Service{Hosts: tc.hosts}, "", n, tc.clusters, identityBuilder(t, tc.cfg))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readDubboInterface (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadDubboApplication: a Dubbo 3 application's instances, ports from
// dubbo.endpoints (doc.go rule 8).
func TestReadDubboApplication(t *testing.T) {
	shopHost := dubbotest.IdentityHost(dubbo.Identity{Application: "shop"}, "")
	for _, tc := range []struct {
		name  string
		hosts []nacosmodel.Instance
		want  registries.Service
	}{
		{
			name: "ports from dubbo.endpoints; labels without volatile or internal keys; Nacos weight unless a weight is set",
			hosts: []nacosmodel.Instance{
				dubboHost("10.0.0.1", 20880, map[string]string{
					"dubbo.endpoints":             `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`,
					"dubbo.metadata.revision":     "r1",
					"dubbo.metadata.storage-type": "local",
					"timestamp":                   "1700000000000",
					"internal-nacos-service":      "shop",
				}, func(in *nacosmodel.Instance) { in.Weight = 3 }),
				dubboHost("10.0.0.2", 20880, map[string]string{"dubbo.metadata.revision": "r1", "weight": "40"}, nil),
				dubboHost("10.0.0.3", 20880, map[string]string{"dubbo.metadata.revision": "r1"}, func(in *nacosmodel.Instance) { in.Healthy = false }),
			},
			want: registries.Service{Name: "shop", Host: shopHost, PortPerProtocol: true, Instances: []registries.Instance{
				{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 300,
					Extra:  &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}},
					Labels: nil},
				{ID: "10.0.0.2:20880", Address: "10.0.0.2", Port: 20880, Weight: 40, Labels: nil},
			}},
		},
		{
			name: "unreadable dubbo.endpoints: malformed, named <ip>:<port>",
			hosts: []nacosmodel.Instance{
				dubboHost("10.0.0.1", 20880, map[string]string{"dubbo.endpoints": "dubbo:20880"}, nil),
			},
			want: registries.Service{Name: "shop", Host: shopHost, PortPerProtocol: true, Instances: []registries.Instance{
				registries.InvalidInstance("10.0.0.1:20880", "dubbo.endpoints: invalid character 'd' looking for beginning of value"),
			}},
		},
		{
			name: "no usable instance: an empty list",
			hosts: []nacosmodel.Instance{dubboHost("10.0.0.1", 20880, map[string]string{"dubbo.metadata.revision": "r1"},
				func(in *nacosmodel.Instance) { in.Enable = false })},
			want: registries.Service{Name: "shop", Host: shopHost, PortPerProtocol: true, Instances: []registries.Instance{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readDubboApplication(nacosmodel.Service{Hosts: tc.hosts}, "", "shop", nil, identityBuilder(t, dubbo.Config{}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readDubboApplication (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSameInstances: every field an emitted instance carries is compared,
// Dubbo's ports, methods and invalid detail included.
func TestSameInstances(t *testing.T) {
	base := registries.Instance{ID: "a", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 100,
		Labels: map[string]string{"k": "v"},
		Extra: &registries.InstanceExtra{
			Ports:   []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}},
			Methods: []string{"a"},
		}}
	// extra changes a copy of in's Extra, which in shares with base.
	extra := func(in *registries.Instance, mod func(*registries.InstanceExtra)) {
		e := *in.Extra
		mod(&e)
		in.Extra = &e
	}
	for _, tc := range []struct {
		name string
		mod  func(*registries.Instance)
		same bool
	}{
		{name: "equal", mod: func(*registries.Instance) {}, same: true},
		{name: "an equal copy of Extra", mod: func(in *registries.Instance) { extra(in, func(*registries.InstanceExtra) {}) }, same: true},
		{name: "a port", mod: func(in *registries.Instance) {
			extra(in, func(e *registries.InstanceExtra) { e.Ports = []registries.Port{{Number: 20880, Protocol: "dubbo"}} })
		}},
		{name: "a method", mod: func(in *registries.Instance) {
			extra(in, func(e *registries.InstanceExtra) { e.Methods = []string{"a", "b"} })
		}},
		{name: "invalid", mod: func(in *registries.Instance) { extra(in, func(e *registries.InstanceExtra) { e.Invalid = "bad" }) }},
		{name: "a label", mod: func(in *registries.Instance) { in.Labels = map[string]string{"k": "w"} }},
		{name: "the weight", mod: func(in *registries.Instance) { in.Weight = 1 }},
	} {
		other := base
		tc.mod(&other)
		if got := registries.SameInstances([]registries.Instance{base}, []registries.Instance{other}); got != tc.same {
			t.Errorf("%s: SameInstances = %v, want %v", tc.name, got, tc.same)
		}
	}
}

func TestProtocolOf(t *testing.T) {
	cases := map[string]struct {
		meta map[string]string
		want string
	}{
		"the protocol metadata":                       {meta: map[string]string{"protocol": "grpc"}, want: "grpc"},
		"nothing declared: none (translate's tcp)":    {meta: map[string]string{"version": "v1"}, want: ""},
		"a Spring Cloud registration is http":         {meta: map[string]string{"preserved.register.source": "SPRING_CLOUD"}, want: "http"},
		"a Spring Cloud registration's protocol wins": {meta: map[string]string{"preserved.register.source": "SPRING_CLOUD", "protocol": "grpc"}, want: "grpc"},
		"another register source says nothing":        {meta: map[string]string{"preserved.register.source": "DUBBO"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := protocolOf(tc.meta); got != tc.want {
				t.Errorf("protocolOf(%v) = %q, want %q", tc.meta, got, tc.want)
			}
		})
	}
}

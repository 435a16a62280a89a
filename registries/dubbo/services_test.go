package dubbo

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/registries"
)

// providers parses raw provider URLs, each encoded once as ZooKeeper holds
// it.
func providers(t *testing.T, raws ...string) []Provider {
	t.Helper()
	out := make([]Provider, 0, len(raws))
	for _, raw := range raws {
		p, err := ParseProviderURL(url.QueryEscape(raw))
		if err != nil {
			t.Fatalf("ParseProviderURL(%q): %v", raw, err)
		}
		out = append(out, p)
	}
	return out
}

// mustBuilder is NewBuilder(c), failing t on an error.
func mustBuilder(t testing.TB, c Config) *Builder {
	t.Helper()
	b, err := NewBuilder(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// identityBuilder is the Builder of c named by templates that write every
// field of a service's Identity (and its namespace), so that a table's
// want states them (idHost).
func identityBuilder(t *testing.T, c Config) *Builder {
	t.Helper()
	c.InterfaceHostTemplate = "{{.Interface}}|{{.Group}}|{{.Version}}|{{.Application}}|{{.Namespace}}"
	c.ApplicationHostTemplate = "app|{{.Application}}|{{.Namespace}}"
	return mustBuilder(t, c)
}

// idHost is the host identityBuilder names id by, in no namespace: the
// templates see the version with "." replaced by "-" (doc.go rule 10).
func idHost(id Identity) string {
	if id.Interface == "" {
		return "app|" + id.Application + "|"
	}
	return id.Interface + "|" + id.Group + "|" + strings.ReplaceAll(id.Version, ".", "-") + "|" + id.Application + "|"
}

// TestInterfaceServices: providers become interface-level services (doc.go
// rules 1 and 3-6).
func TestInterfaceServices(t *testing.T) {
	const iface = "com.foo.S"
	for _, tc := range []struct {
		name      string
		cfg       Config
		iface     string
		providers []string // raw URLs
		malformed []Malformed
		want      []registries.Service
	}{
		{
			name: "one service per interface, group and version, sorted by name",
			providers: []string{
				"dubbo://10.0.0.3:20880/com.foo.S?application=b&version=2.0.0",
				"dubbo://10.0.0.2:20880/com.foo.S?application=a&group=g2&version=1.0.0",
				"dubbo://10.0.0.1:20880/com.foo.S?application=a&group=g1&version=1.0.0",
			},
			want: []registries.Service{
				{
					Name: "providers:com.foo.S:1.0.0:g1",
					Host: idHost(Identity{Interface: iface, Group: "g1", Version: "1.0.0", Application: "a"}), PortPerProtocol: true,
					Instances: []registries.Instance{{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
						Labels: map[string]string{"application": "a", "group": "g1", "version": "1.0.0"}}},
				},
				{
					Name: "providers:com.foo.S:1.0.0:g2",
					Host: idHost(Identity{Interface: iface, Group: "g2", Version: "1.0.0", Application: "a"}), PortPerProtocol: true,
					Instances: []registries.Instance{{ID: "10.0.0.2:20880", Address: "10.0.0.2", Port: 20880, Protocol: "dubbo",
						Labels: map[string]string{"application": "a", "group": "g2", "version": "1.0.0"}}},
				},
				{
					Name: "providers:com.foo.S:2.0.0:",
					Host: idHost(Identity{Interface: iface, Version: "2.0.0", Application: "b"}), PortPerProtocol: true,
					Instances: []registries.Instance{{ID: "10.0.0.3:20880", Address: "10.0.0.3", Port: 20880, Protocol: "dubbo",
						Labels: map[string]string{"application": "b", "version": "2.0.0"}}},
				},
			},
		},
		{
			name: "one process's dubbo and tri URLs are one instance with a port per protocol and the union of their methods",
			providers: []string{
				"tri://10.0.0.1:50051/com.foo.S?application=a&methods=c,b&side=provider",
				"dubbo://10.0.0.1:20880/com.foo.S?application=a&methods=b,a&side=provider",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface, Application: "a"}), PortPerProtocol: true,
				Instances: []registries.Instance{{
					ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
					Extra: &registries.InstanceExtra{
						Ports:   []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}},
						Methods: []string{"a", "b", "c"},
					},
					Labels: map[string]string{"application": "a"},
				}},
			}},
		},
		{
			name: "the call defaults a provider declares (timeout, retries, loadbalance) are kept as written, not as labels",
			providers: []string{
				"tri://10.0.0.1:50051/com.foo.S?application=a&timeout=200&retries=2&loadbalance=leastactive&side=provider",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface, Application: "a"}), PortPerProtocol: true,
				Instances: []registries.Instance{{
					ID: "10.0.0.1:50051", Address: "10.0.0.1", Port: 50051, Protocol: "tri",
					Extra: &registries.InstanceExtra{
						Defaults: registries.ProviderDefaults{Timeout: "200", Retries: "2", LoadBalance: "leastactive"},
					},
					Labels: map[string]string{"application": "a"},
				}},
			}},
		},
		{
			name: "two processes on one address are two instances, their ports paired in order",
			providers: []string{
				"dubbo://10.0.0.1:20881/com.foo.S?application=a",
				"tri://10.0.0.1:50052/com.foo.S?application=a",
				"tri://10.0.0.1:50051/com.foo.S?application=a",
				"dubbo://10.0.0.1:20880/com.foo.S?application=a",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface, Application: "a"}), PortPerProtocol: true,
				Instances: []registries.Instance{
					{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
						Extra:  &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}},
						Labels: map[string]string{"application": "a"}},
					{ID: "10.0.0.1:20881", Address: "10.0.0.1", Port: 20881, Protocol: "dubbo",
						Extra:  &registries.InstanceExtra{Ports: []registries.Port{{Number: 20881, Protocol: "dubbo"}, {Number: 50052, Protocol: "tri"}}},
						Labels: map[string]string{"application": "a"}},
				},
			}},
		},
		{
			name: "two processes of one protocol on one address are two instances",
			providers: []string{
				"dubbo://10.0.0.1:20881/com.foo.S?application=b",
				"dubbo://10.0.0.1:20880/com.foo.S?application=a",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface, Application: "a"}), PortPerProtocol: true,
				Instances: []registries.Instance{
					{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
						Labels: map[string]string{"application": "a"}},
					{ID: "10.0.0.1:20881", Address: "10.0.0.1", Port: 20881, Protocol: "dubbo",
						Labels: map[string]string{"application": "b"}},
				},
			}},
		},
		{
			name: "labels leave out Dubbo's own params, empty values and dropParams; weight is kept apart; a user's own param stays",
			cfg:  Config{DropParams: []string{"owner"}},
			providers: []string{
				"dubbo://10.0.0.1:20880/com.foo.S?side=provider&pid=1&timestamp=2&release=3.2.0&methods=m&bean.name=x&" +
					"service.filter=f&token=s3cret&dubbo.metadata.revision=r&dubbo.endpoints=[]&owner=team&deprecated=false&weight=50" +
					"&accesslog=&tag=&dubbo.tag=gray&env=prod",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface}), PortPerProtocol: true,
				Instances: []registries.Instance{{
					ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 50,
					Extra:  &registries.InstanceExtra{Methods: []string{"m"}},
					Labels: map[string]string{"dubbo.tag": "gray", "env": "prod"},
				}},
			}},
		},
		{
			name:      "weight 0 (dubbo-go's) is left to the default",
			providers: []string{"dubbo://10.0.0.1:20880/com.foo.S?weight=0"},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface}), PortPerProtocol: true,
				Instances: []registries.Instance{{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
					Labels: nil}},
			}},
		},
		{
			name: "a provider's previous registration (restarted, its old URL not expired yet) is one instance: the newest",
			providers: []string{
				"dubbo://10.0.0.1:20880/com.foo.S?timestamp=200&pid=2&env=new",
				"dubbo://10.0.0.1:20880/com.foo.S?timestamp=100&pid=1&env=old",
				"dubbo://10.0.0.1:20880/com.foo.S?timestamp=99&pid=0&env=older",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface}), PortPerProtocol: true,
				Instances: []registries.Instance{{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
					Labels: map[string]string{"env": "new"}}},
			}},
		},
		{
			name: "two spellings of one IPv6 address are one address; an IPv4-mapped address is IPv4",
			providers: []string{
				"dubbo://[0:0:0:0:0:0:0:1]:20880/com.foo.S?application=a",
				"tri://[::1]:50051/com.foo.S?application=a",
				"dubbo://[::ffff:10.0.0.1]:20880/com.foo.S?application=a",
			},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface, Application: "a"}), PortPerProtocol: true,
				Instances: []registries.Instance{
					{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
						Labels: map[string]string{"application": "a"}},
					{ID: "::1:20880", Address: "::1", Port: 20880, Protocol: "dubbo",
						Extra:  &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}},
						Labels: map[string]string{"application": "a"}},
				},
			}},
		},
		{
			name: "malformed registrations join the first service as invalid instances",
			providers: []string{
				"dubbo://10.0.0.2:20880/com.foo.S?group=g2",
				"dubbo://10.0.0.1:20880/com.foo.S?group=g1",
			},
			malformed: []Malformed{{ID: "dubbo%3A%2F%2Fbad", Detail: "no port"}},
			want: []registries.Service{
				{
					Name: "providers:com.foo.S::g1",
					Host: idHost(Identity{Interface: iface, Group: "g1"}), PortPerProtocol: true,
					Instances: []registries.Instance{
						{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo",
							Labels: map[string]string{"group": "g1"}},
						registries.InvalidInstance("dubbo%3A%2F%2Fbad", "no port"),
					},
				},
				{
					Name: "providers:com.foo.S::g2",
					Host: idHost(Identity{Interface: iface, Group: "g2"}), PortPerProtocol: true,
					Instances: []registries.Instance{{ID: "10.0.0.2:20880", Address: "10.0.0.2", Port: 20880, Protocol: "dubbo",
						Labels: map[string]string{"group": "g2"}}},
				},
			},
		},
		{
			name:      "with no usable provider the malformed ones make the interface's service",
			iface:     iface,
			malformed: []Malformed{{ID: "a", Detail: "bad escape"}, {ID: "b", Detail: "port 0"}},
			want: []registries.Service{{
				Name: "providers:com.foo.S::",
				Host: idHost(Identity{Interface: iface}), PortPerProtocol: true,
				Instances: []registries.Instance{registries.InvalidInstance("a", "bad escape"), registries.InvalidInstance("b", "port 0")},
			}},
		},
		{
			name: "nothing: no service",
			want: []registries.Service{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := identityBuilder(t, tc.cfg).InterfaceServices("", tc.iface, providers(t, tc.providers...), tc.malformed)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InterfaceServices (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplicationService: Dubbo 3 application-level instances become the
// application's service (doc.go rules 5 and 7).
func TestApplicationService(t *testing.T) {
	app := func(addr string, port uint32, meta map[string]string) AppInstance {
		t.Helper()
		a, err := AppInstanceFromMetadata("shop", addr, port, meta)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		name      string
		cfg       Config
		insts     []AppInstance
		malformed []Malformed
		methods   []string
		want      registries.Service
	}{
		{
			name: "ports from dubbo.endpoints, lower-cased, lowest first; labels without Dubbo's own keys",
			cfg:  Config{DropParams: []string{"owner"}},
			insts: []AppInstance{app("10.0.0.1", 20880, map[string]string{
				MetaEndpoints:   `[{"port":50051,"protocol":"TRI"},{"port":20880,"protocol":"dubbo"}]`,
				MetaRevision:    "r1",
				MetaStorageType: "local",
				"timestamp":     "1700000000000",
				"owner":         "team",
				"zone":          "z1",
				"weight":        "25",
			})},
			methods: []string{"a", "b"},
			want: registries.Service{
				Name: "shop", Host: idHost(Identity{Application: "shop"}), PortPerProtocol: true,
				Instances: []registries.Instance{{
					ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 25,
					Extra: &registries.InstanceExtra{
						Ports:   []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}},
						Methods: []string{"a", "b"},
					},
					Labels: map[string]string{"zone": "z1"},
				}},
			},
		},
		{
			name: "one endpoint gives the port and protocol; none leaves the instance's own with no protocol; sorted by ID",
			insts: []AppInstance{
				app("10.0.0.3", 9999, map[string]string{MetaEndpoints: `[{"port":50051,"protocol":"tri"}]`}),
				app("10.0.0.2", 8080, map[string]string{MetaRevision: "r1"}),
			},
			malformed: []Malformed{{ID: "10.0.0.0:1", Detail: "dubbo.endpoints: invalid"}},
			want: registries.Service{
				Name: "shop", Host: idHost(Identity{Application: "shop"}), PortPerProtocol: true,
				Instances: []registries.Instance{
					registries.InvalidInstance("10.0.0.0:1", "dubbo.endpoints: invalid"),
					{ID: "10.0.0.2:8080", Address: "10.0.0.2", Port: 8080},
					{ID: "10.0.0.3:9999", Address: "10.0.0.3", Port: 50051, Protocol: "tri"},
				},
			},
		},
		{
			name: "two instances of one ID (two spellings of one IP) are one: the newest",
			insts: []AppInstance{
				app("::1", 20880, map[string]string{"timestamp": "2", "zone": "new"}),
				app("0:0:0:0:0:0:0:1", 20880, map[string]string{"timestamp": "3", "zone": "newest"}),
				app("::1", 20880, map[string]string{"timestamp": "1", "zone": "old"}),
			},
			want: registries.Service{
				Name: "shop", Host: idHost(Identity{Application: "shop"}), PortPerProtocol: true,
				Instances: []registries.Instance{{ID: "::1:20880", Address: "::1", Port: 20880,
					Labels: map[string]string{"zone": "newest"}}},
			},
		},
		{
			name: "one process's instances per protocol port (dubbo-go), each listing every endpoint, are one: the lowest port",
			insts: []AppInstance{
				app("10.0.0.1", 50051, map[string]string{MetaEndpoints: `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`, "id": "b"}),
				app("10.0.0.1", 20880, map[string]string{MetaEndpoints: `[{"port":50051,"protocol":"tri"},{"port":20880,"protocol":"dubbo"}]`, "id": "a"}),
				// Another process on the address, and one on another address.
				app("10.0.0.1", 20881, map[string]string{MetaEndpoints: `[{"port":20881,"protocol":"dubbo"}]`}),
				app("10.0.0.2", 20880, map[string]string{MetaEndpoints: `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`}),
			},
			want: registries.Service{
				Name: "shop", Host: idHost(Identity{Application: "shop"}), PortPerProtocol: true,
				Instances: []registries.Instance{
					{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Labels: map[string]string{"id": "a"},
						Extra: &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}}},
					{ID: "10.0.0.1:20881", Address: "10.0.0.1", Port: 20881, Protocol: "dubbo"},
					{ID: "10.0.0.2:20880", Address: "10.0.0.2", Port: 20880, Protocol: "dubbo",
						Extra: &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}}},
				},
			},
		},
		{
			name: "instances without endpoints are never merged",
			insts: []AppInstance{
				app("10.0.0.1", 8081, map[string]string{MetaRevision: "r"}),
				app("10.0.0.1", 8080, map[string]string{MetaRevision: "r"}),
			},
			want: registries.Service{
				Name: "shop", Host: idHost(Identity{Application: "shop"}), PortPerProtocol: true,
				Instances: []registries.Instance{
					{ID: "10.0.0.1:8080", Address: "10.0.0.1", Port: 8080},
					{ID: "10.0.0.1:8081", Address: "10.0.0.1", Port: 8081},
				},
			},
		},
		{
			name: "no instance",
			want: registries.Service{Name: "shop", Host: idHost(Identity{Application: "shop"}), PortPerProtocol: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var metadata map[string]RevisionMetadata
			if tc.methods != nil {
				metadata = map[string]RevisionMetadata{"r1": {Methods: tc.methods}}
			}
			got := identityBuilder(t, tc.cfg).ApplicationService("", "shop", tc.insts, tc.malformed, metadata)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ApplicationService (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplicationServiceDefaults: an application-level instance gets the
// call defaults of its own revision's MetadataInfo (two revisions in a
// rolling upgrade, one declaring timeout=200, the other timeout=500), the
// methods of every revision, and one with no MetadataInfo read gets the
// methods only.
func TestApplicationServiceDefaults(t *testing.T) {
	inst := func(addr, revision string) AppInstance {
		t.Helper()
		a, err := AppInstanceFromMetadata("shop", addr, 50051, map[string]string{
			MetaEndpoints: `[{"port":50051,"protocol":"tri"}]`, MetaRevision: revision, MetaStorageType: "remote"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	svc := identityBuilder(t, Config{}).ApplicationService("", "shop",
		[]AppInstance{inst("10.0.0.1", "r1"), inst("10.0.0.2", "r2"), inst("10.0.0.3", "r3")}, nil,
		map[string]RevisionMetadata{
			"r1": {Methods: []string{"Greet"}, Defaults: registries.ProviderDefaults{Timeout: "200", Retries: "2"}},
			"r2": {Methods: []string{"Greet", "Hello"}, Defaults: registries.ProviderDefaults{Timeout: "500"}},
		})
	want := map[string]registries.ProviderDefaults{
		"10.0.0.1:50051": {Timeout: "200", Retries: "2"},
		"10.0.0.2:50051": {Timeout: "500"},
		"10.0.0.3:50051": {},
	}
	for _, i := range svc.Instances {
		if got := i.Defaults(); got != want[i.ID] {
			t.Errorf("%s: defaults %+v, want %+v", i.ID, got, want[i.ID])
		}
		if got := i.Methods(); !slices.Equal(got, []string{"Greet", "Hello"}) {
			t.Errorf("%s: methods %v, want every revision's", i.ID, got)
		}
	}
	if len(svc.Instances) != 3 {
		t.Errorf("instances %+v", svc.Instances)
	}
}

package eureka

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/registries"
)

func TestServed(t *testing.T) {
	cases := []struct {
		status, overridden string
		want               bool
	}{
		{"UP", "", true},
		{"UP", "UNKNOWN", true},
		{"UP", "UP", true},
		{"UP", "OUT_OF_SERVICE", false},
		{"UP", "DOWN", false},
		{"DOWN", "", false},
		{"OUT_OF_SERVICE", "OUT_OF_SERVICE", false},
		{"STARTING", "UNKNOWN", false},
		{"UNKNOWN", "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		if got := served(&instance{Status: tc.status, OverriddenStatus: tc.overridden}); got != tc.want {
			t.Errorf("served(status %q, overridden %q) = %v, want %v", tc.status, tc.overridden, got, tc.want)
		}
	}
}

func TestConvert(t *testing.T) {
	base := func(f func(*instance)) *instance {
		in := &instance{App: "ORDERS", ID: "h1:orders:8080", HostName: "h1.example.com", IPAddr: "10.0.0.5", Status: "UP",
			Port: 8080, PortEnabled: true, SecurePort: 443}
		if f != nil {
			f(in)
		}
		return in
	}
	cases := map[string]struct {
		in   *instance
		want registries.Instance
	}{
		"Spring's defaults: ipAddr, port 8080, http": {
			in:   base(nil),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8080, Protocol: "http"},
		},
		"several instances per machine: own port": {
			in:   base(func(in *instance) { in.ID, in.Port = "h1:orders:18081", 18081 }),
			want: registries.Instance{ID: "ORDERS/h1:orders:18081", Address: "10.0.0.5", Port: 18081, Protocol: "http"},
		},
		"hostname when ipAddr is not an IP": {
			in:   base(func(in *instance) { in.IPAddr = "" }),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "h1.example.com", Port: 8080, Protocol: "http"},
		},
		"IPv6": {
			in:   base(func(in *instance) { in.IPAddr = "fd00::5" }),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "fd00::5", Port: 8080, Protocol: "http"},
		},
		"protocol metadata, labels, zone": {
			in: base(func(in *instance) {
				in.Metadata = map[string]string{"protocol": "grpc", "zone": "z1", "version": "v2"}
			}),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8080, Protocol: "grpc", Locality: "/z1/",
				Labels: map[string]string{"protocol": "grpc", "zone": "z1", "version": "v2"}},
		},
		"region, zone and subzone metadata": {
			in: base(func(in *instance) {
				in.Metadata = map[string]string{"region": "eu", "zone": "eu-1", "subzone": "rack4"}
			}),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8080, Protocol: "http", Locality: "eu/eu-1/rack4",
				Labels: map[string]string{"region": "eu", "zone": "eu-1", "subzone": "rack4"}},
		},
		"Amazon availability zone": {
			in:   base(func(in *instance) { in.AvailabilityZone = "us-east-1a" }),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8080, Protocol: "http", Locality: "us-east-1/us-east-1a/"},
		},
		"metadata zone wins over the availability zone": {
			in: base(func(in *instance) {
				in.AvailabilityZone, in.Metadata = "us-east-1a", map[string]string{"zone": "z9"}
			}),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8080, Protocol: "http", Locality: "/z9/",
				Labels: map[string]string{"zone": "z9"}},
		},
		"port and securePort: port": {
			in:   base(func(in *instance) { in.SecureEnabled, in.SecurePort = true, 8443 }),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8080, Protocol: "http"},
		},
		"securePort only": {
			in:   base(func(in *instance) { in.PortEnabled, in.SecureEnabled, in.SecurePort = false, true, 8443 }),
			want: registries.Instance{ID: "ORDERS/h1:orders:8080", Address: "10.0.0.5", Port: 8443, Protocol: "https"},
		},
		"no enabled port": {
			in:   base(func(in *instance) { in.PortEnabled = false }),
			want: registries.InvalidInstance("ORDERS/h1:orders:8080", "neither port nor securePort is enabled"),
		},
		"enabled port 0": {
			in:   base(func(in *instance) { in.Port = 0 }),
			want: registries.InvalidInstance("ORDERS/h1:orders:8080", "port is enabled but not in 1-65535"),
		},
		"enabled securePort out of range": {
			in:   base(func(in *instance) { in.PortEnabled, in.SecureEnabled, in.SecurePort = false, true, 70000 }),
			want: registries.InvalidInstance("ORDERS/h1:orders:8080", "securePort is enabled but not in 1-65535"),
		},
		"no address": {
			in:   base(func(in *instance) { in.IPAddr, in.HostName = "", "" }),
			want: registries.InvalidInstance("ORDERS/h1:orders:8080", "no ipAddr or hostName"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, convert(tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadAppServesUpInstancesOnly(t *testing.T) {
	insts := map[string]*instance{
		"a": {App: "WEB", ID: "a", IPAddr: "10.0.0.1", Status: "UP", Port: 80, PortEnabled: true},
		"b": {App: "WEB", ID: "b", IPAddr: "10.0.0.2", Status: "DOWN", Port: 80, PortEnabled: true},
		"c": {App: "WEB", ID: "c", IPAddr: "10.0.0.3", Status: "UP", OverriddenStatus: "OUT_OF_SERVICE", Port: 80, PortEnabled: true},
		"d": {App: "WEB", ID: "d", IPAddr: "10.0.0.4", Status: "STARTING", Port: 80, PortEnabled: true},
	}
	svc := readApp("WEB", insts)
	if len(svc.Instances) != 1 || svc.Instances[0].ID != "WEB/a" || svc.PortPerProtocol || svc.Name != "WEB" {
		t.Errorf("readApp = %+v, want WEB/a alone", svc)
	}
	if svc := readApp("WEB", map[string]*instance{"b": insts["b"]}); svc.Instances == nil || len(svc.Instances) != 0 {
		t.Errorf("an application with no UP instance: %+v, want an empty, non-nil list", svc.Instances)
	}
}

func TestAllowed(t *testing.T) {
	cases := []struct {
		patterns []string
		app      string
		want     bool
	}{
		{nil, "ORDERS", true},
		{[]string{"orders"}, "ORDERS", true},
		{[]string{"ORD*"}, "ORDERS", true},
		{[]string{"pay-*"}, "ORDERS", false},
		{[]string{"pay-*", "*ers"}, "ORDERS", true},
	}
	for _, tc := range cases {
		if got := allowed(tc.patterns, tc.app); got != tc.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", tc.patterns, tc.app, got, tc.want)
		}
	}
}

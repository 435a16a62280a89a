package translate

import (
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
)

func TestHost(t *testing.T) {
	cases := map[string]struct {
		opts    Options
		svc     registries.Service
		want    string
		wantErr string
	}{
		"consul default is <service>.service.consul": {
			svc: registries.Service{Name: "web"}, want: "web.service.consul",
		},
		"consul remote datacenter is <service>.service.<dc>.consul": {
			svc: registries.Service{Name: "web", Datacenter: "dc2"}, want: "web.service.dc2.consul",
		},
		"host is lower-cased and underscores become dashes": {
			svc: registries.Service{Name: "Web_API"}, want: "web-api.service.consul",
		},
		"svc.Host is used as is, still lower-cased": {
			svc: registries.Service{Name: "ignored", Host: "Web.Static.Local"}, want: "web.static.local",
		},
		"file default is the service name": {
			opts: Options{HostTemplate: DefaultHostTemplate}, svc: registries.Service{Name: "web.static.local"}, want: "web.static.local",
		},
		"custom template sees group and namespace": {
			opts: Options{HostTemplate: "{{.Service}}.{{.Group}}.{{.Namespace}}.nacos"},
			svc:  registries.Service{Name: "orders", Group: "DEFAULT_GROUP", Namespace: "public"},
			want: "orders.default-group.public.nacos",
		},
		"custom template wins over the remote default": {
			opts: Options{HostTemplate: "{{.Service}}.mesh"}, svc: registries.Service{Name: "web", Datacenter: "dc2"},
			want: "web.mesh",
		},
		"invalid characters are an error": {
			svc: registries.Service{Name: "web api"}, wantErr: "not a DNS-1123 subdomain",
		},
		"a label past 63 characters is an error": {
			svc: registries.Service{Name: strings.Repeat("a", 64)}, wantErr: "not a DNS-1123 subdomain",
		},
		"a host too long for WorkloadEntry names is an error": {
			svc: registries.Service{Host: strings.Repeat(strings.Repeat("a", 60)+".", 4) + "io"}, wantErr: "longer than 242",
		},
		"inline mode allows hosts up to 253 characters": {
			opts: Options{Endpoints: EndpointsInline},
			svc:  registries.Service{Host: strings.Repeat(strings.Repeat("a", 60)+".", 4) + "io"},
			want: strings.Repeat(strings.Repeat("a", 60)+".", 4) + "io",
		},
		"an all-numeric top-level label is an error": {
			svc: registries.Service{Host: "10.0.0.1"}, wantErr: "all-numeric",
		},
		"an empty host is an error": {
			opts: Options{HostTemplate: DefaultHostTemplate}, svc: registries.Service{}, wantErr: "empty host",
		},
		"a trailing dot is an error": {
			svc: registries.Service{Host: "web.local."}, wantErr: "not a DNS-1123 subdomain",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := mustNew(t, tc.opts).Host(tc.svc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Host = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Host = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestTranslateInvalidHostIsAnError(t *testing.T) {
	_, err := mustNew(t, Options{}).Translate(registries.Service{Name: "bad name"}, Sticky{})
	if err == nil {
		t.Fatal("Translate accepted an invalid host")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	valid := Options{Registry: "consul-dc1", HostTemplate: consul.HostTemplate, Namespace: "meshbridge"}
	cases := map[string]struct {
		mutate  func(*Options)
		wantErr string
	}{
		"registry must be a DNS-1123 label":      {func(o *Options) { o.Registry = "Consul_DC1" }, "registry:"},
		"registry is required":                   {func(o *Options) { o.Registry = "" }, "registry:"},
		"namespace must be a DNS-1123 label":     {func(o *Options) { o.Namespace = "Mesh.Bridge" }, "namespace:"},
		"servicePort must fit in 16 bits":        {func(o *Options) { o.ServicePort = 70000 }, "servicePort:"},
		"resolution must be STATIC or DNS":       {func(o *Options) { o.Resolution = "NONE" }, "resolution:"},
		"endpoints must be a known mode":         {func(o *Options) { o.Endpoints = "both" }, "endpoints:"},
		"revision must be a label value":         {func(o *Options) { o.Revision = "1.2/3" }, "revision:"},
		"instance must be a label value":         {func(o *Options) { o.Instance = "blue/green" }, "instance:"},
		"instance is at most 63 characters":      {func(o *Options) { o.Instance = strings.Repeat("a", 64) }, "instance:"},
		"hostTemplate must parse":                {func(o *Options) { o.HostTemplate = "{{.Service" }, "hostTemplate:"},
		"hostTemplate may use known fields only": {func(o *Options) { o.HostTemplate = "{{.Cluster}}" }, "hostTemplate:"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := valid
			tc.mutate(&o)
			_, err := New(o)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("New error = %v, want prefix %q", err, tc.wantErr)
			}
		})
	}
	tr, err := New(valid)
	if err != nil {
		t.Fatalf("New(valid): %v", err)
	}
	if got := tr.Options(); got.Resolution != ResolutionAuto || got.Endpoints != EndpointsWorkloadEntry {
		t.Errorf("defaults not filled in: %+v", got)
	}
}

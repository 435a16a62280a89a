package dubbo_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/translate"
)

// TestDubboHost: a Dubbo service's mesh host, as a client sees it: named
// by the template of its level (doc.go rule 10), then lower-cased and
// validated by package translate like any registry's host.
func TestDubboHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  dubbo.Config
		id   dubbo.Identity
		want string // "" when an error is expected
		err  string
	}{
		{name: "interface only", id: dubbo.Identity{Interface: "com.foo.DemoService"}, want: "com.foo.demoservice.dubbo"},
		{name: "group and version", id: dubbo.Identity{Interface: "com.foo.DemoService", Group: "g1", Version: "1.0.0"},
			want: "com.foo.demoservice.g1.1-0-0.dubbo"},
		{name: "version only", id: dubbo.Identity{Interface: "org.apache.dubbo.demo.GreetService", Version: "2.1"},
			want: "org.apache.dubbo.demo.greetservice.2-1.dubbo"},
		{name: "underscore becomes dash", id: dubbo.Identity{Interface: "com.foo.Demo_Service", Group: "blue_green"},
			want: "com.foo.demo-service.blue-green.dubbo"},
		{name: "application level", id: dubbo.Identity{Application: "Demo-App"}, want: "demo-app.dubbo"},
		{name: "inner class cannot make a host", id: dubbo.Identity{Interface: "com.foo.Outer$Inner"},
			err: "not a DNS-1123 subdomain"},
		{name: "a label over 63 characters", id: dubbo.Identity{Interface: "com." + strings.Repeat("x", 64)},
			err: "not a DNS-1123 subdomain"},
		{name: "custom interface template", cfg: dubbo.Config{InterfaceHostTemplate: "{{.Interface}}.{{.Application}}.svc"},
			id: dubbo.Identity{Interface: "a.B", Application: "app"}, want: "a.b.app.svc"},
		{name: "custom application template", cfg: dubbo.Config{ApplicationHostTemplate: "{{.Application}}.{{.Namespace}}.apps"},
			id: dubbo.Identity{Application: "app"}, want: "app.prod.apps"},
		{name: "a template failing on a service's data is that service's error",
			cfg: dubbo.Config{InterfaceHostTemplate: "{{slice .Version 0 3}}.{{.Interface}}"},
			id:  dubbo.Identity{Interface: "a.B", Version: "1"}, err: "Dubbo host template: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := dubbo.NewBuilder(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := translate.New(translate.Options{Registry: "r", Namespace: "mesh", HostTemplate: translate.DefaultHostTemplate})
			if err != nil {
				t.Fatal(err)
			}
			svc := b.Named(tc.id, "providers:x", "prod", nil)
			if !svc.PortPerProtocol {
				t.Errorf("a Dubbo service without a port per protocol")
			}
			got, err := tr.Host(svc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Host = %q, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Host = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDubboHostTemplateErrorsNameTheKey: a template that does not parse, or
// names a field Dubbo's templates do not have, is a configuration error
// naming its key (relative to the dubbo block), and no Builder is made.
func TestDubboHostTemplateErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		cfg dubbo.Config
		key string
	}{
		{dubbo.Config{InterfaceHostTemplate: "{{.Interface"}, "interfaceHostTemplate"},
		{dubbo.Config{ApplicationHostTemplate: "{{.Nope}}"}, "applicationHostTemplate"},
		{dubbo.Config{InterfaceHostTemplate: "{{.Service}}"}, "interfaceHostTemplate"}, // a registry's field, not Dubbo's
	} {
		errs := tc.cfg.Validate()
		var fe *registries.FieldError
		if len(errs) != 1 || !errors.As(errs[0], &fe) || fe.Field != tc.key {
			t.Errorf("Validate(%+v) = %v, want one error of field %q", tc.cfg, errs, tc.key)
		}
		if b, err := dubbo.NewBuilder(tc.cfg); err == nil || b != nil {
			t.Errorf("NewBuilder(%+v) = %v, %v; want the error", tc.cfg, b, err)
		}
	}
}

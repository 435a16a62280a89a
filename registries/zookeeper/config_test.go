package zookeeper

import (
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

func TestBlockValidate(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name  string
		block Block
		want  string // "" for valid
	}{
		{name: "defaults", block: Block{}},
		{name: "servers", block: Block{Servers: []string{"zk-1:2181", "[::1]:2182"}}},
		{name: "no port", block: Block{Servers: []string{"zk-1"}}, want: `servers[0]: "zk-1" is not host:port`},
		{name: "bad port", block: Block{Servers: []string{"zk-1:0"}}, want: "servers[0]"},
		{name: "root slash only", block: Block{Root: "/"}, want: "root:"},
		{name: "short session", block: Block{SessionTimeout: duration("100ms")}, want: "sessionTimeout: 100ms is outside"},
		{name: "digest", block: Block{Auth: Auth{Scheme: "digest", Credentials: "u:p"}}},
		{name: "digest without credentials", block: Block{Auth: Auth{Scheme: "digest"}}, want: "auth: digest needs credentials"},
		{name: "both credentials", block: Block{Auth: Auth{Scheme: "digest", Credentials: "u:p", CredentialsFile: "/f"}}, want: "auth: set credentials or credentialsFile, not both"},
		{name: "credentials without scheme", block: Block{Auth: Auth{Credentials: "u:p"}}, want: "auth.scheme: required"},
		{name: "sasl", block: Block{Auth: Auth{Scheme: "sasl"}}, want: `auth.scheme: "sasl" is not supported`},
		{name: "not user:password", block: Block{Auth: Auth{Scheme: "digest", Credentials: "nocolon"}}, want: "auth.credentials: not user:password"},
		{name: "dubbo disabled", block: Block{Dubbo: dubbo.Config{Enabled: &off}}, want: "dubbo.enabled:"},
		{name: "dubbo mode", block: Block{Dubbo: dubbo.Config{Mode: "all"}}, want: `dubbo.mode: "all" is not one of`},
		{name: "spring-cloud", block: Block{Layout: LayoutSpringCloud}},
		{name: "spring-cloud root", block: Block{Layout: LayoutSpringCloud, Root: "/apps/discovery"}},
		{name: "unknown layout", block: Block{Layout: "eureka"}, want: `layout: "eureka" is not one of dubbo, spring-cloud`},
		{name: "spring-cloud with a dubbo block", block: Block{Layout: LayoutSpringCloud, Dubbo: dubbo.Config{ApplicationHostTemplate: "{{.Application}}.x"}},
			want: "dubbo: layout spring-cloud reads Spring Cloud Zookeeper instances, not Dubbo providers"},
		{name: "spring-cloud with dubbo disabled", block: Block{Layout: LayoutSpringCloud, Dubbo: dubbo.Config{Enabled: &off}}, want: "dubbo: layout spring-cloud"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.block
			b.Default()
			errs := b.Validate()
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("Validate: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.want) {
				t.Fatalf("Validate = %v, want one error starting %q", errs, tc.want)
			}
		})
	}
}

func TestBlockDefaultsAndRedaction(t *testing.T) {
	b := Block{Auth: Auth{Scheme: "digest", Credentials: "user:secret"}}
	b.Default()
	if len(b.Servers) != 1 || b.Servers[0] != DefaultServer || b.Root != DefaultRoot ||
		b.SessionTimeout.Duration != DefaultSessionTimeout || b.Dubbo.Mode != dubbo.ModeBoth {
		t.Errorf("defaults: %+v", b)
	}
	r := b.Redacted().(*Block)
	if r.Auth.Credentials != registries.Redacted || b.Auth.Credentials != "user:secret" {
		t.Errorf("Redacted: %q (original %q)", r.Auth.Credentials, b.Auth.Credentials)
	}
}

func TestBlockSpringCloudDefaults(t *testing.T) {
	b := Block{Layout: LayoutSpringCloud}
	b.Default()
	b.Default() // idempotent: New defaults a copy again
	if b.Root != DefaultSpringCloudRoot || b.Dubbo.Mode != "" || b.HostsFrom() != "" {
		t.Errorf("defaults: %+v (HostsFrom %q): want root /services, the dubbo block untouched, hostTemplate taken", b, b.HostsFrom())
	}
	if errs := b.Validate(); len(errs) > 0 {
		t.Errorf("Validate: %v", errs)
	}
	d := Block{}
	d.Default()
	if d.Layout != LayoutDubbo || d.Root != DefaultRoot || d.HostsFrom() == "" || d.HostsFrom() != Type().HostsFrom {
		t.Errorf("dubbo defaults: %+v (HostsFrom %q)", d, d.HostsFrom())
	}
	reg, err := b.New("zk", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := reg.(*Registry); r.appsRoot != DefaultSpringCloudRoot || r.builder != nil {
		t.Errorf("registry reads %s (builder %v), want /services and no Dubbo", r.appsRoot, r.builder)
	}
}

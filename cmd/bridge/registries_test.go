package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
)

// TestRegistryTypesDefaultHosts pins the README's host naming contract for
// every registered type's default host template.
func TestRegistryTypesDefaultHosts(t *testing.T) {
	if err := registryTypes.Check(); err != nil {
		t.Fatal(err)
	}
	dubboB, err := dubbo.NewBuilder(dubbo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		typ  string
		svc  registries.Service
		want string
	}{
		"consul, the agent's datacenter": {"consul", registries.Service{Name: "web"}, "web.service.consul"},
		"consul, a remote datacenter":    {"consul", registries.Service{Name: "web", Datacenter: "dc2"}, "web.service.dc2.consul"},
		"consul, an underscore":          {"consul", registries.Service{Name: "my_web"}, "my-web.service.consul"},
		"nacos, the default namespace and group": {"nacos",
			registries.Service{Name: "echo", Namespace: "public", Group: "DEFAULT_GROUP"}, "echo.default-group.public.nacos"},
		"nacos, another group": {"nacos",
			registries.Service{Name: "echo", Namespace: "public", Group: "ORDER_GROUP"}, "echo.order-group.public.nacos"},
		"nacos, another namespace": {"nacos",
			registries.Service{Name: "echo", Namespace: "dev", Group: "DEFAULT_GROUP"}, "echo.default-group.dev.nacos"},
		"file, the host as written": {"file", registries.Service{Name: "web.static.local"}, "web.static.local"},
		// A Dubbo service is named by the Dubbo registry (its default
		// templates), not by the zookeeper type's.
		"zookeeper, interface-level": {"zookeeper", dubboB.Named(dubbo.Identity{Interface: "com.foo.DemoService", Group: "g1", Version: "1.0.0"},
			"providers:com.foo.DemoService:1.0.0:g1", "", nil), "com.foo.demoservice.g1.1-0-0.dubbo"},
		"zookeeper, application-level": {"zookeeper", dubboB.Named(dubbo.Identity{Application: "demo-app"}, "demo-app", "", nil),
			"demo-app.dubbo"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			typ, ok := registryTypes.Lookup(tc.typ)
			if !ok {
				t.Fatalf("type %q is not registered", tc.typ)
			}
			tr, err := translate.New(translate.Options{Registry: "r", Namespace: "mesh", HostTemplate: typ.HostTemplate})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tr.Host(tc.svc)
			if err != nil || got != tc.want {
				t.Fatalf("host = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestOutagePolicyOverrides: a registry's outage block overrides the global
// keys it sets; the others come from the global block, then the defaults.
func TestOutagePolicyOverrides(t *testing.T) {
	cfg, err := ParseConfig([]byte(`registries:
- {name: a, type: file, file: {path: a.yaml}}
- {name: b, type: file, file: {path: b.yaml}, outage: {holdDown: 0s, maxDeleteRatio: 1}}
outage: {deleteGuardFloor: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	regs, err := buildRegistries(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]syncer.OutagePolicy{
		"a": {HoldDown: 10 * time.Second, MaxDeleteRatio: 0.5, DeleteGuardFloor: 3, DeleteGuardTimeout: 5 * time.Minute},
		"b": {HoldDown: 0, MaxDeleteRatio: 1, DeleteGuardFloor: 3, DeleteGuardTimeout: 5 * time.Minute},
	}
	for _, r := range regs {
		if r.Sync.Policy != want[r.Name()] {
			t.Errorf("registry %s: policy %+v, want %+v", r.Name(), r.Sync.Policy, want[r.Name()])
		}
	}
}

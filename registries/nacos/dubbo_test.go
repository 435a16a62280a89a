package nacos

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// Dubbo registrations as Dubbo writes them in Nacos: an interface-level
// provider's instance metadata are its URL parameters (with category,
// protocol and path added), an application-level instance's metadata carry
// dubbo.endpoints and dubbo.metadata.revision.
const (
	greeterProviders = "providers:com.example.Greeter:1.0.0:g1"
	greeterConsumers = "consumers:com.example.Greeter:1.0.0:g1"
	greeterApp       = "greeter-app"
)

// providerMeta is the metadata of a Greeter provider over protocol.
func providerMeta(protocol string) map[string]string {
	return map[string]string{
		"interface": "com.example.Greeter", "methods": "a,b", "version": "1.0.0", "group": "g1", "side": "provider",
		"protocol": protocol, "application": greeterApp, "pid": "4242", "timestamp": "1700000000000",
		"category": "providers", "path": "com.example.Greeter", "weight": "0", "release": "3.3.2",
	}
}

// appMeta is the metadata of a Dubbo 3 application-level instance serving
// dubbo on 20880 and tri on 50051.
func appMeta() map[string]string {
	return map[string]string{
		"dubbo.endpoints":             `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`,
		"dubbo.metadata.revision":     "9f3c1a",
		"dubbo.metadata.storage-type": "local",
		"timestamp":                   "1700000000000",
	}
}

// dubboOn is a dubbo block with Dubbo enabled in mode, its host templates
// spelling every field of a service's identity (dubbotest).
func dubboOn(mode dubbo.Mode) dubbo.Config {
	on := true
	return dubbotest.IdentityTemplates(dubbo.Config{Enabled: &on, Mode: mode})
}

// TestDubboInterfaceLevel: with dubbo.enabled, a "providers:" service is one
// Dubbo service: labels without the volatile parameters, methods apart,
// one process's tri and dubbo instances one instance with both ports; a
// "consumers:" service is ignored and not counted (doc.go rule 8).
func TestDubboInterfaceLevel(t *testing.T) {
	p := harness.StartNacos(t)
	p.RegisterInstance(t, "", "", greeterProviders, "10.0.7.1", 50051, 2, providerMeta("tri"), true, true, true)
	p.RegisterInstance(t, "", "", greeterConsumers, "10.0.7.9", 0, 1,
		map[string]string{"interface": "com.example.Greeter", "side": "consumer", "category": "consumers"}, true, true, true)
	p.RegisterInstance(t, "", "", "plain", "10.0.7.5", 80, 1, nil, true, true, true)
	for _, n := range []string{greeterProviders, greeterConsumers, "plain"} {
		waitListed(t, p, "", "", n)
	}
	const name = "nacos-dubbo-iface"
	before := skipped(name)
	reg, rec := runRegistry(t, Config{Name: name, Addresses: []string{p.Address()}, Dubbo: dubboOn("")}, nil)
	k := key("public", "DEFAULT_GROUP", greeterProviders)
	rec.Eventually(t, "synced with the Greeter providers", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Good[k]) == 1 && len(st.Good[key("public", "DEFAULT_GROUP", "plain")]) == 1
	})
	last := rec.State().Last[k].Service
	wantHost := dubbotest.IdentityHost(dubbo.Identity{Interface: "com.example.Greeter", Group: "g1", Version: "1.0.0", Application: greeterApp}, "public")
	if last.Host != wantHost || !last.PortPerProtocol || last.Namespace != "public" || last.Group != "DEFAULT_GROUP" {
		t.Errorf("service = %+v, want the Dubbo service named %q in public/DEFAULT_GROUP", last, wantHost)
	}
	want := registries.Instance{
		ID: "10.0.7.1:50051", Address: "10.0.7.1", Port: 50051, Protocol: "tri", Weight: 200,
		Extra:  &registries.InstanceExtra{Methods: []string{"a", "b"}},
		Labels: map[string]string{"version": "1.0.0", "group": "g1", "application": greeterApp},
	}
	if diff := cmp.Diff([]registries.Instance{want}, last.Instances); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}

	// The same process exports the service over dubbo too.
	p.RegisterInstance(t, "", "", greeterProviders, "10.0.7.1", 20880, 2, providerMeta("dubbo"), true, true, true)
	rec.Eventually(t, "one instance with the dubbo and tri ports", func(st registrytest.State) bool {
		in := st.Good[k]
		return len(in) == 1 && in[0].ID == "10.0.7.1:20880" && slices.Equal(in[0].Ports(),
			[]registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}})
	})

	for _, s := range rec.Snapshots() {
		if s.Err != nil || s.Removed || strings.HasPrefix(s.Service.Name, "consumers:") {
			t.Errorf("unexpected snapshot %+v", s)
		}
		if s.Service.Name == "plain" && (s.Service.Host != "" || s.Service.PortPerProtocol) {
			t.Errorf("plain is not a Dubbo service: %+v", s)
		}
	}
	if got := skipped(name) - before; got != 0 {
		t.Errorf("skipped counter moved by %v, want 0: nothing is skipped with dubbo enabled", got)
	}
	harness.Eventually(t, waitTimeout, "Greeter and plain subscribed", func() error {
		if st := reg.Status(); st.Skipped != 0 || st.Services != 2 || st.Subscribed != 2 {
			return fmt.Errorf("Status = %+v, want 2 services subscribed (Greeter, plain), none skipped", st)
		}
		return nil
	})
}

// TestDubboModes: with dubbo.enabled, dubbo.mode decides which Dubbo
// services are emitted: the application-level service, with its ports from
// dubbo.endpoints, and the interface-level one; a service left out is not
// counted as skipped (doc.go rule 8).
func TestDubboModes(t *testing.T) {
	p := harness.StartNacos(t)
	p.RegisterInstance(t, "", "", greeterProviders, "10.0.8.1", 20880, 1, providerMeta("dubbo"), true, true, true)
	p.RegisterInstance(t, "", "", greeterApp, "10.0.8.1", 20880, 1, appMeta(), true, true, true)
	p.RegisterInstance(t, "", "", greeterApp, "10.0.8.2", 20880, 1, appMeta(), true, false, true) // unhealthy
	p.RegisterInstance(t, "", "", "plain", "10.0.8.5", 80, 1, nil, true, true, true)
	for _, n := range []string{greeterProviders, greeterApp, "plain"} {
		waitListed(t, p, "", "", n)
	}
	appKey := key("public", "DEFAULT_GROUP", greeterApp)
	ifaceKey := key("public", "DEFAULT_GROUP", greeterProviders)
	wantApp := []registries.Instance{{
		ID: "10.0.8.1:20880", Address: "10.0.8.1", Port: 20880, Protocol: "dubbo", Weight: 100,
		Extra:  &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}},
		Labels: nil,
	}}
	for _, tc := range []struct {
		mode             dubbo.Mode
		wantIface, wantA bool
	}{
		{mode: dubbo.ModeBoth, wantIface: true, wantA: true},
		{mode: dubbo.ModeInterface, wantIface: true},
		{mode: dubbo.ModeApplication, wantA: true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			name := "nacos-dubbo-" + string(tc.mode)
			before := skipped(name)
			reg, rec := runRegistry(t, Config{Name: name, Addresses: []string{p.Address()}, Dubbo: dubboOn(tc.mode)}, nil)
			rec.Eventually(t, "synced with the services of mode "+string(tc.mode), func(st registrytest.State) bool {
				return st.Synced == 1 && len(st.Good[key("public", "DEFAULT_GROUP", "plain")]) == 1 &&
					(!tc.wantA || len(st.Good[appKey]) == 1) && (!tc.wantIface || len(st.Good[ifaceKey]) == 1)
			})
			st := rec.State()
			if tc.wantA {
				svc := st.Last[appKey].Service
				if want := dubbotest.IdentityHost(dubbo.Identity{Application: greeterApp}, "public"); svc.Host != want || !svc.PortPerProtocol {
					t.Errorf("application service = %+v, want the Dubbo service named %q", svc, want)
				}
				if diff := cmp.Diff(wantApp, svc.Instances); diff != "" {
					t.Errorf("application instances (-want +got):\n%s", diff)
				}
			}
			for _, s := range st.All {
				if (!tc.wantA && s.Service.Name == greeterApp) || (!tc.wantIface && s.Service.Name == greeterProviders) {
					t.Errorf("mode %s emitted %+v", tc.mode, s)
				}
			}
			if got := skipped(name) - before; got != 0 {
				t.Errorf("skipped counter moved by %v, want 0", got)
			}
			services := 1
			for _, on := range []bool{tc.wantA, tc.wantIface} {
				if on {
					services++
				}
			}
			harness.Eventually(t, waitTimeout, "the left-out service unsubscribed", func() error {
				if st := reg.Status(); st.Services != services || st.Subscribed != services || st.Skipped != 0 {
					return fmt.Errorf("Status = %+v, want %d services, all subscribed, none skipped", st, services)
				}
				return nil
			})
		})
	}
}

// TestDubboGoProvider: a real dubbo-go provider registering in Nacos at
// interface and at application level, over tri and dubbo, is read as its two
// Dubbo services (doc.go rule 8; registries/dubbo rules 4 and 7). dubbo-go
// registers an instance per protocol at each level over one connection, and
// Nacos 2.x keeps one instance per service and connection (the last
// registered): the interface-level service has one instance on one of the
// two ports, the application-level one an instance serving both (its
// dubbo.endpoints list them).
func TestDubboGoProvider(t *testing.T) {
	p := harness.StartNacos(t)
	prov := harness.StartDubboProvider(t, harness.DubboProviderOptions{
		Registry: "nacos://" + p.Address(), Register: "both", App: "greeter", Version: "1.0.0",
		Protocols: []string{"tri", "dubbo"},
	})
	o := prov.Options()
	providersName := "providers:" + o.Interface + ":1.0.0:"
	for _, n := range []string{providersName, "greeter"} {
		waitListed(t, p, "", "", n)
	}
	ports := []registries.Port{{Number: uint32(o.TriPort), Protocol: "tri"}, {Number: uint32(o.DubboPort), Protocol: "dubbo"}}
	slices.SortFunc(ports, func(a, b registries.Port) int { return int(a.Number) - int(b.Number) })
	_, rec := runRegistry(t, Config{Addresses: []string{p.Address()}, Dubbo: dubboOn("")}, nil)
	ifaceKey, appKey := key("public", "DEFAULT_GROUP", providersName), key("public", "DEFAULT_GROUP", "greeter")
	isPort := func(n uint32) bool { return n == ports[0].Number || n == ports[1].Number }
	rec.Eventually(t, "both services, the application-level instance serving both ports", func(st registrytest.State) bool {
		iface, app := st.Good[ifaceKey], st.Good[appKey]
		return st.Synced == 1 && len(iface) == 1 && iface[0].Address == "127.0.0.1" && isPort(iface[0].Port) &&
			len(app) == 1 && app[0].Address == "127.0.0.1" && isPort(app[0].Port) && slices.Equal(app[0].Ports(), ports)
	})
	st := rec.State()
	iface, app := st.Last[ifaceKey].Service, st.Last[appKey].Service
	if want := dubbotest.IdentityHost(dubbo.Identity{Interface: o.Interface, Version: "1.0.0", Application: "greeter"}, "public"); iface.Host != want || !iface.PortPerProtocol {
		t.Errorf("interface-level service = %+v, want the Dubbo service named %q", iface, want)
	}
	if want := dubbotest.IdentityHost(dubbo.Identity{Application: "greeter"}, "public"); app.Host != want || !app.PortPerProtocol {
		t.Errorf("application-level service = %+v, want the Dubbo service named %q", app, want)
	}
	in := iface.Instances[0]
	if !slices.Equal(in.Methods(), []string{"Greet", "Hello", "greet", "hello"}) || in.Weight != 100 || in.Invalid() != "" {
		t.Errorf("interface-level instance = %+v, want dubbo-go's methods, weight 100 (weight=0 and Nacos weight 1)", in)
	}
	for _, in := range []registries.Instance{in, app.Instances[0]} {
		for _, k := range []string{"pid", "timestamp", "methods", "bean.name", "service.filter", "release",
			"dubbo.metadata.revision", "dubbo.endpoints"} {
			if _, ok := in.Labels[k]; ok {
				t.Errorf("instance %s has the volatile label %s", in.ID, k)
			}
		}
		for k := range in.Labels {
			if strings.HasPrefix(k, "internal-nacos-") {
				t.Errorf("instance %s has the server's label %s", in.ID, k)
			}
		}
	}
	for _, s := range rec.Snapshots() {
		if s.Err != nil || s.Removed || (s.Service.Name != "" && !s.Service.PortPerProtocol) {
			t.Errorf("unexpected snapshot %+v", s)
		}
	}
}

package dubbo

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate/translatetest"
)

// FuzzBuilder reads an interface's provider children (one a line, as
// ZooKeeper holds them) and an application's instance nodes (a JSON list
// of Curator ServiceInstances, or one) with its MetadataInfo, as the
// ZooKeeper registry does, and builds their services. It checks that no
// parser and no Builder method panics; that what ParseProviderURL and
// ParseServiceInstance accept has an address, a port in 1-65535 and (a
// provider) an interface, a protocol and sorted, distinct, non-empty
// methods; that InterfaceServices returns services sorted by name, each
// with instances, and ApplicationService the application's; and that every
// service passes translatetest.Check.
func FuzzBuilder(f *testing.F) {
	f.Add("com.foo.DemoService", demoChild+"\n"+
		"consumer%3A%2F%2F10.0.0.9%2Fcom.foo.DemoService%3Fside%3Dconsumer\n"+
		"tri%3A%2F%2F127.0.0.1%3A50051%2Fcom.foo.DemoService%3Fgroup%3Dg1%26version%3D1.0.0%26methods%3Dx\n"+
		"dubbo%3A%2F%2F127.0.0.1%3A0%2Fcom.foo.DemoService\n%zz",
		"demo-provider", []byte("["+curatorInstance+`,{"name":"other","address":"10.0.0.2","port":1}]`),
		[]byte(`{"app":"demo-provider","revision":"a1b2c3d4","services":{"com.foo.DemoService:dubbo":`+
			`{"name":"com.foo.DemoService","protocol":"dubbo","port":20880,"params":{"methods":"sayHello,greet"}},"x":null}}`),
		"pid,anyhost")
	f.Add("", url.QueryEscape("dubbo://[::1]:20880/?interface=&side=provider")+"\n"+url.QueryEscape("DUBBO://[::ffff:10.0.0.1]:20880/a.B?weight=70000&timestamp=2")+"\n"+
		url.QueryEscape("dubbo://10.0.0.1:20880/a.B?weight=5&timestamp=1"),
		"app", []byte(`{"name":"app","address":"app-1.example.com","port":65535,"payload":{"metadata":{"dubbo.endpoints":"[]","weight":"x"}}}`),
		[]byte(`not json`), "")
	trs := translatetest.Translators(f, "")
	f.Fuzz(func(t *testing.T, iface, children, app string, instances, metadata []byte, dropParams string) {
		var cfg Config
		if dropParams != "" {
			cfg.DropParams = strings.Split(dropParams, ",")
		}
		b := mustBuilder(t, cfg)

		var providers []Provider
		var malformed []Malformed
		for _, c := range strings.Split(children, "\n") {
			p, err := ParseProviderURL(c)
			switch {
			case errors.Is(err, ErrNotProvider):
			case err != nil:
				malformed = append(malformed, Malformed{ID: c, Detail: err.Error()})
			default:
				checkProvider(t, c, p)
				providers = append(providers, p)
			}
		}
		if len(providers) > 0 || len(malformed) > 0 {
			svcs := b.InterfaceServices("", iface, providers, malformed)
			if !slices.IsSortedFunc(svcs, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) }) {
				t.Fatalf("interface services are not sorted by name")
			}
			for _, svc := range svcs {
				if !svc.PortPerProtocol || (svc.Host == "") == (svc.HostError == "") || len(svc.Instances) == 0 {
					t.Fatalf("interface service %q: host %q (error %q), port per protocol %v, %d instances",
						svc.Name, svc.Host, svc.HostError, svc.PortPerProtocol, len(svc.Instances))
				}
				translatetest.Check(t, trs, svc)
			}
		}

		var raws []json.RawMessage
		if json.Unmarshal(instances, &raws) != nil {
			raws = []json.RawMessage{instances}
		}
		var insts []AppInstance
		malformed = nil
		for i, raw := range raws {
			a, err := ParseServiceInstance(raw)
			if err == nil && a.Application != app {
				err = fmt.Errorf("ServiceInstance name %q is not its application %q", a.Application, app)
			}
			if err != nil {
				malformed = append(malformed, Malformed{ID: fmt.Sprint("instance-", i), Detail: err.Error()})
				continue
			}
			if a.Address == "" || a.Port < 1 || a.Port > 65535 ||
				slices.ContainsFunc(a.Endpoints, func(e Endpoint) bool { return e.Port < 1 || e.Port > 65535 }) {
				t.Fatalf("ParseServiceInstance accepted %+v", a)
			}
			insts = append(insts, a)
		}
		var revisions map[string]RevisionMetadata
		if md, err := ParseMetadataInfo(metadata); err == nil {
			revisions = map[string]RevisionMetadata{md.Revision: {Methods: md.Methods()}}
		}
		svc := b.ApplicationService("", app, insts, malformed, revisions)
		// The default application template: the application's name.
		if svc.Name != app || svc.Host != app+".dubbo" || svc.HostError != "" || !svc.PortPerProtocol {
			t.Fatalf("application %q gave service %q, host %q (error %q), port per protocol %v",
				app, svc.Name, svc.Host, svc.HostError, svc.PortPerProtocol)
		}
		translatetest.Check(t, trs, svc)
	})
}

// checkProvider checks a provider ParseProviderURL accepted from child.
func checkProvider(t *testing.T, child string, p Provider) {
	t.Helper()
	if p.Address == "" || p.Port < 1 || p.Port > 65535 || p.Interface == "" || p.Protocol == "" ||
		p.Protocol != strings.ToLower(p.Protocol) {
		t.Fatalf("ParseProviderURL(%q) accepted %+v", child, p)
	}
	if !slices.IsSorted(p.Methods) || slices.Contains(p.Methods, "") || len(slices.Compact(slices.Clone(p.Methods))) != len(p.Methods) {
		t.Fatalf("ParseProviderURL(%q): methods %q are not sorted, distinct and non-empty", child, p.Methods)
	}
}

package nacos

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
	"github.com/meshbridge/meshbridge/translate/translatetest"
)

// FuzzConvert converts a Nacos service (JSON, as the server pushes it) with
// each conversion the registry applies: plain instances (readService), a
// Dubbo interface-level service (readDubboInterface) and a Dubbo 3
// application (readDubboApplication); and converts weight with Weight. It
// checks that nothing panics; that Weight is usable exactly for a positive
// weight, then within 1 and maxWeight; that readService keeps usable
// instances only, sorted by unique ID; that the Dubbo services are the ones
// the name says; and that every service passes translatetest.Check.
func FuzzConvert(f *testing.F) {
	f.Add([]byte(`{"name":"DEFAULT_GROUP@@web","hosts":[`+
		`{"ip":"10.0.0.1","port":8080,"weight":1,"healthy":true,"enabled":true,"clusterName":"DEFAULT",`+
		`"metadata":{"protocol":"http","region":"eu","zone":"eu-1","subzone":"r1","internal-nacos-cluster":"x","version":"v1"}},`+
		`{"ip":"10.0.0.2","port":8080,"weight":0.004,"healthy":true,"enabled":true,"clusterName":"c2"},`+
		`{"ip":"10.0.0.3","port":8080,"weight":0,"healthy":true,"enabled":true},`+
		`{"ip":"10.0.0.4","port":70000,"weight":1,"healthy":true,"enabled":true},`+
		`{"ip":"10.0.0.5","port":8080,"weight":1,"healthy":false,"enabled":true}]}`),
		"public", "DEFAULT_GROUP", "web", "", 1.0)
	f.Add([]byte(`{"hosts":[{"ip":"10.0.0.1","port":20880,"weight":2,"healthy":true,"enabled":true,`+
		`"metadata":{"protocol":"dubbo","interface":"com.foo.DemoService","version":"1.0.0","group":"g1","application":"demo",`+
		`"methods":"sayHello,greet","side":"provider","weight":"300","timestamp":"1700000000000","pid":"42"}},`+
		`{"ip":"10.0.0.2","port":20880,"weight":1,"healthy":true,"enabled":true,"metadata":{"side":"consumer"}},`+
		`{"ip":"","port":20880,"weight":1,"healthy":true,"enabled":true}]}`),
		"dev", "DEFAULT_GROUP", "providers:com.foo.DemoService:1.0.0:g1", "DEFAULT,c2", 2.5)
	f.Add([]byte(`{"hosts":[{"ip":"10.0.0.1","port":20880,"weight":1,"healthy":true,"enabled":true,"clusterName":"DEFAULT",`+
		`"metadata":{"dubbo.metadata.revision":"abc","dubbo.endpoints":"[{\"port\":20880,\"protocol\":\"dubbo\"},{\"port\":50051,\"protocol\":\"tri\"}]",`+
		`"dubbo.metadata.storage-type":"local","weight":"100"}},`+
		`{"ip":"10.0.0.2","port":20880,"weight":1,"healthy":true,"enabled":true,"metadata":{"dubbo.endpoints":"[{\"port\":0}]"}}]}`),
		"public", "DEFAULT_GROUP", "demo-app", "", math.Inf(1))
	trs := translatetest.Translators(f, HostTemplate)
	builder, err := dubbo.NewBuilder(dubbo.Config{}) // default templates: hosts translate accepts
	if err != nil {
		f.Fatal(err)
	}
	ids := identityBuilder(f, dubbo.Config{}) // hosts that state each service's identity
	f.Fuzz(func(t *testing.T, payload []byte, namespace, group, name, clusterList string, weight float64) {
		if w, ok := Weight(weight); ok != (weight > 0) || ok && (w < 1 || w > maxWeight) {
			t.Fatalf("Weight(%v) = %d, %v", weight, w, ok)
		}
		var info nacosmodel.Service
		if json.Unmarshal(payload, &info) != nil {
			return
		}
		var clusters []string
		if clusterList != "" {
			clusters = strings.Split(clusterList, ",")
		}
		instances := readService(info, namespace, group, name, clusters)
		for i, in := range instances {
			if i > 0 && instances[i-1].ID >= in.ID {
				t.Fatalf("instances are not sorted by unique ID: %q then %q", instances[i-1].ID, in.ID)
			}
			if in.Address == "" || in.Port < 1 || in.Port > 65535 || in.Weight < 1 || in.Weight > maxWeight {
				t.Fatalf("an unusable instance was kept: %+v", in)
			}
		}
		translatetest.Check(t, trs, registries.Service{Name: name, Namespace: namespace, Group: group, Instances: instances})

		iface := readDubboInterface(info, namespace, name, clusters, builder)
		named := readDubboInterface(info, namespace, name, clusters, ids)
		want := providersService(name)
		if !iface.PortPerProtocol || iface.Name != name ||
			!strings.HasPrefix(named.Host, want.Interface+"|"+want.Group+"|"+strings.ReplaceAll(want.Version, ".", "-")+"|") {
			t.Fatalf("name %q gave Dubbo service %q named %q (%+v)", name, iface.Name, named.Host, iface)
		}
		iface.Namespace, iface.Group = namespace, group
		translatetest.Check(t, trs, iface)

		app := readDubboApplication(info, namespace, name, clusters, builder)
		if named := readDubboApplication(info, namespace, name, clusters, ids); !app.PortPerProtocol || app.Name != name ||
			named.Host != dubbotest.IdentityHost(dubbo.Identity{Application: name}, namespace) {
			t.Fatalf("application %q gave Dubbo service %q named %q (%+v)", name, app.Name, named.Host, app)
		}
		app.Namespace, app.Group = namespace, group
		translatetest.Check(t, trs, app)
	})
}

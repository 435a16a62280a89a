package nacos

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/translate"
)

// FuzzConvert converts a Nacos service (JSON, as the server pushes it) with
// each conversion the registry applies: plain instances (readService), a
// Dubbo interface-level service (readDubboInterface) and a Dubbo 3
// application (readDubboApplication); and converts weight with Weight. It
// checks that nothing panics; that Weight is usable exactly for a positive
// weight, then within 1 and maxWeight; that readService keeps usable
// instances only, sorted by unique ID; that the Dubbo services are the ones
// the name says; and that every service passes checkTranslation.
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
	trs := fuzzTranslators(f, HostTemplate)
	builder := dubbo.NewBuilder(dubbo.Config{})
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
		checkTranslation(t, trs, registries.Service{Name: name, Namespace: namespace, Group: group, Instances: instances})

		iface := readDubboInterface(info, name, clusters, builder)
		if want := providersService(name); iface.Dubbo == nil || iface.Dubbo.Interface != want.Interface ||
			iface.Dubbo.Version != want.Version || iface.Dubbo.Group != want.Group || iface.Name != name {
			t.Fatalf("name %q gave Dubbo service %q %+v", name, iface.Name, iface.Dubbo)
		}
		iface.Namespace, iface.Group = namespace, group
		checkTranslation(t, trs, iface)

		app := readDubboApplication(info, name, clusters, builder)
		if app.Dubbo == nil || app.Dubbo.Application != name || app.Dubbo.Interface != "" || app.Name != name {
			t.Fatalf("application %q gave Dubbo service %q %+v", name, app.Name, app.Dubbo)
		}
		app.Namespace, app.Group = namespace, group
		checkTranslation(t, trs, app)
	})
}

// fuzzTranslators are the Translators of the registry's host template in
// both endpoint modes and both resolutions.
func fuzzTranslators(tb testing.TB, hostTemplate string) []*translate.Translator {
	var out []*translate.Translator
	for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
		for _, res := range []model.Resolution{model.ResolutionStatic, model.ResolutionDNS} {
			tr, err := translate.New(translate.Options{Registry: "fuzz", Namespace: "mesh", HostTemplate: hostTemplate,
				Resolution: res, Endpoints: mode})
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, tr)
		}
	}
	return out
}

// checkTranslation translates svc with each Translator, twice, and checks
// that the translation is deterministic and either fails at the service
// level or returns objects whose spec passes ValidateServiceEntry or
// ValidateWorkloadEntry, whose metadata carries the ownership labels and
// passes the API server's validation, with UTF-8 annotations, whose content
// hash is ContentHash recomputed, and which render as YAML that parses back
// into the same object.
func checkTranslation(t *testing.T, trs []*translate.Translator, svc registries.Service) {
	t.Helper()
	for _, tr := range trs {
		o := tr.Options()
		res, err := tr.Translate(svc, translate.Sticky{})
		again, errAgain := tr.Translate(svc, translate.Sticky{})
		if fmt.Sprint(err) != fmt.Sprint(errAgain) {
			t.Fatalf("%s %s: Translate is not deterministic: error %v, then %v", o.Endpoints, o.Resolution, err, errAgain)
		}
		if err != nil {
			continue
		}
		var cfgs []*model.Config
		if res.ServiceEntry != nil {
			cfgs = append(cfgs, res.ServiceEntry)
		}
		cfgs = append(cfgs, res.WorkloadEntries...)
		for _, c := range cfgs {
			checkObject(t, c)
		}
		want := translatedSummary(t, res)
		if got := translatedSummary(t, again); got != want {
			t.Fatalf("%s %s: Translate is not deterministic:\n%s\nthen\n%s", o.Endpoints, o.Resolution, want, got)
		}
	}
}

// translatedSummary renders a Result: its objects as YAML, its host,
// rejections, label changes and Sticky ports.
func translatedSummary(t *testing.T, res translate.Result) string {
	t.Helper()
	cfgs := res.WorkloadEntries
	if res.ServiceEntry != nil {
		cfgs = append([]*model.Config{res.ServiceEntry}, cfgs...)
	}
	y, err := translate.ToYAML(cfgs)
	if err != nil {
		t.Fatalf("ToYAML: %v", err)
	}
	return fmt.Sprintf("%s\nhost %s, fallback %q, sticky %d %s %v\nrejected %q\nlabel changes %q", y, res.Host,
		res.Fallback, res.Sticky.Port, res.Sticky.Protocol, res.Sticky.ProtocolPorts, res.Rejected, res.LabelChanges)
}

// checkObject checks one translated object (see checkTranslation).
func checkObject(t *testing.T, c *model.Config) {
	t.Helper()
	var spec proto.Message
	var err error
	switch c.Kind {
	case model.KindServiceEntry:
		spec, err = &networking.ServiceEntry{}, translate.ValidateServiceEntry(c.ServiceEntry())
	case model.KindWorkloadEntry:
		spec, err = &networking.WorkloadEntry{}, translate.ValidateWorkloadEntry(c.WorkloadEntry())
	default:
		t.Fatalf("%s %q: unexpected kind", c.Kind, c.Name)
	}
	if err != nil {
		t.Fatalf("%s %q fails validation: %v", c.Kind, c.Name, err)
	}
	if c.Labels[model.LabelManagedBy] != model.ManagedByValue || c.Labels[model.LabelRegistry] != "fuzz" {
		t.Fatalf("%s %q: ownership labels missing: %v", c.Kind, c.Name, c.Labels)
	}
	meta := &metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations}
	if errs := apivalidation.ValidateObjectMeta(meta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")); len(errs) > 0 {
		t.Fatalf("%s %q: the API server would refuse its metadata: %v", c.Kind, c.Name, errs.ToAggregate())
	}
	own := map[string]string{}
	for k, v := range c.Annotations {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			t.Fatalf("%s %q: annotation %q: %q is not UTF-8 (JSON would replace bytes, proto3 cannot marshal it)",
				c.Kind, c.Name, k, v)
		}
		if k != model.AnnotationHash {
			own[k] = v
		}
	}
	if len(own) == 0 {
		own = nil
	}
	if got, want := c.ContentHash(), translate.ContentHash(c.Labels, own, c.Spec); got != want {
		t.Fatalf("%s %q: content hash %s, recomputed %s", c.Kind, c.Name, got, want)
	}
	y, err := translate.ToYAML([]*model.Config{c})
	if err != nil {
		t.Fatalf("%s %q: ToYAML: %v", c.Kind, c.Name, err)
	}
	var back struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     json.RawMessage   `json:"spec"`
	}
	if err := yaml.Unmarshal(y, &back); err != nil {
		t.Fatalf("%s %q: its YAML does not parse: %v\n%s", c.Kind, c.Name, err, y)
	}
	if err := protojson.Unmarshal(back.Spec, spec); err != nil {
		t.Fatalf("%s %q: its YAML spec does not parse: %v\n%s", c.Kind, c.Name, err, y)
	}
	if m := back.Metadata; m.Name != c.Name || m.Namespace != c.Namespace || !maps.Equal(m.Labels, c.Labels) ||
		!maps.Equal(m.Annotations, c.Annotations) || !proto.Equal(spec, c.Spec) {
		t.Fatalf("%s %q: its YAML parses back into another object:\n%s", c.Kind, c.Name, y)
	}
}

package dubbo

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate"
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
// service passes checkTranslation.
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
	trs := fuzzTranslators(f, "")
	f.Fuzz(func(t *testing.T, iface, children, app string, instances, metadata []byte, dropParams string) {
		var cfg Config
		if dropParams != "" {
			cfg.DropParams = strings.Split(dropParams, ",")
		}
		b := NewBuilder(cfg)

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
			svcs := b.InterfaceServices(iface, providers, malformed)
			if !slices.IsSortedFunc(svcs, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) }) {
				t.Fatalf("interface services are not sorted by name")
			}
			for _, svc := range svcs {
				if svc.Dubbo == nil || len(svc.Instances) == 0 {
					t.Fatalf("interface service %q: Dubbo %+v, %d instances", svc.Name, svc.Dubbo, len(svc.Instances))
				}
				checkTranslation(t, trs, svc)
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
		var methods []string
		if md, err := ParseMetadataInfo(metadata); err == nil {
			methods = md.Methods()
		}
		svc := b.ApplicationService(app, insts, malformed, methods)
		if svc.Name != app || svc.Dubbo == nil || svc.Dubbo.Application != app || svc.Dubbo.Interface != "" {
			t.Fatalf("application %q gave service %q %+v", app, svc.Name, svc.Dubbo)
		}
		checkTranslation(t, trs, svc)
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

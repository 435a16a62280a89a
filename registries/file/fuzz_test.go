package file

import (
	"encoding/json"
	"fmt"
	"maps"
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

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate"
)

// FuzzParse parses arbitrary bytes as a registry file. It checks that Parse
// never panics; that the services it accepts are sorted by host, one per
// host, each instance with its file weight on the common scale (× the
// default weight); and that each service passes checkTranslation.
func FuzzParse(f *testing.F) {
	f.Add([]byte("services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}, {number: 9090, protocol: http}]\n" +
		"  instances:\n  - {address: 10.0.0.1, weight: 2, locality: r/z/s, labels: {version: v1}}\n" +
		"  - {address: 10.0.0.2, port: 9091, weight: 0}\n"))
	f.Add([]byte("services:\n- {host: b.local, ports: [{number: 1}]}\n- {host: A.LOCAL, instances: [{address: a.b.c, port: 70000}]}\n"))
	f.Add([]byte("services:\n- host: x\n  instances: [{address: '::1', port: 1, labels: {'Bad Key': \"v\", k: \"\"}, locality: a/b/c/d}]\n"))
	f.Add([]byte("services: []\n"))
	trs := fuzzTranslators(f, HostTemplate)
	f.Fuzz(func(t *testing.T, data []byte) {
		svcs, err := Parse(data)
		if err != nil {
			return
		}
		if !slices.IsSortedFunc(svcs, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("services are not sorted by host")
		}
		var doc Document
		if err := strict.Unmarshal(data, &doc); err != nil {
			t.Fatalf("Parse accepted a file that does not decode: %v", err)
		}
		specs := make(map[string]ServiceSpec, len(doc.Services))
		for _, s := range doc.Services {
			specs[s.Host] = s
		}
		if len(specs) != len(svcs) {
			t.Fatalf("%d services for %d hosts", len(svcs), len(specs))
		}
		for _, svc := range svcs {
			spec := specs[svc.Name]
			if svc.Host != spec.Host || len(svc.Instances) != len(spec.Instances) {
				t.Fatalf("service %q: host %q, %d instances; the file has %d", svc.Name, svc.Host, len(svc.Instances), len(spec.Instances))
			}
			for i, in := range spec.Instances {
				if got, want := uint64(svc.Instances[i].Weight), uint64(in.Weight)*model.DefaultWeight; got != want {
					t.Fatalf("service %q: instance %d: file weight %d became weight %d, want %d", svc.Name, i, in.Weight, got, want)
				}
			}
			checkTranslation(t, trs, svc)
		}
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

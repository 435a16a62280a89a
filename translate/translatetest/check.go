// Package translatetest holds the property checks of translation that the
// fuzz targets of translate and of the registries share: whatever a
// registry's conversion produces must translate deterministically into
// objects istiod and the API server accept.
package translatetest

import (
	"encoding/json"
	"fmt"
	"maps"
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

// Translators are the Translators of the registry's host template in
// both endpoint modes and both resolutions.
func Translators(tb testing.TB, hostTemplate string) []*translate.Translator {
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

// Check translates svc with each Translator, twice, and checks
// that the translation is deterministic and either fails at the service
// level or returns objects whose spec passes ValidateServiceEntry or
// ValidateWorkloadEntry, whose metadata carries the ownership labels and
// passes the API server's validation, with UTF-8 annotations, whose content
// hash is ContentHash recomputed, and which render as YAML that parses back
// into the same object.
func Check(t testing.TB, trs []*translate.Translator, svc registries.Service) {
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
		cfgs = append(cfgs, model.AsConfigs(res.WorkloadEntries)...)
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
func translatedSummary(t testing.TB, res translate.Result) string {
	t.Helper()
	cfgs := model.AsConfigs(res.WorkloadEntries)
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

// checkObject checks one translated object (see Check).
func checkObject(t testing.TB, c *model.Config) {
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
	meta := &metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.OutputAnnotations()}
	if errs := apivalidation.ValidateObjectMeta(meta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")); len(errs) > 0 {
		t.Fatalf("%s %q: the API server would refuse its metadata: %v", c.Kind, c.Name, errs.ToAggregate())
	}
	for k, v := range c.Annotations {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			t.Fatalf("%s %q: annotation %q: %q is not UTF-8 (JSON would replace bytes, proto3 cannot marshal it)",
				c.Kind, c.Name, k, v)
		}
		if k == model.AnnotationHash {
			t.Fatalf("%s %q: the content hash is in Annotations; it belongs in Meta.Hash", c.Kind, c.Name)
		}
	}
	if got, want := c.ContentHash(), translate.ContentHash(c.Labels, c.Annotations, c.Spec); got == "" || got != want {
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
		!maps.Equal(m.Annotations, c.OutputAnnotations()) || !proto.Equal(spec, c.Spec) {
		t.Fatalf("%s %q: its YAML parses back into another object:\n%s", c.Kind, c.Name, y)
	}
}

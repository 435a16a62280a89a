package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

func renderInput(t *testing.T) []*model.Config {
	t.Helper()
	tr := mustNew(t, Options{})
	var cfgs []*model.Config
	for _, name := range []string{"zeta", "alpha"} {
		res := mustTranslate(t, tr, registries.Service{Name: name, Instances: []registries.Instance{
			inst("b", "10.0.0.2", 8080, "grpc"), inst("a", "10.0.0.1", 9090, "grpc"),
		}}, Sticky{})
		// WorkloadEntries first, to show ToYAML/ToJSON reorder.
		cfgs = append(append(cfgs, model.AsConfigs(res.WorkloadEntries)...), res.ServiceEntry)
	}
	return cfgs
}

func TestToJSON(t *testing.T) {
	out, err := ToJSON(renderInput(t))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			APIVersion string         `json:"apiVersion"`
			Kind       string         `json:"kind"`
			Metadata   objectMeta     `json:"metadata"`
			Spec       map[string]any `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("list header %q %q", list.APIVersion, list.Kind)
	}
	var order []string
	for _, it := range list.Items {
		order = append(order, it.Kind+" "+it.Metadata.Name)
		if it.APIVersion != "networking.istio.io/v1" || it.Metadata.Namespace != "meshbridge" {
			t.Errorf("%s: apiVersion %q namespace %q", it.Metadata.Name, it.APIVersion, it.Metadata.Namespace)
		}
	}
	want := []string{
		"ServiceEntry alpha.service.consul", "ServiceEntry zeta.service.consul",
		"WorkloadEntry " + WorkloadEntryName("alpha.service.consul", "consul-dc1", "b"),
		"WorkloadEntry " + WorkloadEntryName("alpha.service.consul", "consul-dc1", "a"),
		"WorkloadEntry " + WorkloadEntryName("zeta.service.consul", "consul-dc1", "a"),
		"WorkloadEntry " + WorkloadEntryName("zeta.service.consul", "consul-dc1", "b"),
	}
	// WorkloadEntries sort by name; sort the expectation the same way.
	if want[2] > want[3] {
		want[2], want[3] = want[3], want[2]
	}
	if want[4] > want[5] {
		want[4], want[5] = want[5], want[4]
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if _, ok := list.Items[0].Spec["workloadSelector"]; !ok {
		t.Errorf("spec field names are not camelCase: %v", list.Items[0].Spec)
	}
}

func TestToYAML(t *testing.T) {
	cfgs := renderInput(t)
	a, err := ToYAML(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ToYAML(cfgs)
	if string(a) != string(b) {
		t.Error("ToYAML is not deterministic")
	}
	docs := strings.Split(string(a), "\n---\n")
	if len(docs) != len(cfgs) {
		t.Fatalf("%d documents, want %d", len(docs), len(cfgs))
	}
	if !strings.HasPrefix(docs[0], "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\n") {
		t.Errorf("first document:\n%s", docs[0])
	}
	if out, err := ToYAML(nil); err != nil || len(out) != 0 {
		t.Errorf("ToYAML(nil) = %q, %v", out, err)
	}
	if _, err := ToYAML([]*model.Config{{Meta: model.Meta{Kind: model.KindServiceEntry, Name: "x"}}}); err == nil {
		t.Error("a config without spec rendered")
	}
}

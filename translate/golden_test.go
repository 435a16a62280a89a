package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// goldenOptions are an input's translate.Options; Type selects the registry
// type's default host template.
type goldenOptions struct {
	Registry     string   `json:"registry"`
	Type         string   `json:"type"`
	Namespace    string   `json:"namespace"`
	HostTemplate string   `json:"hostTemplate"`
	ServicePort  uint32   `json:"servicePort"`
	Resolution   string   `json:"resolution"`
	Endpoints    string   `json:"endpoints"`
	Revision     string   `json:"revision"`
	Instance     string   `json:"instance"`
	AllowLabels  []string `json:"allowLabels"`
}

// goldenInput is the shape of testdata/<case>.input.yaml.
type goldenInput struct {
	Options goldenOptions `json:"options"`
	Prev    struct {
		Port     uint32 `json:"port"`
		Protocol string `json:"protocol"`
	} `json:"prev"`
	Service struct {
		Name       string `json:"name"`
		Host       string `json:"host"`
		Datacenter string `json:"datacenter"`
		Namespace  string `json:"namespace"`
		Group      string `json:"group"`
		Ports      []struct {
			Number   uint32 `json:"number"`
			Protocol string `json:"protocol"`
		} `json:"ports"`
		PortPerProtocol bool   `json:"portPerProtocol"`
		HostError       string `json:"hostError"`
		Instances       []struct {
			ID       string            `json:"id"`
			Address  string            `json:"address"`
			Port     uint32            `json:"port"`
			Protocol string            `json:"protocol"`
			Labels   map[string]string `json:"labels"`
			Weight   uint32            `json:"weight"`
			Locality string            `json:"locality"`
			Ports    []struct {
				Number   uint32 `json:"number"`
				Protocol string `json:"protocol"`
			} `json:"ports"`
			Methods []string `json:"methods"`
			Invalid string   `json:"invalid"`
		} `json:"instances"`
	} `json:"service"`
}

// hostTemplate is the input's template, else its registry type's default.
func (o goldenOptions) hostTemplate() string {
	if o.HostTemplate != "" {
		return o.HostTemplate
	}
	return defaultHostTemplates[o.Type]
}

func (in goldenInput) options() Options {
	o := in.Options
	return Options{
		Registry: o.Registry, Namespace: o.Namespace, HostTemplate: o.hostTemplate(),
		ServicePort: o.ServicePort, Resolution: model.Resolution(o.Resolution),
		Endpoints: EndpointMode(o.Endpoints), Revision: o.Revision, Instance: o.Instance,
		AllowLabels: o.AllowLabels,
	}
}

func (in goldenInput) service() registries.Service {
	s := in.Service
	svc := registries.Service{Name: s.Name, Host: s.Host, Datacenter: s.Datacenter, Namespace: s.Namespace, Group: s.Group,
		PortPerProtocol: s.PortPerProtocol, HostError: s.HostError}
	for _, p := range s.Ports {
		svc.Ports = append(svc.Ports, registries.Port{Number: p.Number, Protocol: p.Protocol})
	}
	for _, i := range s.Instances {
		inst := registries.Instance{
			ID: i.ID, Address: i.Address, Port: i.Port, Protocol: i.Protocol,
			Labels: i.Labels, Weight: i.Weight, Locality: i.Locality,
		}
		var ports []registries.Port
		for _, p := range i.Ports {
			ports = append(ports, registries.Port{Number: p.Number, Protocol: p.Protocol})
		}
		if ports != nil || i.Methods != nil || i.Invalid != "" {
			inst.Extra = &registries.InstanceExtra{Ports: ports, Methods: i.Methods, Invalid: i.Invalid}
		}
		svc.Instances = append(svc.Instances, inst)
	}
	return svc
}

// TestGolden translates testdata/<case>.input.yaml and compares the result with
// <case>.golden.yaml; REFRESH_GOLDEN=true rewrites the goldens (make
// refresh-golden). Every golden is parsed back and must pass our istiod-like
// validation, as Istio checks its goldens against the CRD schemas.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.input.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	refresh := os.Getenv("REFRESH_GOLDEN") == "true"
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".input.yaml")
		t.Run(name, func(t *testing.T) {
			got := renderGolden(t, input)
			goldenPath := filepath.Join("testdata", name+".golden.yaml")
			if refresh {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("read golden (run with REFRESH_GOLDEN=true to create it): %v", err)
			}
			if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
				t.Errorf("%s differs from the translation (-golden +got); REFRESH_GOLDEN=true go test ./translate/ updates it:\n%s",
					goldenPath, diff)
			}
			validateGolden(t, want)
		})
	}
}

func renderGolden(t *testing.T, input string) []byte {
	t.Helper()
	raw, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	var in goldenInput
	if err := yaml.UnmarshalStrict(raw, &in); err != nil {
		t.Fatalf("parse %s: %v", input, err)
	}
	tr, err := New(in.options())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	res, err := tr.Translate(in.service(), Sticky{Port: in.Prev.Port, Protocol: model.Protocol(in.Prev.Protocol)})
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	var cfgs []*model.Config
	if res.ServiceEntry != nil {
		cfgs = append(cfgs, res.ServiceEntry)
	}
	cfgs = append(cfgs, model.AsConfigs(res.WorkloadEntries)...)
	docs, err := ToYAML(cfgs)
	if err != nil {
		t.Fatalf("ToYAML: %v", err)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "# Translation of %s (REFRESH_GOLDEN=true go test ./translate/ regenerates this file).\n",
		filepath.Base(input))
	fmt.Fprintf(&out, "# host: %s\n# sticky: port=%d protocol=%s\n", res.Host, res.Sticky.Port, res.Sticky.Protocol)
	fmt.Fprintf(&out, "# rejected: %d\n", len(res.Rejected))
	for _, r := range res.Rejected {
		fmt.Fprintf(&out, "#   %s %s: %s\n", r.InstanceID, r.Reason, r.Detail)
	}
	fmt.Fprintf(&out, "# label changes: %d\n", len(res.LabelChanges))
	for _, c := range res.LabelChanges {
		fmt.Fprintf(&out, "#   %s %s: %s\n", c.InstanceID, c.Reason, c)
	}
	out.Write(docs)
	return out.Bytes()
}

// validateGolden parses every document of a golden back into its istio.io/api
// type and checks it with ValidateServiceEntry / ValidateWorkloadEntry, the
// metadata rules and the content hash.
func validateGolden(t *testing.T, golden []byte) {
	t.Helper()
	for i, doc := range strings.Split(string(golden), "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if string(j) == "null" {
			continue // comments only
		}
		var obj struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Metadata   objectMeta      `json:"metadata"`
			Spec       json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(j, &obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		spec, validate := goldenSpec(t, obj.Kind)
		if err := protojson.Unmarshal(obj.Spec, spec); err != nil {
			t.Fatalf("document %d (%s): spec: %v", i, obj.Metadata.Name, err)
		}
		if err := validate(); err != nil {
			t.Errorf("document %d (%s) fails validation: %v", i, obj.Metadata.Name, err)
		}
		if err := validateMeta(obj.APIVersion, obj.Metadata); err != nil {
			t.Errorf("document %d: %v", i, err)
		}
		if got, want := obj.Metadata.Annotations[model.AnnotationHash], ContentHash(obj.Metadata.Labels, ownAnnotations(obj.Metadata.Annotations), spec); got != want {
			t.Errorf("document %d (%s): content hash %s, recomputed %s", i, obj.Metadata.Name, got, want)
		}
	}
}

func goldenSpec(t *testing.T, kind string) (proto.Message, func() error) {
	switch model.Kind(kind) {
	case model.KindServiceEntry:
		se := &networking.ServiceEntry{}
		return se, func() error { return ValidateServiceEntry(se) }
	case model.KindWorkloadEntry:
		we := &networking.WorkloadEntry{}
		return we, func() error { return ValidateWorkloadEntry(we) }
	}
	t.Fatalf("unexpected kind %q", kind)
	return nil, nil
}

func validateMeta(apiVersion string, m objectMeta) error {
	switch {
	case apiVersion != model.APIVersion:
		return fmt.Errorf("apiVersion %q", apiVersion)
	case !isObjectName(m.Name):
		return fmt.Errorf("name %q is not a DNS-1123 subdomain", m.Name)
	case !isDNS1123Label(m.Namespace):
		return fmt.Errorf("namespace %q is not a DNS-1123 label", m.Namespace)
	case m.Labels[model.LabelManagedBy] != model.ManagedByValue || m.Labels[model.LabelRegistry] == "":
		return fmt.Errorf("%s: ownership labels missing: %v", m.Name, m.Labels)
	}
	return ValidateLabels(m.Labels)
}

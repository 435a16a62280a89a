package translate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/model"
)

// object is a config as kubectl sees it.
type object struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   objectMeta      `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ToYAML renders cfgs as kubectl-applyable multi-document YAML: one
// networking.istio.io/v1 document per config with apiVersion, kind,
// metadata{name, namespace, labels, annotations} and spec (the protojson
// encoding, camelCase field names, unset fields omitted), documents separated
// by "---". Order is deterministic: ServiceEntries, then WorkloadEntries, each
// by namespace and name. No configs give empty output. The error names the
// config whose spec cannot be encoded.
func ToYAML(cfgs []*model.Config) ([]byte, error) {
	objs, err := toObjects(cfgs)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for i, o := range objs {
		j, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encode %s/%s/%s: %w", o.Kind, o.Metadata.Namespace, o.Metadata.Name, err)
		}
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return nil, fmt.Errorf("encode %s/%s/%s as YAML: %w", o.Kind, o.Metadata.Namespace, o.Metadata.Name, err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(y)
	}
	return out.Bytes(), nil
}

// ToJSON renders cfgs as one kubectl-applyable JSON document,
// {"apiVersion": "v1", "kind": "List", "items": [...]}, items as in ToYAML and
// in the same order, indented by two spaces and ending in a newline.
func ToJSON(cfgs []*model.Config) ([]byte, error) {
	objs, err := toObjects(cfgs)
	if err != nil {
		return nil, err
	}
	list := struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Items      []object `json:"items"`
	}{APIVersion: "v1", Kind: "List", Items: objs}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode list: %w", err)
	}
	return append(out, '\n'), nil
}

// kindOrder puts ServiceEntries before the WorkloadEntries they select, so
// that kubectl creates a service before its endpoints.
func kindOrder(k model.Kind) int {
	switch k {
	case model.KindServiceEntry:
		return 0
	case model.KindWorkloadEntry:
		return 1
	}
	return 2
}

func toObjects(cfgs []*model.Config) ([]object, error) {
	sorted := slices.Clone(cfgs)
	slices.SortStableFunc(sorted, func(a, b *model.Config) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), strings.Compare(string(a.Kind), string(b.Kind)),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	objs := make([]object, 0, len(sorted))
	for _, c := range sorted {
		o, err := toObject(c)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// toObject is c as kubectl sees it, its spec compact protojson.
func toObject(c *model.Config) (object, error) {
	if c.Spec == nil {
		return object{}, fmt.Errorf("encode %s: no spec", c.Key())
	}
	spec, err := protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}.Marshal(c.Spec)
	if err != nil {
		return object{}, fmt.Errorf("encode %s: %w", c.Key(), err)
	}
	// protojson randomizes whitespace on purpose; compact it so that
	// output is byte-stable.
	var compact bytes.Buffer
	if err := json.Compact(&compact, spec); err != nil {
		return object{}, fmt.Errorf("encode %s: %w", c.Key(), err)
	}
	return object{
		APIVersion: model.APIVersion,
		Kind:       string(c.Kind),
		Metadata:   objectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.OutputAnnotations()},
		Spec:       compact.Bytes(),
	}, nil
}

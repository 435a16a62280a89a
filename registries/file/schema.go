package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// Document is the file's top level.
type Document struct {
	Services []ServiceSpec `json:"services"`
}

// ServiceSpec is one service of the file.
type ServiceSpec struct {
	Host      string         `json:"host"`
	Ports     []PortSpec     `json:"ports,omitempty"`
	Instances []InstanceSpec `json:"instances,omitempty"`
}

// PortSpec is a declared service port.
type PortSpec struct {
	Number   uint32 `json:"number"`
	Protocol string `json:"protocol,omitempty"`
}

// InstanceSpec is one instance. Port 0 means the service's first port.
type InstanceSpec struct {
	Address  string            `json:"address"`
	Port     uint32            `json:"port,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Weight   uint32            `json:"weight,omitempty"`
	Locality string            `json:"locality,omitempty"`
}

var protocols = []string{"", "http", "http2", "grpc", "tcp"}

// Parse decodes and checks a file's content and returns its services, sorted
// by host. Errors name the field path, e.g. "services[1].ports[0].protocol".
// Only a complete document lists no service: one whose services key is an
// explicit empty list (`services: []`); an empty file, a file without a
// services key, or with a null one (`services:` and nothing after it: a
// write cut short) is an error (ErrIncomplete).
func Parse(data []byte) ([]registries.Service, error) {
	var doc Document
	if err := strict.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Services) == 0 {
		if err := explicitlyEmpty(data); err != nil {
			return nil, err
		}
	}
	seen := make(map[string]int, len(doc.Services))
	out := make([]registries.Service, 0, len(doc.Services))
	for i, s := range doc.Services {
		svc, err := s.toService(fmt.Sprintf("services[%d]", i))
		if err != nil {
			return nil, err
		}
		if j, dup := seen[s.Host]; dup {
			return nil, fmt.Errorf("services[%d].host: %q is already declared by services[%d]", i, s.Host, j)
		}
		seen[s.Host] = i
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ErrIncomplete marks a file that is not a complete registry document: an
// empty file, or one whose services key is missing or null. An in-place
// writer (truncate, then write) shows such a file for a moment; it is a read
// error, never an empty listing (doc.go rule 1).
var ErrIncomplete = errors.New("not a complete registry file (write `services: []` to list no service)")

// explicitlyEmpty reports, for data that decoded to no service, whether its
// services key is an explicit empty list; otherwise an error wrapping
// ErrIncomplete says what is missing.
func explicitlyEmpty(data []byte) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return fmt.Errorf("the file is empty: %w", ErrIncomplete)
	}
	services, ok := top["services"]
	switch {
	case !ok:
		return fmt.Errorf("services: missing: %w", ErrIncomplete)
	case string(services) == "null":
		return fmt.Errorf("services: null: %w", ErrIncomplete)
	}
	return nil
}

func (s ServiceSpec) toService(path string) (registries.Service, error) {
	if s.Host == "" {
		return registries.Service{}, fmt.Errorf("%s.host: required", path)
	}
	svc := registries.Service{Name: s.Host, Host: s.Host}
	for j, p := range s.Ports {
		if p.Number == 0 || p.Number > 65535 {
			return svc, fmt.Errorf("%s.ports[%d].number: %d is not a port (1-65535)", path, j, p.Number)
		}
		if !slices.Contains(protocols, p.Protocol) {
			return svc, fmt.Errorf("%s.ports[%d].protocol: %q is not one of http, http2, grpc, tcp", path, j, p.Protocol)
		}
		svc.Ports = append(svc.Ports, registries.Port{Number: p.Number, Protocol: p.Protocol})
	}
	for j, in := range s.Instances {
		if in.Weight > maxFileWeight {
			return svc, fmt.Errorf("%s.instances[%d].weight: %d is over %d", path, j, in.Weight, maxFileWeight)
		}
		port := in.Port
		if port == 0 && len(s.Ports) > 0 {
			port = s.Ports[0].Number
		}
		if port == 0 {
			return svc, fmt.Errorf("%s.instances[%d].port: required when the service declares no ports", path, j)
		}
		protocol := ""
		if len(s.Ports) > 0 {
			protocol = s.Ports[0].Protocol
		}
		svc.Instances = append(svc.Instances, registries.Instance{
			ID:       in.Address + ":" + strconv.FormatUint(uint64(port), 10),
			Address:  in.Address,
			Port:     port,
			Protocol: protocol,
			Labels:   in.Labels,
			Weight:   in.Weight * model.DefaultWeight, // the file's weight 1 is the default; 0 means it
			Locality: in.Locality,
		})
	}
	return svc, nil
}

// maxFileWeight is the largest weight a file instance may have: it is
// multiplied by model.DefaultWeight on the common scale, a uint32.
const maxFileWeight = math.MaxUint32 / model.DefaultWeight

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

// Skipped is a service of the file that is not served, and why (doc.go
// rule 2): a value the schema's type holds but the field does not allow (a
// port of 70000, an unknown protocol, no host), or a host a served service
// of the file already has. The file's other services are served.
type Skipped struct {
	// Index is the service's position in the file's services list.
	Index int
	// Host is the service's host, "" when it has none.
	Host string
	// Reason names the field relative to the service and what is wrong
	// with it: "ports[0].number: 70000 is not a port (1-65535)".
	Reason string
}

// String is the field path from the file's top and the reason:
// "services[3].ports[0].number: 70000 is not a port (1-65535)".
func (s Skipped) String() string { return fmt.Sprintf("services[%d].%s", s.Index, s.Reason) }

// Parse decodes and checks a file's content and returns its services,
// sorted by host, and the services it skips (Skipped), in file order. The
// error, for a file that is not a registry document at all, names the field
// path, e.g. "services[1].ports: unknown field". Only a complete document
// lists no service: one whose services key is an explicit empty list
// (`services: []`); an empty file, a file without a services key, or with a
// null one (`services:` and nothing after it: a write cut short) is an
// error (ErrIncomplete).
func Parse(data []byte) ([]registries.Service, []Skipped, error) {
	var doc Document
	if err := strict.Unmarshal(data, &doc); err != nil {
		return nil, nil, err
	}
	if len(doc.Services) == 0 {
		if err := explicitlyEmpty(data); err != nil {
			return nil, nil, err
		}
	}
	served := make(map[string]int, len(doc.Services))
	out := make([]registries.Service, 0, len(doc.Services))
	var skipped []Skipped
	for i, s := range doc.Services {
		svc, reason := s.toService()
		if j, dup := served[s.Host]; reason == "" && dup {
			reason = fmt.Sprintf("host: %q is already declared by services[%d]", s.Host, j)
		}
		if reason != "" {
			skipped = append(skipped, Skipped{Index: i, Host: s.Host, Reason: reason})
			continue
		}
		served[s.Host] = i
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) })
	return out, skipped, nil
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

// toService returns the service s declares, or why it is skipped: a host
// or port the service cannot have. An instance that cannot be read (a
// weight past the common scale, no port to take) is passed on as
// registries.InvalidInstance, which translate rejects (reason malformed,
// logged and counted) while the service's other instances are served.
func (s ServiceSpec) toService() (registries.Service, string) {
	if s.Host == "" {
		return registries.Service{}, "host: required"
	}
	svc := registries.Service{Name: s.Host, Host: s.Host}
	for j, p := range s.Ports {
		if p.Number == 0 || p.Number > 65535 {
			return svc, fmt.Sprintf("ports[%d].number: %d is not a port (1-65535)", j, p.Number)
		}
		if !slices.Contains(protocols, p.Protocol) {
			return svc, fmt.Sprintf("ports[%d].protocol: %q is not one of http, http2, grpc, tcp", j, p.Protocol)
		}
		svc.Ports = append(svc.Ports, registries.Port{Number: p.Number, Protocol: p.Protocol})
	}
	for j, in := range s.Instances {
		port := in.Port
		if port == 0 && len(s.Ports) > 0 {
			port = s.Ports[0].Number
		}
		id := in.Address + ":" + strconv.FormatUint(uint64(port), 10)
		switch {
		case in.Weight > maxFileWeight:
			svc.Instances = append(svc.Instances, registries.InvalidInstance(id,
				fmt.Sprintf("instances[%d].weight: %d is over %d", j, in.Weight, maxFileWeight)))
			continue
		case port == 0:
			svc.Instances = append(svc.Instances, registries.InvalidInstance(id,
				fmt.Sprintf("instances[%d].port: required when the service declares no ports", j)))
			continue
		}
		protocol := ""
		if len(s.Ports) > 0 {
			protocol = s.Ports[0].Protocol
		}
		svc.Instances = append(svc.Instances, registries.Instance{
			ID:       id,
			Address:  in.Address,
			Port:     port,
			Protocol: protocol,
			Labels:   in.Labels,
			Weight:   in.Weight * model.DefaultWeight, // the file's weight 1 is the default; 0 means it
			Locality: in.Locality,
		})
	}
	return svc, ""
}

// maxFileWeight is the largest weight a file instance may have: it is
// multiplied by model.DefaultWeight on the common scale, a uint32.
const maxFileWeight = math.MaxUint32 / model.DefaultWeight

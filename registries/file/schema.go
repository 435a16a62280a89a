package file

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

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
func Parse(data []byte) ([]registries.Service, error) {
	parsed, err := parse(data, nil)
	if err != nil {
		return nil, err
	}
	out := make([]registries.Service, len(parsed))
	for i, p := range parsed {
		out[i] = p.Service
	}
	return out, nil
}

// docSum is the SHA-256 of one service's document: its element of the
// services list in the JSON the file's YAML converts to. Equal content gives
// equal JSON, wherever the service stands in the file and however its YAML
// is written.
type docSum [sha256.Size]byte

// parsedService is a service of the file and the docSum of its document.
type parsedService struct {
	registries.Service
	Sum docSum
}

// rawDocument is the file's top level with each service left as JSON.
type rawDocument struct {
	Services []json.RawMessage `json:"services"`
}

// parse is Parse with each service's docSum. A service whose docSum is a
// key of known is taken from known as it is; only the others are decoded,
// checked and converted. known holds services of an earlier parse: each
// passed every check, and whether a document passes does not depend on its
// place in the file, so parse finds the services, or fails with the error,
// that a parse without known would.
func parse(data []byte, known map[docSum]registries.Service) ([]parsedService, error) {
	var raw rawDocument
	if err := strict.Unmarshal(data, &raw); err != nil {
		// A whole-document decode reports a service's error before an
		// unknown key that sorts after "services"; report what it reports.
		if err := strict.Unmarshal(data, new(Document)); err != nil {
			return nil, err
		}
		return nil, err
	}
	out := make([]parsedService, len(raw.Services))
	isKnown := make([]bool, len(raw.Services))
	fresh := false
	for i, doc := range raw.Services {
		out[i].Sum = sha256.Sum256(doc)
		out[i].Service, isKnown[i] = known[out[i].Sum]
		fresh = fresh || !isKnown[i]
	}
	var specs Document
	if fresh {
		// One decode of the file's document with the known services
		// replaced by null: strict reports the first error, and its path,
		// as for the whole document, since no known service has one.
		var b bytes.Buffer
		b.WriteString(`{"services":[`)
		for i, doc := range raw.Services {
			if i > 0 {
				b.WriteByte(',')
			}
			if isKnown[i] {
				b.WriteString("null")
			} else {
				b.Write(doc)
			}
		}
		b.WriteString("]}")
		if err := strict.UnmarshalJSON(b.Bytes(), &specs); err != nil {
			return nil, err
		}
	}
	seen := make(map[string]int, len(out))
	for i := range out {
		if !isKnown[i] {
			svc, err := specs.Services[i].toService(fmt.Sprintf("services[%d]", i))
			if err != nil {
				return nil, err
			}
			out[i].Service = svc
		}
		host := out[i].Name
		if j, dup := seen[host]; dup {
			return nil, fmt.Errorf("services[%d].host: %q is already declared by services[%d]", i, host, j)
		}
		seen[host] = i
	}
	slices.SortFunc(out, func(a, b parsedService) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
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

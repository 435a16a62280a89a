package pipelinetest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// I is an instance in the scenarios' notation.
type I struct {
	// ID defaults to "<Addr>:<Port>"; keep it to move an instance.
	ID       string
	Addr     string
	Port     uint32
	Weight   uint32
	Locality string
	Protocol string
	Labels   map[string]string
}

// S is a service in the scenarios' notation: called name, with the
// declared ports (nil: derived from the instances) and instances.
func S(name string, ports []registries.Port, insts ...I) registries.Service {
	svc := registries.Service{Name: name, Ports: ports}
	for _, i := range insts {
		id := i.ID
		if id == "" {
			id = fmt.Sprintf("%s:%d", i.Addr, i.Port)
		}
		svc.Instances = append(svc.Instances, registries.Instance{ID: id, Address: i.Addr, Port: i.Port,
			Weight: i.Weight, Locality: i.Locality, Protocol: i.Protocol, Labels: i.Labels})
	}
	return svc
}

// P is a declared port.
func P(number uint32, protocol string) registries.Port {
	return registries.Port{Number: number, Protocol: protocol}
}

// serviceString renders svc in the notation (services made by S only).
func serviceString(svc registries.Service) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipelinetest.S(%q, ", svc.Name)
	if len(svc.Ports) == 0 {
		b.WriteString("nil")
	} else {
		b.WriteString("[]registries.Port{")
		for i, p := range svc.Ports {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "pipelinetest.P(%d, %q)", p.Number, p.Protocol)
		}
		b.WriteString("}")
	}
	for _, inst := range svc.Instances {
		b.WriteString(", ")
		b.WriteString(instanceString(inst))
	}
	b.WriteString(")")
	return b.String()
}

func instanceString(inst registries.Instance) string {
	fields := []string{fmt.Sprintf("Addr: %q", inst.Address), fmt.Sprintf("Port: %d", inst.Port)}
	if inst.ID != fmt.Sprintf("%s:%d", inst.Address, inst.Port) {
		fields = append([]string{fmt.Sprintf("ID: %q", inst.ID)}, fields...)
	}
	if inst.Weight != 0 {
		fields = append(fields, fmt.Sprintf("Weight: %d", inst.Weight))
	}
	if inst.Locality != "" {
		fields = append(fields, fmt.Sprintf("Locality: %q", inst.Locality))
	}
	if inst.Protocol != "" {
		fields = append(fields, fmt.Sprintf("Protocol: %q", inst.Protocol))
	}
	if len(inst.Labels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(inst.Labels)) {
			kv = append(kv, fmt.Sprintf("%q: %q", k, inst.Labels[k]))
		}
		fields = append(fields, "Labels: map[string]string{"+strings.Join(kv, ", ")+"}")
	}
	return "pipelinetest.I{" + strings.Join(fields, ", ") + "}"
}

// servicesArgs renders svcs as trailing arguments.
func servicesArgs(svcs []registries.Service) string {
	var b strings.Builder
	for _, s := range svcs {
		b.WriteString(", " + serviceString(s))
	}
	return b.String()
}

package consul

import (
	"cmp"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// instancesFrom turns a /v1/health/service answer into the usable instances,
// sorted by ID. An entry is usable when it is a typical service and its
// checks (service and node checks) aggregate to passing, or to warning when
// healthyOnly is false; maintenance counts as critical.
func instancesFrom(entries []*api.ServiceEntry, healthyOnly bool, datacenter string) []registries.Instance {
	out := make([]registries.Instance, 0, len(entries))
	for _, e := range entries {
		if e == nil || e.Service == nil || e.Node == nil || e.Service.Kind != api.ServiceKindTypical {
			continue
		}
		ok, warning := usable(e.Checks, healthyOnly)
		if !ok {
			continue
		}
		out = append(out, instanceFrom(e, warning, datacenter))
	}
	slices.SortFunc(out, func(a, b registries.Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// usable reports whether checks allow an instance to be emitted, and whether
// it is in warning.
func usable(checks api.HealthChecks, healthyOnly bool) (ok, warning bool) {
	switch checks.AggregatedStatus() {
	case api.HealthPassing:
		return true, false
	case api.HealthWarning:
		return !healthyOnly, true
	default: // critical, maintenance, or a status Consul does not define
		return false, false
	}
}

func instanceFrom(e *api.ServiceEntry, warning bool, datacenter string) registries.Instance {
	s := e.Service
	addr := s.Address
	if addr == "" {
		addr = e.Node.Address
	}
	// Consul's DNS interface weighs warning instances by Weights.Warning.
	weight := s.Weights.Passing
	if warning {
		weight = s.Weights.Warning
	}
	if e.Node.Datacenter != "" {
		datacenter = e.Node.Datacenter
	}
	return registries.Instance{
		ID:       e.Node.Node + "/" + s.ID,
		Address:  addr,
		Port:     uint32(min(max(s.Port, 0), math.MaxUint32)), // past 65535: translate rejects it
		Protocol: protocolOf(s, e.Checks),
		Labels:   labelsFrom(s.Tags, s.Meta),
		Weight:   uint32(min(max(weight, 1), math.MaxUint32/model.DefaultWeight)) * model.DefaultWeight, // Consul's default weight is 1
		Locality: locality(datacenter, s.Meta, e.Node.Meta),
	}
}

// protocolOf is an instance's protocol (doc.go rule 5): ServiceMeta
// "protocol"; else what one of its own health checks speaks: http for an
// HTTP check (Spring Cloud Consul registers its application with an HTTP
// check of /actuator/health and no protocol), grpc for a gRPC check without
// TLS; else "" (translate's default, tcp). Consul's health endpoint gives a
// check's type, not its target (Definition is empty there): when a target
// is given and names another port than the instance's, the check says
// nothing of it.
func protocolOf(s *api.AgentService, checks api.HealthChecks) string {
	if p := s.Meta["protocol"]; p != "" {
		return p
	}
	port := strconv.Itoa(s.Port)
	for _, c := range checks {
		if c == nil || c.ServiceID != s.ID {
			continue
		}
		d := c.Definition
		switch {
		case c.Type == "http" || d.HTTP != "":
			if d.HTTP == "" {
				return "http"
			}
			if u, err := url.Parse(d.HTTP); err == nil && u.Scheme == "http" && u.Port() == port {
				return "http"
			}
		case (c.Type == "grpc" || d.GRPC != "") && !d.GRPCUseTLS:
			if d.GRPC == "" {
				return "grpc"
			}
			hostPort, _, _ := strings.Cut(d.GRPC, "/")
			if _, p, err := net.SplitHostPort(hostPort); err == nil && p == port {
				return "grpc"
			}
		}
	}
	return ""
}

// labelsFrom turns tags and service metadata into raw labels: a tag "k=v"
// gives k: v, a tag without "=" gives tag: "" (Consul tags are often bare
// flags such as "primary"; an empty value is a valid Kubernetes label value).
// Metadata wins over a tag with the same key: it is the structured form.
// Sanitizing is left to translate. Returns nil when there are none.
func labelsFrom(tags []string, meta map[string]string) map[string]string {
	if len(tags) == 0 && len(meta) == 0 {
		return nil
	}
	labels := make(map[string]string, len(tags)+len(meta))
	for _, t := range tags {
		k, v, _ := strings.Cut(t, "=")
		if k != "" {
			labels[k] = v
		}
	}
	maps.Copy(labels, meta)
	return labels
}

// locality is "<datacenter>/<zone>/<subzone>", zone and subzone from the
// service metadata, else from the node metadata.
func locality(datacenter string, serviceMeta, nodeMeta map[string]string) string {
	pick := func(k string) string {
		if v := serviceMeta[k]; v != "" {
			return v
		}
		return nodeMeta[k]
	}
	return datacenter + "/" + pick("zone") + "/" + pick("subzone")
}

// nodesOf returns the nodes the entries run on.
func nodesOf(entries []*api.ServiceEntry) map[string]bool {
	nodes := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e != nil && e.Node != nil {
			nodes[e.Node.Node] = true
		}
	}
	return nodes
}

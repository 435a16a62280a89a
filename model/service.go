package model

import (
	"slices"

	networking "istio.io/api/networking/v1"
)

// Resolution is how a client finds a service's endpoints; values are the
// ServiceEntry resolution names.
type Resolution string

const (
	ResolutionStatic Resolution = "STATIC"
	ResolutionDNS    Resolution = "DNS"
)

// Protocol is an Istio port protocol name (upper case, as in ServiceEntry).
type Protocol string

const (
	ProtocolHTTP  Protocol = "HTTP"
	ProtocolHTTP2 Protocol = "HTTP2"
	ProtocolGRPC  Protocol = "GRPC"
	ProtocolTCP   Protocol = "TCP"
	// ProtocolHTTPS is TLS the mesh passes through (Istio's HTTPS port:
	// routed by SNI, not terminated): an instance's secure port.
	ProtocolHTTPS Protocol = "HTTPS"
)

// Port is one service port.
type Port struct {
	Name     string
	Number   uint32
	Protocol Protocol
}

// Service is the xDS-facing view of one host of a ServiceEntry: what clusters,
// listeners and routes are generated from. Two Services generate the same
// clusters, listeners and routes when SameGeneratorInputs says so; endpoints
// are not part of a Service.
type Service struct {
	Hostname   string
	Namespace  string
	Ports      []Port // sorted by Number
	Resolution Resolution
	// Labels are the ServiceEntry's metadata labels.
	Labels map[string]string
	// Selector is the ServiceEntry's workloadSelector labels (nil when the
	// ServiceEntry lists endpoints inline).
	Selector map[string]string
	ExportTo []string
	// Addresses are the ServiceEntry's virtual IPs, if any.
	Addresses []string
	// MeshExternal is true for location MESH_EXTERNAL.
	MeshExternal bool
	// Policy is the DestinationRule that applies to the host (the most
	// specific host match among the configured ones), nil when none. The
	// ServiceEntry controller leaves it nil; the xDS server sets it from
	// its policy source, which hands out a new object only when a rule
	// changed, so SameGeneratorInputs compares it by identity. Read only.
	Policy *networking.DestinationRule
	// Routing is the VirtualService that applies to the host, nil when
	// none; set and compared as Policy is. Read only.
	Routing *networking.VirtualService
	// Defaults are what the host's providers declare for their callers
	// (the ServiceEntry's meshbridge.io/dubbo-defaults annotation).
	Defaults RouteDefaults
}

// SameGeneratorInputs reports whether s and o generate the same clusters,
// listeners and routes: the host, the namespace, each port's number, name
// and protocol, the DestinationRule and VirtualService (by identity) and
// the providers' defaults are what the generators (package xds/gen) and EDS's mapping of endpoints
// to clusters (by port name) read; the other fields (resolution, labels,
// selector, exportTo, addresses, location) are read by none of them, since every cluster meshbridge serves is type EDS. It is the
// one rule of "a service changed for clients": serviceentry's push decisions
// (a full push exactly when it is false, docs/design.md §5) and the xDS
// server's full push (which regenerates only such services) both read it.
// A field added to Service must be classified in service_test.go.
func (s *Service) SameGeneratorInputs(o *Service) bool {
	return s == o || s.Hostname == o.Hostname && s.Namespace == o.Namespace && slices.Equal(s.Ports, o.Ports) &&
		s.Policy == o.Policy && s.Routing == o.Routing && s.Defaults == o.Defaults
}

// Endpoint is one address a service port is served on: the unit of EDS. It
// mirrors the part of Istio's IstioEndpoint meshbridge needs.
type Endpoint struct {
	// Address is an IP (or, for DNS resolution, a hostname).
	Address string
	// ServicePortName is the name of the service port this endpoint serves.
	ServicePortName string
	// EndpointPort is the port to connect to on Address.
	EndpointPort uint32
	// Labels are the workload's labels.
	Labels map[string]string
	// Weight is the load-balancing weight, on the common scale where a
	// registry's default weight is DefaultWeight: the WorkloadEntry's (or
	// inline endpoint's) weight as it is, 0 when it has none. What clients
	// are sent for it (0 counts as 1; a service's weights scaled down to
	// fit) is xds/gen's rule.
	Weight uint32
	// Locality is "region/zone/subzone" (any part may be empty).
	Locality string
	// ServiceAccount is the workload's identity, if known.
	ServiceAccount string
	// WorkloadName names the source object (WorkloadEntry name, or the
	// ServiceEntry name for inline endpoints).
	WorkloadName string
}

// DefaultWeight is the endpoint weight of an instance that its registry
// gives the default weight. Endpoints of several registries meet in one
// ClusterLoadAssignment (and a locality's weight is the sum of its
// endpoints'), so every registry maps its weights onto this one scale:
// Consul's and the file registry's integer weights × 100, Nacos's float
// weights × 100 rounded (at least 1), Dubbo's default 100 as it is. The
// scale keeps a Nacos ratio such as 1.5 : 1 exact.
const DefaultWeight = 100

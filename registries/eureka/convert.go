package eureka

import (
	"net/netip"
	"path"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// Metadata keys the registry reads (doc.go rule 5).
const (
	MetaProtocol = "protocol"
	// ProtocolSecure is the protocol of an instance's securePort: TLS the
	// mesh passes through (an Istio HTTPS port).
	ProtocolSecure = "https"
	// defaultProtocol is the protocol of a port no metadata names: Spring
	// applications, which most Eureka instances are, serve HTTP.
	defaultProtocol = "http"
)

// served reports whether the mesh serves an instance (doc.go rule 5): its
// status is UP and no status the server overrides it with (PUT
// .../status?value=OUT_OF_SERVICE) says otherwise. DOWN, STARTING,
// OUT_OF_SERVICE and UNKNOWN instances are not served, as Eureka's own
// clients filter them (shouldFilterOnlyUpInstances).
func served(in *instance) bool {
	if in.Status != StatusUp {
		return false
	}
	switch in.OverriddenStatus {
	case "", statusUnknown, StatusUp:
		return true
	}
	return false
}

// instanceID is "<APP>/<instanceId>": an instance ID is unique within its
// application.
func instanceID(in *instance) string { return in.App + "/" + in.ID }

// convert turns a served instance into the mesh's (doc.go rule 5); an
// instance the mesh cannot call is an invalid one (registries.InvalidInstance:
// translate skips it with its reason, logged and counted).
func convert(in *instance) registries.Instance {
	id := instanceID(in)
	addr := address(in)
	if addr == "" {
		return registries.InvalidInstance(id, "no ipAddr or hostName")
	}
	port, proto, err := servedPort(in)
	if err != "" {
		return registries.InvalidInstance(id, err)
	}
	return registries.Instance{
		ID:       id,
		Address:  addr,
		Port:     port,
		Protocol: proto,
		Labels:   labelsOf(in.Metadata),
		Locality: locality(in),
	}
}

// servedPort is the port the mesh calls an instance on (doc.go rule 5):
// port, when enabled, with the protocol metadata's protocol, else http;
// else securePort, when enabled, as https. An instance with both is called
// on port: a host has one port per registry service here (translate rule
// 3), and one port per protocol across a host's services disagrees with a
// freshly started bridge once the host kept a port of another service (the
// pipeline's differential). err says why there is none.
func servedPort(in *instance) (port uint32, protocol, err string) {
	switch {
	case in.PortEnabled && (in.Port == 0 || in.Port > 65535):
		return 0, "", "port is enabled but not in 1-65535"
	case in.PortEnabled:
		return uint32(in.Port), protocolOf(in.Metadata), ""
	case in.SecureEnabled && (in.SecurePort == 0 || in.SecurePort > 65535):
		return 0, "", "securePort is enabled but not in 1-65535"
	case in.SecureEnabled:
		return uint32(in.SecurePort), ProtocolSecure, ""
	}
	return 0, "", "neither port nor securePort is enabled"
}

// address is where the instance is called: ipAddr, which Eureka clients
// always register (Spring's eureka.instance.ip-address or the first
// non-loopback address), when it is an IP; else hostName.
func address(in *instance) string {
	if _, err := netip.ParseAddr(in.IPAddr); err == nil {
		return in.IPAddr
	}
	return in.HostName
}

// protocolOf is the protocol of an instance's port: its protocol metadata,
// else http.
func protocolOf(meta map[string]string) string {
	if p := meta[MetaProtocol]; p != "" {
		return p
	}
	return defaultProtocol
}

// labelsOf is the instance's metadata, raw (translate sanitizes it under
// the same rules as every registry's); nil when empty.
func labelsOf(meta map[string]string) map[string]string {
	if len(meta) == 0 {
		return nil
	}
	return meta
}

// locality is "<region>/<zone>/<subzone>": the metadata's region, zone and
// subzone (Spring Cloud's eureka.instance.metadata-map.zone), the zone else
// an Amazon data center's availability zone, whose region is the zone less
// its letter (us-east-1a → us-east-1); "" when nothing is known.
func locality(in *instance) string {
	r, z := in.Metadata[registries.MetaRegion], in.Metadata[registries.MetaZone]
	if z == "" && in.AvailabilityZone != "" {
		z = in.AvailabilityZone
		if r == "" {
			r = strings.TrimRight(z, "abcdefghijklmnopqrstuvwxyz")
		}
	}
	return registries.Locality(r, z, in.Metadata[registries.MetaSubzone])
}

// allowed reports whether the allow-list lets an application through,
// case-insensitively; an empty list allows every name.
func allowed(patterns []string, app string) bool {
	if len(patterns) == 0 {
		return true
	}
	name := strings.ToLower(app)
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), name); ok {
			return true
		}
	}
	return false
}

// readApp converts an application's instances, every status, into its
// Service: the served ones only, in any order.
func readApp(name string, insts map[string]*instance) registries.Service {
	svc := registries.Service{Name: name, Instances: make([]registries.Instance, 0, len(insts))}
	for _, in := range insts {
		if served(in) {
			svc.Instances = append(svc.Instances, convert(in))
		}
	}
	return svc
}

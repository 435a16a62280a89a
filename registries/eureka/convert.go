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
	MetaRegion   = "region"
	MetaZone     = "zone"
	MetaSubzone  = "subzone"
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
	var ports []registries.Port
	if in.PortEnabled {
		if in.Port == 0 || in.Port > 65535 {
			return registries.InvalidInstance(id, "port is enabled but not in 1-65535")
		}
		ports = append(ports, registries.Port{Number: uint32(in.Port), Protocol: protocolOf(in.Metadata)})
	}
	if in.SecureEnabled {
		if in.SecurePort == 0 || in.SecurePort > 65535 {
			return registries.InvalidInstance(id, "securePort is enabled but not in 1-65535")
		}
		ports = append(ports, registries.Port{Number: uint32(in.SecurePort), Protocol: ProtocolSecure})
	}
	if len(ports) == 0 {
		return registries.InvalidInstance(id, "neither port nor securePort is enabled")
	}
	out := registries.Instance{
		ID:       id,
		Address:  addr,
		Port:     ports[0].Number,
		Protocol: ports[0].Protocol,
		Labels:   labelsOf(in.Metadata),
		Locality: locality(in),
	}
	if len(ports) > 1 {
		out.Extra = &registries.InstanceExtra{Ports: ports}
	}
	return out
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
	r, z, s := in.Metadata[MetaRegion], in.Metadata[MetaZone], in.Metadata[MetaSubzone]
	if z == "" && in.AvailabilityZone != "" {
		z = in.AvailabilityZone
		if r == "" {
			r = strings.TrimRight(z, "abcdefghijklmnopqrstuvwxyz")
		}
	}
	if r == "" && z == "" && s == "" {
		return ""
	}
	return r + "/" + z + "/" + s
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
// Service: the served ones only, sorted by ID.
func readApp(name string, insts map[string]*instance) registries.Service {
	svc := registries.Service{Name: name, PortPerProtocol: true, Instances: make([]registries.Instance, 0, len(insts))}
	for _, in := range insts {
		if served(in) {
			svc.Instances = append(svc.Instances, convert(in))
		}
	}
	return svc
}

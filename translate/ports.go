package translate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// ProtocolDubbo is the protocol meshbridge records for a Dubbo port. It is
// not an Istio protocol: the ServiceEntry port gets protocol TCP and the
// name "tcp-dubbo-<number>" (docs/design.md §3).
const ProtocolDubbo model.Protocol = "DUBBO"

// Sticky is the per-service state that keeps port numbers stable over the
// life of the process (rule 3; README "Naming conventions", "ports"), and a
// service's protocols while it has no instance, and tells a
// translation which label changes are new. The caller stores it per service
// and passes it back on the next Translate call. The zero value means nothing
// was chosen or reported yet.
type Sticky struct {
	Port uint32
	// Protocol holds an Istio protocol (HTTP, HTTP2, GRPC, TCP) or
	// ProtocolDubbo.
	Protocol model.Protocol
	// ProtocolPorts are the ports of a Dubbo service, one per protocol,
	// sorted by number (Port and Protocol are the first): a protocol keeps
	// its number for as long as an instance serves it.
	ProtocolPorts []ProtocolPort
	// InlineFallback is set when the translation was in WorkloadEntry form
	// for want of room inline (Result.Fallback): the next one goes back
	// inline only under 90 % of the limits (rule 10).
	InlineFallback bool
	// LabelChanges are the label changes the translation reported
	// (Result.LabelChanges, the same read-only slice): the next one marks
	// those it repeats (LabelChange.Repeated) and sets Result.LabelSetChanged.
	LabelChanges []LabelChange
	// Resolution, when set, is the resolution of the host the service is
	// translated for, which the caller decides over every service of the
	// host (HostResolution); "" lets the service's own instances decide
	// (rule 2, resolution.go). A translation never sets it: it is the
	// host's, not the service's (Result.Resolution says what was chosen).
	Resolution model.Resolution
}

// ProtocolPort is a port number and the protocol it serves.
type ProtocolPort struct {
	Number   uint32
	Protocol model.Protocol
}

// ParseProtocol maps a registry protocol name (case-insensitive) to the
// protocol meshbridge records: http → HTTP, http2 → HTTP2, grpc and tri
// (Dubbo's Triple, gRPC on the wire) → GRPC, https and tls (a secure port:
// Eureka's securePort, Spring Cloud Zookeeper's sslPort) → HTTPS, tcp →
// TCP, dubbo → ProtocolDubbo; anything else, including "", → TCP
// (docs/design.md §3).
func ParseProtocol(registry string) model.Protocol {
	switch strings.ToLower(registry) {
	case "http":
		return model.ProtocolHTTP
	case "http2":
		return model.ProtocolHTTP2
	case "grpc", "tri", "triple":
		return model.ProtocolGRPC
	case "https", "tls":
		return model.ProtocolHTTPS
	case "dubbo":
		return ProtocolDubbo
	}
	return model.ProtocolTCP
}

// istioProtocol is the ServiceEntry port protocol for p.
func istioProtocol(p model.Protocol) model.Protocol {
	switch p {
	case model.ProtocolHTTP, model.ProtocolHTTP2, model.ProtocolGRPC, model.ProtocolHTTPS:
		return p
	}
	return model.ProtocolTCP
}

// PortName returns the ServiceEntry port name for protocol p and number n:
// "<protocol>-<n>" with the protocol lower-cased ("http-8080", "grpc-9000",
// "https-8443", "tcp-dubbo-20880"); unknown protocols name a tcp port
// (docs/design.md §3).
func PortName(p model.Protocol, n uint32) string {
	num := strconv.FormatUint(uint64(n), 10)
	switch p {
	case ProtocolDubbo:
		return "tcp-dubbo-" + num
	case model.ProtocolHTTP, model.ProtocolHTTP2, model.ProtocolGRPC, model.ProtocolHTTPS:
		return strings.ToLower(string(p)) + "-" + num
	}
	return "tcp-" + num
}

// servicePort returns the ServicePort of protocol p and number n, shared by
// every ServiceEntry with that port: translated objects are read-only, and
// a port per ServiceEntry would cost about 100 bytes per service (P1 in
// docs/benchmarks.md). The table is bounded by the protocols times the
// port numbers in use.
func servicePort(p model.Protocol, n uint32) *networking.ServicePort {
	key := portKey{p, n}
	if sp, ok := servicePorts.Load(key); ok {
		return sp.(*networking.ServicePort)
	}
	sp, _ := servicePorts.LoadOrStore(key, &networking.ServicePort{Number: n, Protocol: string(istioProtocol(p)), Name: PortName(p, n)})
	return sp.(*networking.ServicePort)
}

// singlePort returns the ports of a ServiceEntry with the one port of
// protocol p and number n: a shared slice of length and capacity 1, so that
// an append copies it.
func singlePort(p model.Protocol, n uint32) []*networking.ServicePort {
	key := portKey{p, n}
	if ports, ok := singlePorts.Load(key); ok {
		return ports.([]*networking.ServicePort)
	}
	ports, _ := singlePorts.LoadOrStore(key, []*networking.ServicePort{servicePort(p, n)})
	return ports.([]*networking.ServicePort)
}

type portKey struct {
	protocol model.Protocol
	number   uint32
}

var servicePorts, singlePorts sync.Map // portKey → *networking.ServicePort, []*networking.ServicePort

// portPlan is the ServiceEntry's ports and the state that keeps them, and
// its resolution (rule 2), decided once the instances are admitted.
type portPlan struct {
	resolution model.Resolution
	ports      []*networking.ServicePort // sorted by number; ports[0] is the primary
	sticky     Sticky
	// byProtocol: one port per protocol (a Dubbo service); protocols[i]
	// is the protocol of ports[i], and each instance serves a port on its
	// own port of that protocol.
	byProtocol bool
	protocols  []model.Protocol
}

// planPorts chooses the ServiceEntry ports (rule 3), in order:
// opts.ServicePort; the ports svc declares (each one, sorted); the port kept
// in prev; the lowest port among usable instances. It returns nil when no port
// is known yet. An invalid declared port is a service-level error.
func (t *Translator) planPorts(svc registries.Service, prev Sticky, insts []candidate) (*portPlan, error) {
	if len(svc.Ports) > 0 && t.opts.ServicePort == 0 {
		return declaredPorts(svc.Ports, prev, insts)
	}
	if svc.PortPerProtocol && t.opts.ServicePort == 0 {
		return protocolPorts(prev, insts), nil
	}
	number := t.opts.ServicePort
	switch {
	case number != 0:
	case prev.Port != 0:
		number = prev.Port
	case len(insts) > 0:
		number = lowestPort(insts)
	default:
		return nil, nil
	}
	proto, decided := chooseProtocol(number, "", prev, insts)
	sticky := Sticky{Port: number}
	if decided {
		sticky.Protocol = proto
	}
	return &portPlan{ports: singlePort(proto, number), sticky: sticky}, nil
}

// DeclaresPorts reports whether svc's ports are configuration rather than
// derived from its instances (rule 3): the registry's servicePort, or ports
// the registry declares for the service. The caller that keeps a host's
// ports while its instances come and go (the Syncer) lets declared ports
// replace them.
func (t *Translator) DeclaresPorts(svc registries.Service) bool {
	return t.opts.ServicePort != 0 || len(svc.Ports) > 0
}

// declaredPorts turns declared ports into ServicePorts, sorted by number; a
// repeated number keeps its first declaration. A declared protocol is
// authoritative configuration and wins over the one kept in prev.
func declaredPorts(declared []registries.Port, prev Sticky, insts []candidate) (*portPlan, error) {
	byNumber := make(map[uint32]string, len(declared))
	for _, p := range declared {
		if p.Number == 0 || p.Number > 65535 {
			return nil, fmt.Errorf("declared port %d is not in 1-65535", p.Number)
		}
		if _, seen := byNumber[p.Number]; !seen {
			byNumber[p.Number] = p.Protocol
		}
	}
	plan := &portPlan{}
	for _, n := range slices.Sorted(maps.Keys(byNumber)) {
		proto, _ := chooseProtocol(n, byNumber[n], prev, insts)
		plan.ports = append(plan.ports, servicePort(proto, n))
		if plan.sticky.Port == 0 {
			plan.sticky = Sticky{Port: n, Protocol: proto}
		}
	}
	return plan, nil
}

// chooseProtocol picks the protocol of port number (rule 3: the number
// sticks, the protocol follows the instances): the declared one; that of the
// first instance (by ID) on that port declaring one; that of the first
// instance (by port, then ID) declaring one; TCP when there are instances
// and none declares one. With no instance at all, the one kept in prev for
// that port, else a provisional TCP: decided is false then, and the TCP is
// not kept in Sticky. A protocol chosen from the instances is thus a function
// of the instances alone, so that a bridge running since before a change of
// protocol and one started after it serve the same port.
func chooseProtocol(number uint32, declared string, prev Sticky, insts []candidate) (model.Protocol, bool) {
	if declared != "" {
		return ParseProtocol(declared), true
	}
	var fallback *candidate
	for i := range insts {
		c := &insts[i]
		if c.inst.Protocol == "" {
			continue
		}
		if c.inst.Port == number {
			return ParseProtocol(c.inst.Protocol), true
		}
		if fallback == nil || c.inst.Port < fallback.inst.Port {
			fallback = c
		}
	}
	switch {
	case fallback != nil:
		return ParseProtocol(fallback.inst.Protocol), true
	case len(insts) > 0:
		return model.ProtocolTCP, true
	case prev.Protocol != "" && prev.Port == number:
		return prev.Protocol, true
	}
	return model.ProtocolTCP, false
}

func lowestPort(insts []candidate) uint32 {
	lowest := insts[0].inst.Port
	for _, c := range insts[1:] {
		lowest = min(lowest, c.inst.Port)
	}
	return lowest
}

// protocolPorts plans one port per protocol that the instances serve (a
// Dubbo service: rule 3 per protocol): each protocol's number is the one
// kept in prev for it, else the lowest number an instance serves it on; a
// number already taken by another protocol moves that protocol to its next
// lowest, and a protocol left without a free number gets no port. With no
// instance, the ports kept in prev stay. nil when nothing is known.
func protocolPorts(prev Sticky, insts []candidate) *portPlan {
	kept := prev.ProtocolPorts
	if len(kept) == 0 && prev.Port != 0 {
		kept = []ProtocolPort{{Number: prev.Port, Protocol: prev.Protocol}}
	}
	served := make(map[model.Protocol][]uint32)
	for _, c := range insts {
		for _, p := range instancePorts(c.inst) {
			proto := ParseProtocol(p.Protocol)
			served[proto] = append(served[proto], p.Number)
		}
	}
	var chosen []ProtocolPort
	if len(served) == 0 {
		chosen = kept
	}
	taken := make(map[uint32]bool)
	for _, proto := range slices.Sorted(maps.Keys(served)) {
		numbers := served[proto]
		slices.Sort(numbers)
		if i := slices.IndexFunc(kept, func(k ProtocolPort) bool { return k.Protocol == proto }); i >= 0 && !taken[kept[i].Number] {
			numbers = append([]uint32{kept[i].Number}, numbers...)
		}
		for _, n := range numbers {
			if !taken[n] {
				taken[n] = true
				chosen = append(chosen, ProtocolPort{Number: n, Protocol: proto})
				break
			}
		}
	}
	if len(chosen) == 0 {
		return nil
	}
	chosen = slices.Clone(chosen)
	slices.SortFunc(chosen, func(a, b ProtocolPort) int { return cmp.Compare(a.Number, b.Number) })
	plan := &portPlan{byProtocol: true, sticky: Sticky{Port: chosen[0].Number, Protocol: chosen[0].Protocol}}
	if len(chosen) > 1 {
		plan.sticky.ProtocolPorts = chosen
	}
	for _, pp := range chosen {
		plan.ports = append(plan.ports, servicePort(pp.Protocol, pp.Number))
		plan.protocols = append(plan.protocols, pp.Protocol)
	}
	return plan
}

// instancePorts returns every port inst serves: inst.Ports(), or its one
// port.
func instancePorts(inst *registries.Instance) []registries.Port {
	if ports := inst.Ports(); len(ports) > 0 {
		return ports
	}
	return []registries.Port{{Number: inst.Port, Protocol: inst.Protocol}}
}

// targetPorts returns the WorkloadEntry ports map for inst. One port per
// protocol (byProtocol): each ServiceEntry port maps to the instance's port
// of its protocol when the numbers differ; a port whose protocol the
// instance does not serve is left unmapped (Istio's WorkloadEntry has no way
// to leave a port out: the endpoint gets the service port's number). Else:
// nil when inst.Port is a ServiceEntry port's number, else the primary
// port's name mapped to inst.Port (docs/design.md §3: other instance ports
// map through the WorkloadEntry ports).
func (p *portPlan) targetPorts(inst *registries.Instance) map[string]uint32 {
	if p.byProtocol {
		var out map[string]uint32
		for i, sp := range p.ports {
			for _, ip := range instancePorts(inst) {
				if ParseProtocol(ip.Protocol) != p.protocols[i] {
					continue
				}
				if ip.Number != sp.Number {
					if out == nil {
						out = make(map[string]uint32, len(p.ports))
					}
					out[sp.Name] = ip.Number
				}
				break
			}
		}
		return out
	}
	port := inst.Port
	for _, sp := range p.ports {
		if sp.Number == port {
			return nil
		}
	}
	return map[string]uint32{p.ports[0].Name: port}
}

// names returns the set of ServiceEntry port names.
func (p *portPlan) names() map[string]bool {
	names := make(map[string]bool, len(p.ports))
	for _, sp := range p.ports {
		names[sp.Name] = true
	}
	return names
}

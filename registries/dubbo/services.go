package dubbo

import (
	"cmp"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// Malformed is a registration that could not be read (doc.go rule 1): ID
// names it (the raw ZooKeeper child, or "<ip>:<port>"), Detail says why.
type Malformed struct {
	ID, Detail string
}

// Builder turns providers and application instances into registries.Service
// values under one Config. It is safe for concurrent use.
type Builder struct {
	mode   Mode
	drop   map[string]bool
	naming naming
}

// NewBuilder returns the Builder of c (defaults filled by the caller), or
// the errors of its host templates (Config.Validate reports them first).
func NewBuilder(c Config) (*Builder, error) {
	n, errs := c.parseNaming()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Builder{mode: cmp.Or(c.Mode, ModeBoth), drop: c.dropSet(), naming: n}, nil
}

// Mode returns the Config's mode.
func (b *Builder) Mode() Mode { return b.mode }

// InterfaceServices groups the providers of one interface by service key
// (doc.go rule 3) into services of namespace (Named), sorted by Name.
// Malformed registrations go to the first service as instances with
// Invalid set, or, when no provider is usable, to the service of the
// interface without group and version (named by iface, which may be ""),
// so that they are counted and logged.
func (b *Builder) InterfaceServices(namespace, iface string, providers []Provider, malformed []Malformed) []registries.Service {
	byKey := make(map[string][]Provider)
	for _, p := range providers {
		byKey[p.ServiceName()] = append(byKey[p.ServiceName()], p)
	}
	out := make([]registries.Service, 0, max(len(byKey), 1))
	for _, name := range slices.Sorted(maps.Keys(byKey)) {
		ps := byKey[name]
		insts := b.providerInstances(ps)
		id := Identity{Interface: ps[0].Interface, Group: ps[0].Group, Version: ps[0].Version,
			Application: firstApplication(ps, insts[0].ID)}
		out = append(out, b.Named(id, name, namespace, insts))
	}
	if len(malformed) > 0 {
		if len(out) == 0 {
			p := Provider{Interface: iface}
			out = append(out, b.Named(Identity{Interface: iface}, p.ServiceName(), namespace, nil))
		}
		for _, m := range malformed {
			out[0].Instances = append(out[0].Instances, registries.InvalidInstance(m.ID, m.Detail))
		}
	}
	return out
}

// InterfaceService is the one interface-level service a registry's own
// name for it stands for (Nacos's "providers:<interface>:<version>:<group>",
// doc.go rule 8 of package nacos): every provider is taken as id's, whatever
// its parameters say (consumers look providers up by that name), and
// malformed registrations are instances with Invalid set. Its Application
// is the first provider's (by instance ID); its Instances are never nil.
func (b *Builder) InterfaceService(namespace, name string, id Identity, providers []Provider, malformed []Malformed) registries.Service {
	insts := []registries.Instance{}
	if len(providers) > 0 {
		ps := slices.Clone(providers)
		for i := range ps {
			ps[i].Interface, ps[i].Version, ps[i].Group = id.Interface, id.Version, id.Group
		}
		insts = b.providerInstances(ps)
		id.Application = firstApplication(ps, insts[0].ID)
	} else {
		id.Application = ""
	}
	for _, m := range malformed {
		insts = append(insts, registries.InvalidInstance(m.ID, m.Detail))
	}
	return b.Named(id, name, namespace, insts)
}

// firstApplication is the application of the provider whose address and
// port make id.
func firstApplication(ps []Provider, id string) string {
	for _, p := range ps {
		if canonicalAddress(p.Address)+":"+strconv.FormatUint(uint64(p.Port), 10) == id {
			return p.Application
		}
	}
	return ""
}

// providerInstances merges the providers of one service key into instances
// (doc.go rules 4-6), sorted by ID.
func (b *Builder) providerInstances(ps []Provider) []registries.Instance {
	// Per address, per protocol, the providers sorted by port: the k-th of
	// each protocol make instance k.
	type slot struct{ byProto map[string][]Provider }
	byAddr := make(map[string]*slot)
	for _, p := range ps {
		addr := canonicalAddress(p.Address)
		s := byAddr[addr]
		if s == nil {
			s = &slot{byProto: make(map[string][]Provider)}
			byAddr[addr] = s
		}
		s.byProto[p.Protocol] = append(s.byProto[p.Protocol], p)
	}
	var out []registries.Instance
	for addr, s := range byAddr {
		n := 0
		for proto, list := range s.byProto {
			list = newestPerPort(list)
			s.byProto[proto] = list
			n = max(n, len(list))
		}
		for k := range n {
			var group []Provider
			for _, proto := range slices.Sorted(maps.Keys(s.byProto)) {
				if list := s.byProto[proto]; k < len(list) {
					group = append(group, list[k])
				}
			}
			out = append(out, b.providerInstance(addr, group))
		}
	}
	slices.SortFunc(out, func(a, b registries.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// newestPerPort sorts the providers of one address and protocol by port
// and keeps one per port (doc.go rule 4): the one with the greatest
// timestamp parameter, then the greatest parameters, so that the choice does
// not depend on the order they were read in.
func newestPerPort(list []Provider) []Provider {
	slices.SortFunc(list, func(a, b Provider) int {
		if c := cmp.Compare(a.Port, b.Port); c != 0 {
			return c
		}
		if c := cmp.Compare(timestamp(b), timestamp(a)); c != 0 {
			return c
		}
		return strings.Compare(encodeParams(b.Params), encodeParams(a.Params))
	})
	return slices.CompactFunc(list, func(a, b Provider) bool { return a.Port == b.Port })
}

// timestamp is a provider's timestamp parameter (its registration time in
// milliseconds), 0 when absent or invalid.
func timestamp(p Provider) uint64 {
	ts, _ := strconv.ParseUint(p.Params["timestamp"], 10, 64)
	return ts
}

// encodeParams is params in URL query form, keys sorted.
func encodeParams(params map[string]string) string {
	v := make(url.Values, len(params))
	for k, x := range params {
		v.Set(k, x)
	}
	return v.Encode()
}

// providerInstance is the instance of one process's providers of a service
// (one per protocol), at addr.
func (b *Builder) providerInstance(addr string, group []Provider) registries.Instance {
	slices.SortFunc(group, func(a, b Provider) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), strings.Compare(a.Protocol, b.Protocol))
	})
	first := group[0]
	inst := registries.Instance{
		ID:       addr + ":" + strconv.FormatUint(uint64(first.Port), 10),
		Address:  addr,
		Port:     first.Port,
		Protocol: first.Protocol,
		Labels:   b.labels(first.Params),
		Weight:   first.Weight,
	}
	var methods []string
	for _, p := range group {
		methods = append(methods, p.Methods...)
	}
	slices.Sort(methods)
	methods = slices.Compact(methods)
	var ports []registries.Port
	if len(group) > 1 {
		for _, p := range group {
			ports = append(ports, registries.Port{Number: p.Port, Protocol: p.Protocol})
		}
	}
	defaults := providerDefaults(first.Params)
	if len(methods) > 0 || len(ports) > 0 || !defaults.IsZero() {
		inst.Extra = &registries.InstanceExtra{Ports: ports, Methods: methods, Defaults: defaults}
	}
	return inst
}

// providerDefaults are the call defaults a provider's URL parameters (or a
// MetadataInfo service's) declare: timeout, retries and loadbalance, as
// written.
func providerDefaults(params map[string]string) registries.ProviderDefaults {
	return registries.ProviderDefaults{Timeout: params["timeout"], Retries: params["retries"], LoadBalance: params["loadbalance"]}
}

// ApplicationService is the application-level service of app in namespace
// (Named) with its instances (doc.go rule 7) and malformed registrations
// (instances with Invalid set). metadata, when known, is the application's
// MetadataInfo by revision (rule 9): every instance's Methods are the union
// of the revisions' methods, and an instance's call defaults are its own
// revision's.
func (b *Builder) ApplicationService(namespace, app string, insts []AppInstance, malformed []Malformed, metadata map[string]RevisionMetadata) registries.Service {
	svc := b.Named(Identity{Application: app}, app, namespace, nil)
	var methods []string
	for _, m := range metadata {
		methods = append(methods, m.Methods...)
	}
	slices.Sort(methods)
	methods = slices.Compact(methods)
	// The instances of one revision that serve one port share one
	// InstanceExtra: the application's methods and the revision's defaults.
	shared := map[string]*registries.InstanceExtra{}
	extraOf := func(revision string) *registries.InstanceExtra {
		e, ok := shared[revision]
		if !ok {
			if d := metadata[revision].Defaults; len(methods) > 0 || !d.IsZero() {
				e = &registries.InstanceExtra{Methods: methods, Defaults: d}
			}
			shared[revision] = e
		}
		return e
	}
	for _, a := range oneProcess(newestPerID(insts)) {
		inst := registries.Instance{
			ID:      a.id(),
			Address: canonicalAddress(a.Address),
			Port:    a.Port,
			Labels:  b.labels(a.Metadata),
			Weight:  a.Weight,
			Extra:   extraOf(a.Revision),
		}
		eps := slices.Clone(a.Endpoints)
		slices.SortFunc(eps, func(x, y Endpoint) int {
			return cmp.Or(cmp.Compare(x.Port, y.Port), strings.Compare(x.Protocol, y.Protocol))
		})
		if len(eps) > 0 {
			inst.Port, inst.Protocol = eps[0].Port, strings.ToLower(eps[0].Protocol)
		}
		if len(eps) > 1 {
			ports := make([]registries.Port, 0, len(eps))
			for _, e := range eps {
				ports = append(ports, registries.Port{Number: e.Port, Protocol: strings.ToLower(e.Protocol)})
			}
			inst.Extra = &registries.InstanceExtra{Ports: ports, Methods: inst.Methods(), Defaults: inst.Defaults()}
		}
		svc.Instances = append(svc.Instances, inst)
	}
	for _, m := range malformed {
		svc.Instances = append(svc.Instances, registries.InvalidInstance(m.ID, m.Detail))
	}
	slices.SortFunc(svc.Instances, func(a, b registries.Instance) int { return strings.Compare(a.ID, b.ID) })
	return svc
}

// newestPerID returns insts sorted by ID with one instance per ID (doc.go
// rule 7): the one with the greatest timestamp metadata, then the greatest
// metadata, whatever the order they were read in.
func newestPerID(insts []AppInstance) []AppInstance {
	out := slices.Clone(insts)
	ts := func(a AppInstance) uint64 {
		t, _ := strconv.ParseUint(a.Metadata["timestamp"], 10, 64)
		return t
	}
	slices.SortFunc(out, func(a, b AppInstance) int {
		if c := strings.Compare(a.id(), b.id()); c != 0 {
			return c
		}
		if c := cmp.Compare(ts(b), ts(a)); c != 0 {
			return c
		}
		return strings.Compare(encodeParams(b.Metadata), encodeParams(a.Metadata))
	})
	return slices.CompactFunc(out, func(a, b AppInstance) bool { return a.id() == b.id() })
}

// oneProcess keeps one instance per process (doc.go rule 7): of the
// instances of one address with the same non-empty endpoints, the one with
// the lowest port.
func oneProcess(insts []AppInstance) []AppInstance {
	kept := map[string]int{} // processKey → index in out
	out := make([]AppInstance, 0, len(insts))
	for _, a := range insts {
		k := processKey(a)
		if k == "" {
			out = append(out, a)
			continue
		}
		if i, ok := kept[k]; ok {
			if a.Port < out[i].Port {
				out[i] = a
			}
			continue
		}
		kept[k] = len(out)
		out = append(out, a)
	}
	return out
}

// processKey is the canonical address and the sorted endpoints of an
// instance with endpoints, "" without.
func processKey(a AppInstance) string {
	if len(a.Endpoints) == 0 {
		return ""
	}
	eps := make([]string, len(a.Endpoints))
	for i, e := range a.Endpoints {
		eps[i] = strconv.FormatUint(uint64(e.Port), 10) + "/" + strings.ToLower(e.Protocol)
	}
	slices.Sort(eps)
	return canonicalAddress(a.Address) + " " + strings.Join(eps, ",")
}

// labels returns params less the dropped keys and the empty values (doc.go
// rule 5); nil when none is left.
func (b *Builder) labels(params map[string]string) map[string]string {
	var out map[string]string
	for k, v := range params {
		if b.drop[k] || v == "" {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(params))
		}
		out[k] = v
	}
	return out
}

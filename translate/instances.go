package translate

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// Reasons an instance is rejected (Rejection.Reason); they are the values of
// the reason label of meshbridge_translate_rejected_instances_total.
const (
	RejectInvalidAddress    = "invalid-address"    // neither an IP nor a valid DNS name
	RejectHostnameAddress   = "hostname-address"   // a DNS name where the resolution is STATIC (rule 2, resolution.go)
	RejectInvalidPort       = "invalid-port"       // 0 or above 65535
	RejectInvalidLocality   = "invalid-locality"   // more than 3 segments, or characters Envoy cannot carry
	RejectDuplicateEndpoint = "duplicate-endpoint" // same address and port as an instance earlier by ID (grpc-go NACKs duplicates)
	RejectDuplicateID       = "duplicate-id"       // same ID as an earlier instance: one WorkloadEntry name for two
	RejectInvalidEntry      = "invalid-entry"      // the built WorkloadEntry or endpoint failed ValidateWorkloadEntry
	RejectMalformed         = "malformed"          // the watcher could not read the registry entry (registries.InstanceExtra.Invalid)
)

// candidate is an instance that passed the address, port and locality checks,
// with its normalized address and locality; named when the address is a
// DNS name.
type candidate struct {
	inst     *registries.Instance
	address  string
	locality string
	named    bool
}

// admit sorts instances by ID (then address and port) and keeps those with a valid port, address and
// locality, first by ID per address+port and per ID; an address that is a DNS
// name only when names is set (rule 2). Rejections are appended to res in ID
// order.
func (t *Translator) admit(instances []registries.Instance, names bool, res *Result) []candidate {
	sorted := make([]*registries.Instance, len(instances))
	for i := range instances {
		sorted[i] = &instances[i]
	}
	// Ties on ID are broken by address and port so that the input order
	// never decides which of two same-ID instances is kept.
	slices.SortStableFunc(sorted, func(a, b *registries.Instance) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	type endpointKey struct {
		address string
		port    uint32
	}
	seenEndpoint := make(map[endpointKey]string, len(sorted))
	seenID := make(map[string]bool, len(sorted))
	out := make([]candidate, 0, len(sorted))
	for _, inst := range sorted {
		c, reason, detail := t.check(inst, names)
		if reason == "" && seenID[inst.ID] {
			reason, detail = RejectDuplicateID, "instance ID seen before"
		}
		if reason == "" {
			key := endpointKey{c.address, inst.Port}
			if first, dup := seenEndpoint[key]; dup {
				reason, detail = RejectDuplicateEndpoint, fmt.Sprintf("%s:%d is served by instance %q", c.address, inst.Port, first)
			} else {
				seenEndpoint[key] = inst.ID
			}
		}
		if reason != "" {
			res.Rejected = append(res.Rejected, Rejection{InstanceID: inst.ID, Reason: reason, Detail: detail})
			continue
		}
		seenID[inst.ID] = true
		out = append(out, c)
	}
	return out
}

// check validates one instance's port, address and locality; a DNS name is
// an address only when names is set.
func (t *Translator) check(inst *registries.Instance, names bool) (c candidate, reason, detail string) {
	if invalid := inst.Invalid(); invalid != "" {
		return c, RejectMalformed, invalid
	}
	for _, p := range instancePorts(inst) {
		if p.Number == 0 || p.Number > 65535 {
			return c, RejectInvalidPort, fmt.Sprintf("port %d is not in 1-65535", p.Number)
		}
	}
	address, named, reason, detail := checkAddress(inst.Address, names)
	if reason != "" {
		return c, reason, detail
	}
	locality, err := normalizeLocality(inst.Locality)
	if err != nil {
		return c, RejectInvalidLocality, err.Error()
	}
	return candidate{inst: inst, address: address, locality: locality, named: named}, "", ""
}

// checkAddress returns the address in canonical form: an IP as netip formats
// it (IPv4-mapped IPv6 unmapped), a DNS name lower-cased (named), which is
// rejected unless names is set.
func checkAddress(address string, names bool) (canonical string, named bool, reason, detail string) {
	if ip, err := netip.ParseAddr(address); err == nil {
		if ip.Zone() != "" {
			return "", false, RejectInvalidAddress, fmt.Sprintf("address %q has an IPv6 zone", address)
		}
		// An IPv4-mapped IPv6 address is the IPv4 endpoint; unmapping it lets
		// the duplicate check see that both spellings are one address. An
		// address already in canonical form is returned as given, so the
		// spec shares the registry's string instead of holding a copy.
		var buf [48]byte
		canonical := ip.Unmap().AppendTo(buf[:0])
		if string(canonical) == address {
			return address, false, "", ""
		}
		return string(canonical), false, "", ""
	}
	name := strings.ToLower(address)
	if err := validateFQDN(name); err != nil || strings.HasSuffix(name, ".") {
		return "", false, RejectInvalidAddress, fmt.Sprintf("address %q is neither an IP address nor a DNS name", address)
	}
	if !names {
		return "", true, RejectHostnameAddress, fmt.Sprintf("address %q is a DNS name; the resolution is STATIC", address)
	}
	return name, true, "", ""
}

// normalizeLocality turns "region/zone/subzone" into its canonical form:
// trailing empty segments are trimmed ("dc1//" → "dc1"), and segments after an
// empty one are dropped, since a subzone without a zone names no place
// ("dc1//rack" → "dc1"). "" and "//" give "". More than three segments is an
// error, as is a character outside printable ASCII or a space.
func normalizeLocality(locality string) (string, error) {
	if locality == "" {
		return "", nil
	}
	parts := strings.Split(locality, "/")
	if len(parts) > 3 {
		return "", fmt.Errorf("locality %q has more than 3 segments", locality)
	}
	kept := parts[:0]
	for _, p := range parts {
		if p == "" {
			break
		}
		kept = append(kept, p)
	}
	// The kept segments are a prefix of locality: slicing it shares the
	// (interned, registries.Compact) string instead of joining a new one.
	out := ""
	if len(kept) > 0 {
		n := len(kept) - 1
		for _, p := range kept {
			n += len(p)
		}
		out = locality[:n]
	}
	if err := validateLocality(out); err != nil {
		return "", err
	}
	return out, nil
}

package translate

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// Limits from the ServiceEntry and WorkloadEntry CRD schemas (istio.io/api
// networking/v1alpha3 kubebuilder markers): the API server rejects objects
// past them even when istiod's Go validation would not.
const (
	maxHosts          = 256
	maxAddresses      = 256
	maxAddressLength  = 64
	maxPorts          = 256
	maxEndpoints      = MaxInlineEndpoints
	maxPortFieldLen   = 256 // ServicePort name and protocol
	maxEntryAddress   = 256
	maxEntryPorts     = 128
	maxEntryLabels    = 256
	maxLocalityLength = 2048
	maxSelectorLabels = 256
)

// unixAddressPrefix marks a Unix domain socket endpoint address (istio
// pkg/config/validation UnixAddressPrefix).
const unixAddressPrefix = "unix://"

// knownProtocols are the port protocols istio pkg/config/protocol.Parse
// accepts (case-insensitive).
var knownProtocols = map[string]bool{
	"TCP": true, "UDP": true, "GRPC": true, "GRPC-WEB": true, "HTTP": true, "HTTP_PROXY": true,
	"HTTP2": true, "HTTPS": true, "TLS": true, "MONGO": true, "REDIS": true, "MYSQL": true,
}

// ValidateServiceEntry checks a ServiceEntry the way istiod does (istio
// pkg/config/validation/validation.go ValidateServiceEntry, plus the CRD
// schema limits): at least one host, none "*", each a valid FQDN or wildcard
// domain, and no wildcard under STATIC or DNS resolution (meshbridge is stricter
// here: a wildcard cannot be resolved to endpoints); addresses are IPs or CIDRs
// (CIDRs only with NONE or STATIC); workloadSelector and endpoints exclusive;
// selector labels valid and without '*'; ports unique by name and number,
// named as DNS-1123 labels, numbered 1-65535, with a known protocol; endpoints
// valid for the resolution and naming only declared ports; several hosts only
// with HTTP or TLS ports; exportTo entries valid. It returns every problem
// found, joined (errors.Join), or nil.
func ValidateServiceEntry(se *networking.ServiceEntry) error {
	if se == nil {
		return errors.New("service entry is nil")
	}
	var errs []error
	errs = append(errs, validateHosts(se)...)
	errs = append(errs, validateAddresses(se)...)
	errs = append(errs, validateSelector(se)...)
	portNames, portErrs := validateServicePorts(se.GetPorts())
	errs = append(errs, portErrs...)
	errs = append(errs, validateResolution(se, portNames)...)
	errs = append(errs, validateExportTo(se.GetExportTo())...)
	if l := se.GetLocation(); l != networking.ServiceEntry_MESH_EXTERNAL && l != networking.ServiceEntry_MESH_INTERNAL {
		errs = append(errs, fmt.Errorf("unsupported location %d", se.GetLocation()))
	}
	return errors.Join(errs...)
}

func validateHosts(se *networking.ServiceEntry) []error {
	hosts := se.GetHosts()
	if len(hosts) == 0 {
		return []error{errors.New("service entry must have at least one host")}
	}
	var errs []error
	if len(hosts) > maxHosts {
		errs = append(errs, fmt.Errorf("service entry has %d hosts (max %d)", len(hosts), maxHosts))
	}
	res := se.GetResolution()
	for _, h := range hosts {
		switch {
		case h == "*":
			errs = append(errs, fmt.Errorf("invalid host %s", h))
		case hasWildcard(h) && (res == networking.ServiceEntry_STATIC || res == networking.ServiceEntry_DNS ||
			res == networking.ServiceEntry_DNS_ROUND_ROBIN):
			errs = append(errs, fmt.Errorf("wildcard host %s requires resolution NONE", h))
		default:
			if err := validateWildcardDomain(h); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(hosts) > 1 && res != networking.ServiceEntry_NONE {
		for _, p := range se.GetPorts() {
			proto := strings.ToUpper(p.GetProtocol())
			if !strings.HasPrefix(proto, "HTTP") && proto != "GRPC" && proto != "GRPC-WEB" && proto != "TLS" {
				errs = append(errs, errors.New("multiple hosts provided with non-HTTP, non-TLS ports"))
				break
			}
		}
	}
	return errs
}

func validateAddresses(se *networking.ServiceEntry) []error {
	var errs []error
	if len(se.GetAddresses()) > maxAddresses {
		errs = append(errs, fmt.Errorf("service entry has %d addresses (max %d)", len(se.GetAddresses()), maxAddresses))
	}
	for _, a := range se.GetAddresses() {
		if len(a) > maxAddressLength {
			errs = append(errs, fmt.Errorf("address %q longer than %d characters", a, maxAddressLength))
			continue
		}
		if !strings.Contains(a, "/") {
			if _, err := netip.ParseAddr(a); err != nil {
				errs = append(errs, fmt.Errorf("address %q is not an IP address or CIDR", a))
			}
			continue
		}
		if _, err := netip.ParsePrefix(a); err != nil {
			errs = append(errs, fmt.Errorf("address %q is not an IP address or CIDR", a))
		} else if r := se.GetResolution(); r != networking.ServiceEntry_NONE && r != networking.ServiceEntry_STATIC {
			errs = append(errs, errors.New("CIDR addresses are allowed only for NONE/STATIC resolution types"))
		}
	}
	return errs
}

// validateSelector mirrors istio ValidateAlphaWorkloadSelector: keys are not
// empty, neither side holds '*', and the labels are valid.
func validateSelector(se *networking.ServiceEntry) []error {
	sel := se.GetWorkloadSelector()
	if sel == nil {
		return nil
	}
	var errs []error
	if len(se.GetEndpoints()) > 0 {
		errs = append(errs, errors.New("only one of WorkloadSelector or Endpoints is allowed in Service Entry"))
	}
	if len(sel.GetLabels()) > maxSelectorLabels {
		errs = append(errs, fmt.Errorf("workloadSelector has %d labels (max %d)", len(sel.GetLabels()), maxSelectorLabels))
	}
	for _, k := range slices.Sorted(maps.Keys(sel.GetLabels())) {
		v := sel.GetLabels()[k]
		if k == "" {
			errs = append(errs, errors.New("empty key is not supported in selector"))
		}
		if strings.Contains(k, "*") || strings.Contains(v, "*") {
			errs = append(errs, errors.New("wildcard is not supported in selector"))
		}
	}
	if err := ValidateLabels(sel.GetLabels()); err != nil {
		errs = append(errs, fmt.Errorf("workloadSelector: %w", err))
	}
	return errs
}

// validateServicePorts checks the ports and returns the set of their names.
func validateServicePorts(ports []*networking.ServicePort) (map[string]bool, []error) {
	var errs []error
	if len(ports) > maxPorts {
		errs = append(errs, fmt.Errorf("service entry has %d ports (max %d)", len(ports), maxPorts))
	}
	names := make(map[string]bool, len(ports))
	numbers := make(map[uint32]bool, len(ports))
	for _, p := range ports {
		if p == nil {
			errs = append(errs, errors.New("service entry port may not be null"))
			continue
		}
		if names[p.GetName()] {
			errs = append(errs, fmt.Errorf("service entry port name %q already defined", p.GetName()))
		}
		if numbers[p.GetNumber()] {
			errs = append(errs, fmt.Errorf("service entry port %d already defined", p.GetNumber()))
		}
		names[p.GetName()], numbers[p.GetNumber()] = true, true
		errs = appendErr(errs, validatePortName(p.GetName()))
		errs = appendErr(errs, validatePortNumber(p.GetNumber()))
		if p.GetTargetPort() != 0 {
			errs = appendErr(errs, validatePortNumber(p.GetTargetPort()))
		}
		if pr := p.GetProtocol(); pr != "" && (len(pr) > maxPortFieldLen || !knownProtocols[strings.ToUpper(pr)]) {
			errs = append(errs, fmt.Errorf("unsupported protocol: %s", pr))
		}
	}
	return names, errs
}

// validateResolution checks the endpoints against the resolution (istio
// ValidateServiceEntry's switch on resolution).
func validateResolution(se *networking.ServiceEntry, portNames map[string]bool) []error {
	eps := se.GetEndpoints()
	var errs []error
	if len(eps) > maxEndpoints {
		errs = append(errs, fmt.Errorf("service entry has %d endpoints (max %d)", len(eps), maxEndpoints))
	}
	switch r := se.GetResolution(); r {
	case networking.ServiceEntry_NONE:
		if len(eps) != 0 {
			errs = append(errs, errors.New("no endpoints should be provided for resolution type none"))
		}
		return errs
	case networking.ServiceEntry_DNS, networking.ServiceEntry_DNS_ROUND_ROBIN:
		if len(eps) == 0 {
			for _, h := range se.GetHosts() {
				if validateFQDN(h) != nil {
					errs = append(errs, fmt.Errorf("hosts must be FQDN if no endpoints are provided for resolution mode %s", r))
				}
			}
		}
		if r == networking.ServiceEntry_DNS_ROUND_ROBIN && len(eps) > 1 {
			errs = append(errs, fmt.Errorf("there must only be 0 or 1 endpoint for resolution mode %s", r))
		}
	case networking.ServiceEntry_STATIC:
	default:
		return append(errs, fmt.Errorf("unsupported resolution type %s", r))
	}
	var labels labelCheck
	for i, ep := range eps {
		if err := validateEndpoint(ep, portNames, se.GetResolution(), &labels); err != nil {
			errs = append(errs, fmt.Errorf("endpoints[%d]: %w", i, err))
		}
	}
	return errs
}

// validateEndpoint checks an inline endpoint: a WorkloadEntry whose address
// must be an IP (or unix:// path) under STATIC and may also be an FQDN under
// DNS, and whose ports name ports of the ServiceEntry.
func validateEndpoint(ep *networking.WorkloadEntry, portNames map[string]bool, res networking.ServiceEntry_Resolution, labels *labelCheck) error {
	if ep == nil {
		return errors.New("endpoint cannot be nil")
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(ep.GetPorts())) {
		if port := ep.GetPorts()[name]; !portNames[name] {
			errs = append(errs, fmt.Errorf("endpoint port %d (%q) is not defined by the service entry", port, name))
		}
	}
	if strings.HasPrefix(ep.GetAddress(), unixAddressPrefix) && len(portNames) != 1 {
		errs = append(errs, errors.New("exactly 1 service port required for unix endpoints"))
	}
	errs = appendErr(errs, validateWorkloadEntry(ep, res != networking.ServiceEntry_STATIC, labels))
	return errors.Join(errs...)
}

// ValidateWorkloadEntry checks a WorkloadEntry the way istiod does (istio
// pkg/config/validation validateWorkloadEntry with FQDN addresses allowed,
// plus the CRD schema limits): an address is required unless a network is
// set, and is an IP, an FQDN or an absolute unix:// path (then without ports);
// port names are DNS-1123 labels and numbers 1-65535; labels are valid.
// meshbridge adds a locality check: at most three '/'-separated segments of
// printable ASCII without spaces, none empty. It returns every problem found,
// joined, or nil.
func ValidateWorkloadEntry(we *networking.WorkloadEntry) error {
	if we == nil {
		return errors.New("workload entry is nil")
	}
	return validateWorkloadEntry(we, true, nil)
}

// ValidateConfig checks a ServiceEntry or WorkloadEntry object by its kind
// (ValidateServiceEntry, ValidateWorkloadEntry); an object of another kind,
// or whose spec is not its kind's, is an error. It is the validation the
// pipeline gives MCP (xds.MCPOptions.Validate): istiod's rules, so that
// what istiod would drop never reaches it.
func ValidateConfig(cfg *model.Config) error {
	switch cfg.Kind {
	case model.KindServiceEntry:
		if se := cfg.ServiceEntry(); se != nil {
			return ValidateServiceEntry(se)
		}
	case model.KindWorkloadEntry:
		if we := cfg.WorkloadEntry(); we != nil {
			return ValidateWorkloadEntry(we)
		}
	}
	return fmt.Errorf("spec %T is not a %s", cfg.Spec, cfg.Kind)
}

// labelCheck validates label maps, remembering the last valid one: entries
// of one service mostly share one label map (translate shares equal ones),
// which is then checked once. The zero value is ready; nil checks every
// map.
type labelCheck struct {
	valid map[string]string
}

func (c *labelCheck) check(labels map[string]string) error {
	if c != nil && c.valid != nil && registries.SameLabels(labels, c.valid) {
		return nil
	}
	err := ValidateLabels(labels)
	if c != nil && err == nil && labels != nil {
		c.valid = labels
	}
	return err
}

func validateWorkloadEntry(we *networking.WorkloadEntry, allowFQDN bool, labels *labelCheck) error {
	var errs []error
	errs = appendErr(errs, validateEntryAddress(we, allowFQDN))
	if len(we.GetPorts()) > maxEntryPorts {
		errs = append(errs, fmt.Errorf("workload entry has %d ports (max %d)", len(we.GetPorts()), maxEntryPorts))
	}
	for _, name := range slices.Sorted(maps.Keys(we.GetPorts())) {
		errs = appendErr(errs, validatePortName(name))
		errs = appendErr(errs, validatePortNumber(we.GetPorts()[name]))
	}
	if len(we.GetLabels()) > maxEntryLabels {
		errs = append(errs, fmt.Errorf("workload entry has %d labels (max %d)", len(we.GetLabels()), maxEntryLabels))
	}
	errs = appendErr(errs, labels.check(we.GetLabels()))
	errs = appendErr(errs, validateLocality(we.GetLocality()))
	if len(we.GetServiceAccount()) > maxSubdomainLength {
		errs = append(errs, fmt.Errorf("serviceAccount longer than %d characters", maxSubdomainLength))
	}
	return errors.Join(errs...)
}

func validateEntryAddress(we *networking.WorkloadEntry, allowFQDN bool) error {
	addr := we.GetAddress()
	switch {
	case addr == "":
		if we.GetNetwork() == "" {
			return errors.New("address is required")
		}
		return nil
	case len(addr) > maxEntryAddress:
		return fmt.Errorf("address longer than %d characters", maxEntryAddress)
	case strings.HasPrefix(addr, unixAddressPrefix):
		if len(we.GetPorts()) != 0 {
			return fmt.Errorf("unix endpoint %s must not include ports", addr)
		}
		return validateUnixAddress(strings.TrimPrefix(addr, unixAddressPrefix))
	}
	if _, err := netip.ParseAddr(addr); err == nil {
		return nil
	}
	if !allowFQDN {
		return fmt.Errorf("endpoint address %q is not a valid IP address", addr)
	}
	if validateFQDN(addr) != nil {
		return fmt.Errorf("endpoint address %q is not a valid FQDN or an IP address", addr)
	}
	return nil
}

func validateUnixAddress(p string) error {
	switch {
	case p == "":
		return errors.New("unix address must not be empty")
	case strings.HasPrefix(p, "@"):
		return nil
	case !path.IsAbs(p) || strings.HasSuffix(p, "/"):
		return fmt.Errorf("%s is not an absolute path to a file", p)
	}
	return nil
}

// validateLocality accepts "", "region", "region/zone" and
// "region/zone/subzone"; segments are non-empty printable ASCII without
// spaces. Istio passes locality strings to Envoy unchecked; meshbridge checks
// them because xDS LocalityLbEndpoints are keyed by them.
func validateLocality(l string) error {
	if l == "" {
		return nil
	}
	if len(l) > maxLocalityLength {
		return fmt.Errorf("locality longer than %d characters", maxLocalityLength)
	}
	parts := strings.Split(l, "/")
	if len(parts) > 3 {
		return fmt.Errorf("locality %q has more than 3 segments", l)
	}
	for _, p := range parts {
		if p == "" {
			return fmt.Errorf("locality %q has an empty segment", l)
		}
		for i := 0; i < len(p); i++ {
			if p[i] <= ' ' || p[i] > '~' {
				return fmt.Errorf("locality %q holds a character outside printable ASCII", l)
			}
		}
	}
	return nil
}

func validatePortName(name string) error {
	if !isDNS1123Label(name) {
		return fmt.Errorf("invalid port name: %q", name)
	}
	return nil
}

func validatePortNumber(n uint32) error {
	if n < 1 || n > 65535 {
		return fmt.Errorf("port number %d must be in the range 1..65535", n)
	}
	return nil
}

// validateExportTo accepts ".", "*", "~" and namespace names (DNS-1123
// labels); "~" and "*" stand alone.
func validateExportTo(exportTo []string) []error {
	var errs []error
	for _, e := range exportTo {
		switch {
		case e == "." || e == "*" || e == "~":
			if (e == "*" || e == "~") && len(exportTo) > 1 {
				errs = append(errs, fmt.Errorf("exportTo %q must be the only entry", e))
			}
		case !isDNS1123Label(e):
			errs = append(errs, fmt.Errorf("exportTo %q is not a namespace name", e))
		}
	}
	return errs
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

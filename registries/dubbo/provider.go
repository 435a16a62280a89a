package dubbo

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ErrNotProvider is returned for a consumer, router or configurator URL:
// not an error in the registry, just not a provider (doc.go rule 1).
var ErrNotProvider = errors.New("not a provider")

// Provider is one interface-level registration: a provider URL.
type Provider struct {
	// Protocol is the URL scheme, lower-cased: "dubbo", "tri", ...
	Protocol string
	// Address is the host (an IP, or a name), without brackets.
	Address string
	// Port is 1-65535.
	Port uint32
	// Interface, Group, Version and Application identify the service and
	// the application exporting it (doc.go rule 2).
	Interface, Group, Version, Application string
	// Weight is the weight parameter; 0 when absent or invalid.
	Weight uint32
	// Methods are the methods parameter, split on commas, sorted.
	Methods []string
	// Params are every URL parameter (the first value of each).
	Params map[string]string
}

// ServiceName is the provider's registries.Service.Name:
// "providers:<interface>:<version>:<group>" (doc.go rule 3).
func (p Provider) ServiceName() string {
	return "providers:" + p.Interface + ":" + p.Version + ":" + p.Group
}

// ParseProviderURL parses a provider URL as ZooKeeper holds it: the child
// name under /<root>/<interface>/providers, URL-encoded once. It returns
// ErrNotProvider for a consumer, router or configurator URL (side or
// category says so; Dubbo writes them without a port), and an error naming
// the fault for a malformed one (no scheme, no host, a port outside
// 1-65535, no interface).
func ParseProviderURL(encoded string) (Provider, error) {
	raw, err := url.QueryUnescape(encoded)
	if err != nil {
		return Provider{}, fmt.Errorf("provider URL is not URL-encoded: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Provider{}, fmt.Errorf("provider URL: %w", err)
	}
	q := u.Query()
	params := make(map[string]string, len(q))
	for k, v := range q {
		if len(v) > 0 {
			params[k] = v[0]
		}
	}
	if notProvider(params) {
		return Provider{}, ErrNotProvider
	}
	if u.Scheme == "" || u.Host == "" {
		return Provider{}, fmt.Errorf("provider URL %q has no protocol or no host", clip(raw))
	}
	port, err := strconv.ParseUint(u.Port(), 10, 32)
	if err != nil || port == 0 || port > 65535 {
		return Provider{}, fmt.Errorf("provider URL %q: port %q is not in 1-65535", clip(raw), u.Port())
	}
	if params["interface"] == "" {
		params["interface"] = strings.TrimPrefix(u.Path, "/")
	}
	return ProviderFromParams(u.Scheme, u.Hostname(), uint32(port), params)
}

// notProvider reports whether side or category says a registration is not
// a provider (doc.go rule 1).
func notProvider(params map[string]string) bool {
	if side := params["side"]; side != "" && side != "provider" {
		return true
	}
	c := params["category"]
	return c != "" && c != "providers"
}

// ProviderFromParams builds a Provider from its parts: the protocol, the
// address and port, and the URL parameters (in Nacos, the instance
// metadata). It returns ErrNotProvider when side or category says the
// registration is not a provider, and an error when the interface is
// missing or the address is empty.
func ProviderFromParams(protocol, address string, port uint32, params map[string]string) (Provider, error) {
	if notProvider(params) {
		return Provider{}, ErrNotProvider
	}
	p := Provider{
		Protocol:    strings.ToLower(protocol),
		Address:     strings.Trim(address, "[]"),
		Port:        port,
		Interface:   params["interface"],
		Group:       params["group"],
		Version:     params["version"],
		Application: params["application"],
		Params:      params,
	}
	switch {
	case p.Interface == "":
		return Provider{}, errors.New("provider has no interface (no interface parameter and no path)")
	case p.Address == "":
		return Provider{}, errors.New("provider has no address")
	case p.Protocol == "":
		p.Protocol = "dubbo"
	}
	if w, err := strconv.ParseUint(params["weight"], 10, 32); err == nil {
		p.Weight = uint32(w)
	}
	p.Methods = splitMethods(params["methods"])
	return p, nil
}

// splitMethods splits a methods parameter on commas, dropping empty names,
// sorted and deduplicated.
func splitMethods(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// canonicalAddress returns an IP in netip's form (so that two spellings of
// one address merge), or the address unchanged.
func canonicalAddress(a string) string {
	if ip, err := netip.ParseAddr(a); err == nil {
		return ip.Unmap().String()
	}
	return a
}

// clip shortens s for an error message.
func clip(s string) string {
	const maxLen = 200
	if len(s) > maxLen {
		return s[:maxLen] + "…"
	}
	return s
}

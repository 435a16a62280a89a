package translate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// hostData is what a registry's host template sees: the service's name and
// the qualifiers of its key.
type hostData struct {
	Service    string
	Datacenter string
	Namespace  string
	Group      string
}

// hostSample is the data a host template is checked against when parsed.
var hostSample = hostData{Service: "svc", Datacenter: "dc", Namespace: "ns", Group: "group"}

// Host returns the mesh host of svc: svc.Host when set (a registry that
// names its services itself: the file registry, Dubbo's host templates), an
// error when svc.HostError is, else the host template executed on svc
// (Options.HostTemplate). The result is lower-cased
// with "_" replaced by "-" (docs/design.md §3) and must be a DNS-1123 subdomain
// whose top-level label is not all digits (istiod's FQDN rule); in workloadentry
// mode it is at most 242 characters, so that WorkloadEntry names (host + 11)
// stay within 253. The error says which rule failed.
func (t *Translator) Host(svc registries.Service) (string, error) {
	if svc.HostError != "" {
		return "", fmt.Errorf("service %q: %s", svc.Name, svc.HostError)
	}
	raw := svc.Host
	if raw == "" {
		var err error
		if raw, err = t.expandHost(svc); err != nil {
			return "", fmt.Errorf("service %q: host template: %w", svc.Name, err)
		}
	}
	host := strings.ReplaceAll(strings.ToLower(raw), "_", "-")
	if err := t.validateHost(host); err != nil {
		return "", fmt.Errorf("service %q: host %q: %w", svc.Name, host, err)
	}
	return host, nil
}

func (t *Translator) expandHost(svc registries.Service) (string, error) {
	return t.host.Execute(hostData{Service: svc.Name, Datacenter: svc.Datacenter, Namespace: svc.Namespace, Group: svc.Group})
}

// maxHostLength keeps WorkloadEntry names ("<host>-<10 hex>") within the
// 253-character limit of a Kubernetes object name.
const maxHostLength = maxSubdomainLength - 11

func (t *Translator) validateHost(host string) error {
	switch {
	case host == "":
		return errors.New("empty host")
	case len(host) > maxSubdomainLength:
		return fmt.Errorf("longer than %d characters", maxSubdomainLength)
	case t.opts.Endpoints == EndpointsWorkloadEntry && len(host) > maxHostLength:
		return fmt.Errorf("longer than %d characters (WorkloadEntry names append 11)", maxHostLength)
	case !isDNS1123Subdomain(host):
		return errors.New("not a DNS-1123 subdomain (dot-separated labels of [a-z0-9-], " +
			"each starting and ending with an alphanumeric, at most 63 characters)")
	}
	return validateFQDN(host)
}

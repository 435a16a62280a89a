package translate

import (
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/meshbridge/meshbridge/registries"
)

// hostData is what a host template sees.
type hostData struct {
	Service    string
	Datacenter string
	Namespace  string
	Group      string
	// Dubbo services only (Options.DubboInterfaceHostTemplate).
	Interface   string
	Version     string
	Application string
}

// compileHostTemplate parses text and executes it once on sample data, so that
// a reference to an unknown field fails at startup rather than per service.
func compileHostTemplate(text string) (*template.Template, error) {
	tmpl, err := template.New("host").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	sample := hostData{Service: "svc", Datacenter: "dc", Namespace: "ns", Group: "group",
		Interface: "com.foo.Svc", Version: "1-0", Application: "app"}
	if err := tmpl.Execute(&strings.Builder{}, sample); err != nil {
		return nil, err
	}
	return tmpl, nil
}

// Host returns the mesh host of svc: svc.Host when set, else the host
// template executed on svc (Options.HostTemplate; for a Dubbo service, the
// Dubbo host template of its level). The result is lower-cased
// with "_" replaced by "-" (docs/design.md §3) and must be a DNS-1123 subdomain
// whose top-level label is not all digits (istiod's FQDN rule); in workloadentry
// mode it is at most 242 characters, so that WorkloadEntry names (host + 11)
// stay within 253. The error says which rule failed.
func (t *Translator) Host(svc registries.Service) (string, error) {
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
	tmpl := t.host
	data := hostData{Service: svc.Name, Datacenter: svc.Datacenter, Namespace: svc.Namespace, Group: svc.Group}
	if d := svc.Dubbo; d != nil {
		tmpl = t.dubboApplication
		if d.Interface != "" {
			tmpl = t.dubboInterface
		}
		data = hostData{Service: svc.Name, Namespace: svc.Namespace, Interface: d.Interface, Group: d.Group,
			Version: strings.ReplaceAll(d.Version, ".", "-"), Application: d.Application}
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
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

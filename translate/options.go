package translate

import (
	"cmp"
	"fmt"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// EndpointMode selects how endpoints are emitted: as WorkloadEntries selected
// by the ServiceEntry's workloadSelector (the default), or inline in the
// ServiceEntry's endpoints (docs/design.md §3).
type EndpointMode string

const (
	// EndpointsWorkloadEntry emits one WorkloadEntry per instance; the
	// ServiceEntry stays byte-stable while only instances change.
	EndpointsWorkloadEntry EndpointMode = "workloadentry"
	// EndpointsInline lists the instances in ServiceEntry.endpoints.
	EndpointsInline EndpointMode = "inline"
)

// Options configure one registry's translation. The zero value of every field
// except Registry, Type and Namespace selects the default.
type Options struct {
	// Registry is the registry name, a DNS-1123 label: the value of label
	// meshbridge.io/registry and part of every WorkloadEntry name's hash input.
	Registry string
	// Namespace is metadata.namespace of every object, a DNS-1123 label.
	Namespace string
	// HostTemplate is a text/template over .Service, .Datacenter, .Namespace
	// and .Group (see Translator.Host); "" means DefaultHostTemplate. Each
	// registry type has its own default (registries.Type.HostTemplate),
	// which the command passes when the configuration sets none.
	HostTemplate string
	// ServicePort, when not 0, is the one ServiceEntry port (1-65535).
	ServicePort uint32
	// Resolution is ResolutionAuto (the default when ""), STATIC or DNS
	// (rule 2): under AUTO a ServiceEntry is STATIC while every instance of
	// its host is an IP address and DNS while one is registered by DNS
	// name; under STATIC an instance registered by name is rejected
	// (hostname-address); under DNS every ServiceEntry is DNS.
	Resolution model.Resolution
	// Endpoints is the endpoint mode; "" means workloadentry.
	Endpoints EndpointMode
	// Revision, when set, is the value of label istio.io/rev on every object.
	Revision string
	// Instance, when set, is the value of label meshbridge.io/instance on
	// every object (config key output.instance), a label value. The
	// Kubernetes writer of the same bridge owns only objects carrying it
	// (kube.Options.Instance must be the same value).
	Instance string
	// AllowLabels lets registry labels under a reserved prefix (ReservedLabel:
	// meshbridge.io/, istio.io/, kubernetes.io/, k8s.io/ and their
	// subdomains) through. Each entry is an exact label key
	// ("topology.istio.io/network") or a prefix ending in '/'
	// ("topology.kubernetes.io/") that matches the keys with exactly that
	// prefix; both are compared with the sanitized key. An entry must be
	// under a reserved prefix; meshbridge.io/ and its subdomains and
	// app.kubernetes.io/managed-by (ownership and selection) cannot be
	// listed, nor a prefix covering them. Config key output.allowLabels.
	AllowLabels []string
}

// DefaultHostTemplate is the host template of Options that set none: the
// service name.
const DefaultHostTemplate = "{{.Service}}"

// Translator converts registry services of one registry into ServiceEntries
// and WorkloadEntries. It holds no per-service state (see Sticky) and is safe
// for concurrent use.
type Translator struct {
	opts Options
	// host is the host template.
	host *registries.HostTemplate
	// allow is opts.AllowLabels, compiled.
	allow allowList
	// ownership is ownershipLabels' map, shared by every ServiceEntry.
	ownership map[string]string
}

// New validates opts and compiles the host template and the label
// allow-list. Its errors name the option at fault (a host template's
// error is a *registries.FieldError, its Field the configuration key
// hostTemplate), e.g.
// `hostTemplate: template: host:1: unexpected "}"` or
// `allowLabels[0]: "meshbridge.io/service" is one of meshbridge's ownership
// and selection labels ...`.
func New(opts Options) (*Translator, error) {
	if opts.Resolution == "" {
		opts.Resolution = ResolutionAuto
	}
	if opts.Endpoints == "" {
		opts.Endpoints = EndpointsWorkloadEntry
	}
	if err := validateOptions(opts); err != nil {
		return nil, err
	}
	allow, err := newAllowList(opts.AllowLabels)
	if err != nil {
		return nil, err
	}
	t := &Translator{opts: opts, allow: allow}
	t.ownership = t.newOwnershipLabels()
	if t.host, err = registries.ParseHostTemplate(cmp.Or(opts.HostTemplate, DefaultHostTemplate), hostSample); err != nil {
		return nil, &registries.FieldError{Field: "hostTemplate", Err: err}
	}
	return t, nil
}

func validateOptions(o Options) error {
	switch {
	case !isDNS1123Label(o.Registry):
		return fmt.Errorf("registry: name %q is not a DNS-1123 label", o.Registry)
	case !isDNS1123Label(o.Namespace):
		return fmt.Errorf("namespace: %q is not a DNS-1123 label", o.Namespace)
	case o.ServicePort > 65535:
		return fmt.Errorf("servicePort: %d is not in 0-65535", o.ServicePort)
	case o.Resolution != ResolutionAuto && o.Resolution != model.ResolutionStatic && o.Resolution != model.ResolutionDNS:
		return fmt.Errorf("resolution: %q is not supported (want AUTO, STATIC or DNS)", o.Resolution)
	case o.Endpoints != EndpointsWorkloadEntry && o.Endpoints != EndpointsInline:
		return fmt.Errorf("endpoints: %q is not supported (want workloadentry or inline)", o.Endpoints)
	}
	if err := ValidateLabelValue(o.Revision); err != nil {
		return fmt.Errorf("revision: %w", err)
	}
	if err := ValidateLabelValue(o.Instance); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	return nil
}

// Options returns the options in effect, defaults filled in.
func (t *Translator) Options() Options { return t.opts }

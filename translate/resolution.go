package translate

import (
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// ResolutionAuto is the default Options.Resolution (config key
// registries[].resolution: AUTO): a ServiceEntry is STATIC while every
// instance of its host is registered by IP address and DNS while one is
// registered by DNS name (Spring Cloud Consul's default registers the
// machine's hostname). Istio allows IP endpoints beside names under DNS, and
// meshbridge's direct xDS serves a name as the addresses it resolves to
// (package xds/dns), so nothing is lost by the switch. It is meshbridge's
// setting, not an Istio resolution: the objects carry STATIC or DNS.
const ResolutionAuto model.Resolution = "AUTO"

// Rule 2, resolution. The resolution of a ServiceEntry is its host's: a
// translation is told it by Sticky.Resolution (the Syncer decides it for a
// host from every service that claims it, with HostResolution), or, when
// that is "", decides it from the service's own instances alone. Whether an
// instance registered by DNS name is admitted follows from the resolution
// it would be served under:
//
//	Options.Resolution | Sticky.Resolution | names admitted | ServiceEntry
//	STATIC             | any               | no             | STATIC
//	DNS                | "" or DNS         | yes            | DNS
//	DNS                | STATIC            | no             | STATIC (the host's)
//	AUTO               | ""                | yes            | DNS if one is admitted, else STATIC
//	AUTO               | STATIC or DNS     | under DNS only | Sticky.Resolution
//
// A rejected name is RejectHostnameAddress, with the resolution that
// refused it.

// HostResolution is the resolution of a host whose ServiceEntry this
// Translator builds (its winner's registry), given whether some service
// that claims the host serves a name (its own translation's
// Result.Resolution is DNS): STATIC or DNS as configured, else DNS when a
// claimant needs it (ResolutionAuto).
func (t *Translator) HostResolution(claimantNeedsDNS bool) model.Resolution {
	switch t.opts.Resolution {
	case model.ResolutionStatic, model.ResolutionDNS:
		return t.opts.Resolution
	}
	if claimantNeedsDNS {
		return model.ResolutionDNS
	}
	return model.ResolutionStatic
}

// admitsNames reports whether a translation told host resolves to host
// ("" when the service decides alone) admits instances registered by name.
func (t *Translator) admitsNames(host model.Resolution) bool {
	return t.opts.Resolution != model.ResolutionStatic && host != model.ResolutionStatic
}

// resolutionOf is the ServiceEntry resolution of a translation told host
// ("" when the service decides alone) that admitted a name or not.
func (t *Translator) resolutionOf(host model.Resolution, named bool) model.Resolution {
	switch {
	case t.opts.Resolution == model.ResolutionStatic:
		return model.ResolutionStatic
	case host != "":
		return host
	case t.opts.Resolution == model.ResolutionDNS || named:
		return model.ResolutionDNS
	}
	return model.ResolutionStatic
}

// istioResolution is the ServiceEntry field for r.
func istioResolution(r model.Resolution) networking.ServiceEntry_Resolution {
	if r == model.ResolutionDNS {
		return networking.ServiceEntry_DNS
	}
	return networking.ServiceEntry_STATIC
}

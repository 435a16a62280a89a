package translate

import (
	"testing"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// TestResolutionRule is rule 2's table (resolution.go): the configured
// resolution, the host's (Sticky.Resolution) and whether the service has an
// instance registered by name give the ServiceEntry's resolution and
// whether that instance is served.
func TestResolutionRule(t *testing.T) {
	const (
		auto   = ResolutionAuto
		static = model.ResolutionStatic
		dns    = model.ResolutionDNS
	)
	cases := []struct {
		configured, host model.Resolution
		named            bool
		want             model.Resolution
		nameServed       bool
	}{
		{configured: auto, want: static},
		{configured: auto, named: true, want: dns, nameServed: true},
		{configured: auto, host: static, named: true, want: static},
		{configured: auto, host: dns, want: dns},
		{configured: auto, host: dns, named: true, want: dns, nameServed: true},
		{configured: static, named: true, want: static},
		{configured: static, host: dns, named: true, want: static},
		{configured: dns, want: dns},
		{configured: dns, named: true, want: dns, nameServed: true},
		{configured: dns, host: static, named: true, want: static},
	}
	for _, tc := range cases {
		tr := mustNew(t, Options{Resolution: tc.configured})
		svc := registries.Service{Name: "web", Instances: []registries.Instance{inst("ip", "10.0.0.1", 8080, "http")}}
		if tc.named {
			svc.Instances = append(svc.Instances, inst("name", "web-1.example.com", 8081, "http"))
		}
		res := mustTranslate(t, tr, svc, Sticky{Resolution: tc.host})
		served := len(res.Rejected) == 0
		wantSE := networking.ServiceEntry_STATIC
		if tc.want == dns {
			wantSE = networking.ServiceEntry_DNS
		}
		if res.Resolution != tc.want || res.ServiceEntry.ServiceEntry().GetResolution() != wantSE ||
			(tc.named && served != tc.nameServed) || res.Sticky.Resolution != "" {
			t.Errorf("configured %s, host %q, named %v: resolution %s (spec %s), name served %v, Sticky.Resolution %q; want %s, %v, \"\"",
				tc.configured, tc.host, tc.named, res.Resolution, res.ServiceEntry.ServiceEntry().GetResolution(), served,
				res.Sticky.Resolution, tc.want, tc.nameServed)
		}
		if tc.named && !served && res.Rejected[0].Reason != RejectHostnameAddress {
			t.Errorf("configured %s, host %q: the name is rejected as %s, want %s", tc.configured, tc.host, res.Rejected[0].Reason, RejectHostnameAddress)
		}
	}
}

// TestHostResolution: the host's resolution is the configured one, or,
// under AUTO, DNS exactly when a service of the host needs it.
func TestHostResolution(t *testing.T) {
	for _, tc := range []struct {
		configured model.Resolution
		needs      bool
		want       model.Resolution
	}{
		{ResolutionAuto, false, model.ResolutionStatic},
		{ResolutionAuto, true, model.ResolutionDNS},
		{model.ResolutionStatic, true, model.ResolutionStatic},
		{model.ResolutionDNS, false, model.ResolutionDNS},
	} {
		if got := mustNew(t, Options{Resolution: tc.configured}).HostResolution(tc.needs); got != tc.want {
			t.Errorf("HostResolution(%v) under %s = %s, want %s", tc.needs, tc.configured, got, tc.want)
		}
	}
}

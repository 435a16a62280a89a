package istio

import (
	"testing"

	"istio.io/istio/pkg/workloadapi"

	"github.com/meshbridge/meshbridge/translate"
)

// hboneLabels are registry labels that make ztunnel tunnel to a
// WorkloadEntry with HBONE (istiod pilot/pkg/serviceregistry/ambient
// workloads.go setTunnelProtocol: networking.istio.io/tunnel=http; with
// PILOT_ENABLE_MTLS_TRANSPORT_PROTOCOL, security.istio.io/tlsMode=istio
// too). A registry instance is no ztunnel nor sidecar: HBONE to it fails.
var hboneLabels = map[string]string{"networking.istio.io/tunnel": "http", "security.istio.io/tlsMode": "istio"}

// TestAmbientHBONELabelsNeedAllowLabels: registry instances labelled as if
// they spoke HBONE stay plain TCP in ztunnel's view by default, in both
// endpoint modes, since meshbridge drops labels under istio.io and its
// subdomains. With output.allowLabels letting them through, a WorkloadEntry
// carries them and ztunnel would use HBONE to it; inline endpoints stay
// plain TCP, since istiod takes an inline endpoint's tunnel from the
// ServiceEntry's own labels.
func TestAmbientHBONELabelsNeedAllowLabels(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	allow := []string{"networking.istio.io/tunnel", "security.istio.io/tlsMode"}
	cases := []struct {
		name string
		opts bridgeOptions
		want workloadapi.TunnelProtocol
	}{
		{"workloadentry, labels dropped", bridgeOptions{endpoints: translate.EndpointsWorkloadEntry},
			workloadapi.TunnelProtocol_NONE},
		{"inline, labels dropped", bridgeOptions{endpoints: translate.EndpointsInline}, workloadapi.TunnelProtocol_NONE},
		{"workloadentry, allowLabels", bridgeOptions{endpoints: translate.EndpointsWorkloadEntry, allowLabels: allow},
			workloadapi.TunnelProtocol_HBONE},
		{"inline, allowLabels", bridgeOptions{endpoints: translate.EndpointsInline, allowLabels: allow},
			workloadapi.TunnelProtocol_NONE},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := a.scenario(t)
			host := s.host("tunnel")
			writeServices(t, s.path, fileServices{host: svc(host, 8080, "tcp", instance("10.3.0.1", 8080, hboneLabels))})
			s.startBridge(t, s.ns, s.path, c.opts)
			se := s.allocated(t, host)[host]
			want := []wdsEndpoint{{addr: "10.3.0.1:8080", status: workloadapi.WorkloadStatus_HEALTHY, tunnel: c.want}}
			z.awaitService(t, s.ns, host, vips(se), 8080, want)
			t.Logf("VIPs %v; ztunnel's view: %v", vips(se), want)
		})
	}
}

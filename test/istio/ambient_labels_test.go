package istio

import (
	"fmt"
	"slices"
	"testing"

	"istio.io/istio/pkg/workloadapi"

	"github.com/meshbridge/meshbridge/translate"
)

// hboneLabels are registry labels that make ztunnel tunnel to a
// WorkloadEntry with HBONE (istiod pilot/pkg/serviceregistry/ambient
// workloads.go setTunnelProtocol: networking.istio.io/tunnel=http) and
// sidecars use Istio mTLS to it (security.istio.io/tlsMode=istio). A
// registry instance is no ztunnel nor sidecar: either connection fails.
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

// TestAmbientInstancesSharingAnAddress: two instances of one service on one
// address (two ports) are two workloads in ztunnel's view in workloadentry
// mode. In inline mode istiod names an inline endpoint's workload after the
// ServiceEntry and the address alone (pilot/pkg/serviceregistry/ambient
// workloads.go generateServiceEntryUID), so ztunnel sees one of them: the
// README's Ambient section recommends workloadentry mode for that reason.
func TestAmbientInstancesSharingAnAddress(t *testing.T) {
	a := startAmbient(t)
	z := a.startZtunnel(t)
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		s := a.scenario(t)
		host := s.host("shared")
		writeServices(t, s.path, fileServices{host: svc(host, 8080, "tcp",
			instance("10.5.0.1", 8080, nil), instance("10.5.0.1", 8081, nil))})
		s.startBridge(t, s.ns, s.path, bridgeOptions{endpoints: mode})
		se := s.allocated(t, host)[host]
		if mode == translate.EndpointsWorkloadEntry {
			want := plain("10.5.0.1:8080", "10.5.0.1:8081")
			z.awaitService(t, s.ns, host, vips(se), 8080, want)
			t.Logf("VIPs %v; ztunnel's view in %s mode: %v", vips(se), mode, want)
			return
		}
		// Which of the two istiod keeps is its choice; there is one.
		var got []wdsEndpoint
		z.Await(t, ambientWait, "ztunnel's view of "+host, func() error {
			v, err := z.view(s.ns)
			if err != nil {
				return err
			}
			got = v.endpoints(s.ns, host, 8080)
			if !slices.Equal(v.serviceVIPs(host), vips(se)) || len(got) != 1 ||
				!slices.Contains(plain("10.5.0.1:8080", "10.5.0.1:8081"), got[0]) {
				return fmt.Errorf("service %s: VIPs %v, endpoints %v", host, v.serviceVIPs(host), got)
			}
			return nil
		})
		t.Logf("VIPs %v; ztunnel's view in %s mode: %v, one workload for the two instances", vips(se), mode, got)
	})
}

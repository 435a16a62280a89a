package istio

import (
	"fmt"
	"slices"
	"testing"

	networking "istio.io/api/networking/v1"
	"istio.io/istio/pkg/config/schema/gvk"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate"
)

// TestIstiodAdscHostnameInstanceMakesADNSServiceEntry: under the default
// resolution (AUTO), a service with an instance registered by DNS name
// ("localhost") beside one registered by IP is served over MCP as a
// ServiceEntry with resolution DNS, the name the address of its
// WorkloadEntry (inline: of its endpoint), and istiod's MCP client stores
// every object: its config store validates what it stores (memory.Make,
// as istiod's xds:// configSource does), so an object Istio's validation
// refused would be missing from it. A service of IP instances alone stays
// STATIC beside it. When the named instance leaves, the ServiceEntry is
// STATIC again in istiod's store, and DNS once more when it returns. In
// both endpoint modes.
func TestIstiodAdscHostnameInstanceMakesADNSServiceEntry(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode translate.EndpointMode) {
		named := registries.Service{
			Name:  "named",
			Host:  "named.static.local",
			Ports: []registries.Port{{Number: 8080, Protocol: "grpc"}},
			Instances: []registries.Instance{
				{ID: "named-0", Address: "localhost", Port: 9001, Weight: 1},
				{ID: "named-1", Address: "10.9.0.1", Port: 8080, Weight: 1},
			},
		}
		ipOnly := named
		ipOnly.Instances = named.Instances[1:]
		p := startPipelineMode(t, mode, named, service(1, 1))
		i := startIstiod(t, p.xds.Addr().String())

		steps := []struct {
			name       string
			svc        registries.Service
			resolution networking.ServiceEntry_Resolution
			endpoints  []string
		}{
			{"named and IP instances", named, networking.ServiceEntry_DNS, []string{"10.9.0.1:8080", "localhost:9001"}},
			{"named instance gone", ipOnly, networking.ServiceEntry_STATIC, []string{"10.9.0.1:8080"}},
			{"named instance back", named, networking.ServiceEntry_DNS, []string{"10.9.0.1:8080", "localhost:9001"}},
		}
		for k, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				if k > 0 {
					p.update(step.svc)
				}
				var got []string
				eventually(t, "istiod's store holds "+named.Host+" "+step.resolution.String(), func() bool {
					se := i.serviceEntry(named.Host)
					if se == nil || se.GetResolution() != step.resolution {
						return false
					}
					got = i.endpoints(se)
					return slices.Equal(got, step.endpoints)
				})
				converged(t, p, i)
				if r := i.serviceEntry("svc-1.static.local").GetResolution(); r != networking.ServiceEntry_STATIC {
					t.Errorf("svc-1.static.local (IP instances alone) has resolution %s in istiod's store, want STATIC", r)
				}
				t.Logf("%s mode: istiod's store holds %s with resolution %s, endpoints %v; %d ServiceEntries and %d "+
					"WorkloadEntries, meshbridge's every object", mode, named.Host, step.resolution, got,
					len(i.versions(gvk.ServiceEntry)), len(i.versions(gvk.WorkloadEntry)))
			})
		}
	})
}

// serviceEntry returns the spec of the ServiceEntry of host in istiod's
// store (nil when absent).
func (i *istiod) serviceEntry(host string) *networking.ServiceEntry {
	for _, c := range i.store.List(gvk.ServiceEntry, "") {
		if se := c.Spec.(*networking.ServiceEntry); slices.Contains(se.GetHosts(), host) {
			return se
		}
	}
	return nil
}

// endpoints returns se's endpoints in istiod's store as "address:port" on
// its first port, inline or the WorkloadEntries its workloadSelector
// selects, sorted.
func (i *istiod) endpoints(se *networking.ServiceEntry) []string {
	port := se.GetPorts()[0]
	var out []string
	add := func(addr string, ports map[string]uint32) {
		p, ok := ports[port.GetName()]
		if !ok {
			p = port.GetNumber()
		}
		out = append(out, fmt.Sprintf("%s:%d", addr, p))
	}
	for _, e := range se.GetEndpoints() {
		add(e.GetAddress(), e.GetPorts())
	}
	if sel := se.GetWorkloadSelector().GetLabels(); len(sel) > 0 {
		selector := labels.SelectorFromSet(sel)
		for _, c := range i.store.List(gvk.WorkloadEntry, "") {
			if we := c.Spec.(*networking.WorkloadEntry); selector.Matches(labels.Set(we.GetLabels())) {
				add(we.GetAddress(), we.GetPorts())
			}
		}
	}
	slices.Sort(out)
	return out
}

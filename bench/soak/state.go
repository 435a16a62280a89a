package main

import (
	"cmp"
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// state is a mesh as a client sees it: every cluster's name and the digest
// of its ClusterLoadAssignment's endpoints.
type state map[string]uint64

// diff counts the clusters in which view differs from want: missing, extra,
// or with other endpoints.
func (want state) diff(view state) int {
	n := 0
	for name, d := range want {
		if got, ok := view[name]; !ok || got != d {
			n++
		}
	}
	for name := range view {
		if _, ok := want[name]; !ok {
			n++
		}
	}
	return n
}

// firstDiff names the first cluster (by name) in which view differs from
// want, and how.
func (want state) firstDiff(view state) (name, how string) {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, ok := view[name]
		switch {
		case !ok:
			return name, "missing"
		case got == 0:
			return name, "without a ClusterLoadAssignment"
		case got != want[name]:
			return name, "with other endpoints"
		}
	}
	for _, name := range slices.Sorted(maps.Keys(view)) {
		if _, ok := want[name]; !ok {
			return name, "extra"
		}
	}
	return "", ""
}

// seed makes digests comparable within the process.
var seed = maphash.MakeSeed()

// endpointKey is what a client learns of one endpoint: address, port,
// load-balancing weight and locality ("region/zone/subzone").
type endpointKey struct {
	address  string
	port     uint32
	weight   uint32
	locality string
}

// digest hashes a set of endpoints, whatever their order.
func digest(eps []endpointKey) uint64 {
	slices.SortFunc(eps, func(a, b endpointKey) int {
		return cmp.Or(strings.Compare(a.address, b.address), cmp.Compare(a.port, b.port),
			cmp.Compare(a.weight, b.weight), strings.Compare(a.locality, b.locality))
	})
	var h maphash.Hash
	h.SetSeed(seed)
	var buf []byte
	for _, e := range eps {
		buf = append(append(buf[:0], e.address...), ':')
		buf = append(strconv.AppendUint(buf, uint64(e.port), 10), '|')
		buf = append(strconv.AppendUint(buf, uint64(e.weight), 10), '|')
		buf = append(append(buf, e.locality...), '\n')
		_, _ = h.Write(buf)
	}
	return h.Sum64()
}

// locality normalizes "region/zone/subzone" with parts missing, the way
// xds splits it into a core.Locality.
func locality(s string) string {
	region, rest, _ := strings.Cut(s, "/")
	zone, sub, _ := strings.Cut(rest, "/")
	return region + "/" + zone + "/" + sub
}

// claDigest decodes an encoded ClusterLoadAssignment: its cluster name and
// the digest of its endpoints.
func claDigest(b []byte) (string, uint64, error) {
	cla := &endpoint.ClusterLoadAssignment{}
	if err := proto.Unmarshal(b, cla); err != nil {
		return "", 0, err
	}
	var eps []endpointKey
	for _, loc := range cla.GetEndpoints() {
		l := loc.GetLocality()
		where := l.GetRegion() + "/" + l.GetZone() + "/" + l.GetSubZone()
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			eps = append(eps, endpointKey{sa.GetAddress(), sa.GetPortValue(), lb.GetLoadBalancingWeight().GetValue(), where})
		}
	}
	return cla.GetClusterName(), digest(eps), nil
}

// controllerState is what every client should converge to: the clusters of
// the controller's services (one per port, as xds names them) and their
// endpoints, as xds builds ClusterLoadAssignments from them (weight at
// least 1; addresses are distinct in the soak's mesh, so none is dropped
// as a duplicate).
func controllerState(c *serviceentry.Controller) state {
	out := make(state)
	for _, svc := range c.Services() {
		eps := c.Endpoints(svc.Namespace, svc.Hostname)
		for _, port := range svc.Ports {
			var keys []endpointKey
			for _, ep := range eps {
				if ep.ServicePortName == port.Name {
					keys = append(keys, endpointKey{ep.Address, ep.EndpointPort, max(ep.Weight, 1), locality(ep.Locality)})
				}
			}
			out[gen.ClusterName(port.Number, svc.Hostname)] = digest(keys)
		}
	}
	return out
}

// meshState is the state the registry's services translate to: one cluster
// per service on pipeline.ServicePort, its instances as endpoints (weight 0
// taking the default weight, as translate gives it).
func meshState(tr *translate.Translator, services map[int]*meshService) (state, error) {
	out := make(state, len(services))
	for i, svc := range services {
		host, err := tr.Host(registries.Service{Name: pipeline.ServiceName(i)})
		if err != nil {
			return nil, err
		}
		keys := make([]endpointKey, 0, len(svc.instances))
		for _, inst := range svc.instances {
			w := cmp.Or(inst.Weight, model.DefaultWeight)
			keys = append(keys, endpointKey{inst.Address, inst.Port, w, locality(inst.Locality)})
		}
		out[gen.ClusterName(pipeline.ServicePort, host)] = digest(keys)
	}
	return out, nil
}

package nacos

import (
	"cmp"
	"maps"
	"math"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// Label keys and metadata keys the registry reads or sets (doc.go rule 6).
const (
	// ClusterLabel carries the instance's Nacos cluster name, a label key
	// outside every prefix translate reserves; omitted for a cluster-less
	// instance.
	ClusterLabel = "nacos.io/cluster"
	// Metadata keys read from an instance.
	MetaProtocol = "protocol"
	MetaRegion   = "region"
	MetaZone     = "zone"
	MetaSubzone  = "subzone"
	// internalMetaPrefix marks metadata the server adds for itself (Polaris
	// adds internal-nacos-cluster, internal-nacos-service, ...): never a
	// label.
	internalMetaPrefix = "internal-nacos-"
)

// maxWeight is Nacos's largest instance weight (10000; Nacos
// InstanceOperatorClientImpl's check), on the common scale.
const maxWeight = 10000 * model.DefaultWeight

// Weight converts a Nacos weight (a float, default 1.0, 0-10000) to the
// common scale where every registry's default weight is
// model.DefaultWeight (100): round(w × 100), at least 1 for w > 0, at most
// 1,000,000. ok is false for a weight that makes the instance unusable: 0,
// negative or NaN (Nacos clients never pick an instance of weight 0).
func Weight(w float64) (weight uint32, ok bool) {
	if !(w > 0) {
		return 0, false
	}
	x := math.Round(w * model.DefaultWeight)
	return uint32(min(max(x, 1), maxWeight)), true
}

// read is what one read of a service (a push, a subscribe answer or a
// reconcile query) yields: its usable instances, and whether it is a Dubbo
// service.
type read struct {
	instances []registries.Instance
	dubbo     bool
}

// readService converts a Nacos service's instances into the usable ones,
// sorted by ID. An instance is usable when enabled, healthy, of weight > 0
// and, with a cluster filter, in one of clusters. namespace, group and name
// are the service's scope as listed (the host template's input).
func readService(svc nacosmodel.Service, namespace, group, name string, clusters []string) read {
	var r read
	out := make([]registries.Instance, 0, len(svc.Hosts))
	seen := map[string]bool{}
	for _, h := range svc.Hosts {
		if isDubboInstance(h.Metadata) {
			r.dubbo = true
		}
		weight, ok := Weight(h.Weight)
		if !ok || !h.Enable || !h.Healthy || h.Ip == "" || h.Port == 0 || h.Port > 65535 {
			continue
		}
		if len(clusters) > 0 && !slices.Contains(clusters, h.ClusterName) {
			continue
		}
		id := instanceID(namespace, group, name, h.ClusterName, h.Ip, h.Port)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, registries.Instance{
			ID:       id,
			Address:  h.Ip,
			Port:     uint32(h.Port),
			Protocol: h.Metadata[MetaProtocol],
			Labels:   labelsFrom(h.Metadata, h.ClusterName),
			Weight:   weight,
			Locality: locality(h.Metadata),
		})
	}
	slices.SortFunc(out, func(a, b registries.Instance) int { return cmp.Compare(a.ID, b.ID) })
	r.instances = out
	return r
}

// instanceID is "<namespace>/<group>/<service>/<cluster>/<ip>:<port>" (an
// IPv6 address in brackets): Nacos identifies an instance by ip, port and
// cluster within a service.
func instanceID(namespace, group, name, cluster, ip string, port uint64) string {
	return namespace + "/" + group + "/" + name + "/" + cluster + "/" + net.JoinHostPort(ip, strconv.FormatUint(port, 10))
}

// labelsFrom is the instance metadata, less the server's internal-nacos-*
// keys, plus ClusterLabel. Raw: translate sanitizes. nil when empty.
func labelsFrom(meta map[string]string, cluster string) map[string]string {
	labels := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		if !strings.HasPrefix(k, internalMetaPrefix) {
			labels[k] = v
		}
	}
	if cluster != "" {
		labels[ClusterLabel] = cluster
	}
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// locality is "<region>/<zone>/<subzone>" from the instance metadata, or ""
// when none is set.
func locality(meta map[string]string) string {
	r, z, s := meta[MetaRegion], meta[MetaZone], meta[MetaSubzone]
	if r == "" && z == "" && s == "" {
		return ""
	}
	return r + "/" + z + "/" + s
}

// Dubbo on Nacos (Dubbo docs, "Nacos registry"): interface-level services
// are named "<category>:<interface>:<version>:<group>", and Dubbo 3
// application-level instances carry these metadata keys.
var (
	dubboCategories = []string{"providers:", "consumers:", "routers:", "configurators:"}
	dubboMetaKeys   = []string{"dubbo.metadata.revision", "dubbo.endpoints"}
)

// isDubboName reports whether a service name is a Dubbo interface-level
// registration.
func isDubboName(name string) bool {
	for _, c := range dubboCategories {
		if strings.HasPrefix(name, c) {
			return true
		}
	}
	return false
}

// isDubboInstance reports whether an instance is a Dubbo 3 application-level
// instance.
func isDubboInstance(meta map[string]string) bool {
	for _, k := range dubboMetaKeys {
		if _, ok := meta[k]; ok {
			return true
		}
	}
	return false
}

// allowed reports whether the allow-list lets a service name through; an
// empty list allows every name.
func allowed(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// sameInstances reports whether two instance lists sorted by ID hold the
// same instances.
func sameInstances(a, b []registries.Instance) bool {
	return slices.EqualFunc(a, b, func(x, y registries.Instance) bool {
		return x.ID == y.ID && x.Address == y.Address && x.Port == y.Port && x.Protocol == y.Protocol &&
			x.Weight == y.Weight && x.Locality == y.Locality && maps.Equal(x.Labels, y.Labels)
	})
}

package nacos

import (
	"cmp"
	"errors"
	"math"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// Label keys and metadata keys the registry reads or sets (doc.go rule 6).
const (
	// ClusterLabel carries the instance's Nacos cluster name, a label key
	// outside every prefix translate reserves; omitted for a cluster-less
	// instance.
	ClusterLabel = "nacos.io/cluster"
	// Metadata keys read from an instance.
	MetaProtocol = "protocol"
	// MetaRegisterSource is set by Spring Cloud Alibaba's Nacos Discovery
	// on every instance it registers (value SpringCloudSource).
	MetaRegisterSource = "preserved.register.source"
	SpringCloudSource  = "SPRING_CLOUD"
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

// usableWeight reports whether a Nacos instance is usable (doc.go rule 6):
// enabled, healthy, of weight > 0, with an address and a port in 1-65535,
// and, with a cluster filter, in one of clusters; and its weight on the
// common scale.
func usableWeight(h nacosmodel.Instance, clusters []string) (uint32, bool) {
	weight, ok := Weight(h.Weight)
	if !ok || !h.Enable || !h.Healthy || h.Ip == "" || h.Port == 0 || h.Port > 65535 {
		return 0, false
	}
	if len(clusters) > 0 && !slices.Contains(clusters, h.ClusterName) {
		return 0, false
	}
	return weight, true
}

// readService converts a Nacos service's instances into the usable ones,
// sorted by ID (doc.go rule 6). namespace, group and name are the service's
// scope as listed (the host template's input).
func readService(svc nacosmodel.Service, namespace, group, name string, clusters []string) []registries.Instance {
	out := make([]registries.Instance, 0, len(svc.Hosts))
	seen := map[string]bool{}
	for _, h := range svc.Hosts {
		weight, ok := usableWeight(h, clusters)
		if !ok {
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
			Protocol: protocolOf(h.Metadata),
			Labels:   labelsFrom(h.Metadata, h.ClusterName),
			Weight:   weight,
			Locality: registries.MetadataLocality(h.Metadata),
		})
	}
	slices.SortFunc(out, func(a, b registries.Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// protocolOf is an instance's protocol (doc.go rule 6): its protocol
// metadata; else http for an instance Spring Cloud registered
// (MetaRegisterSource SPRING_CLOUD: a Spring web application, which
// registers its HTTP server's port and no protocol); else "" (translate's
// default, tcp).
func protocolOf(meta map[string]string) string {
	if p := meta[MetaProtocol]; p != "" {
		return p
	}
	if meta[MetaRegisterSource] == SpringCloudSource {
		return "http"
	}
	return ""
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

// Dubbo on Nacos (Dubbo docs, "Nacos registry"): interface-level services
// are named "<category>:<interface>:<version>:<group>" (only the providers
// category holds providers), and Dubbo 3 application-level instances carry
// dubbo.metadata.revision or dubbo.endpoints metadata.
var dubboCategories = []string{providersPrefix, "consumers:", "routers:", "configurators:"}

// providersPrefix starts the name of a Dubbo interface-level service.
const providersPrefix = "providers:"

// isDubboName reports whether a service name is a Dubbo interface-level
// registration, of any category.
func isDubboName(name string) bool {
	for _, c := range dubboCategories {
		if strings.HasPrefix(name, c) {
			return true
		}
	}
	return false
}

// isDubboApplication reports whether a Nacos service holds Dubbo 3
// application-level instances: any instance, usable or not, carries their
// metadata.
func isDubboApplication(hosts []nacosmodel.Instance) bool {
	return slices.ContainsFunc(hosts, func(h nacosmodel.Instance) bool { return dubbo.IsApplicationInstance(h.Metadata) })
}

// providersService is the Dubbo service a "providers:<interface>:<version>:<group>"
// name stands for; the version and group may be left out ("providers:<interface>").
func providersService(name string) dubbo.Identity {
	parts := strings.SplitN(strings.TrimPrefix(name, providersPrefix), ":", 3)
	parts = append(parts, "", "")
	return dubbo.Identity{Interface: parts[0], Version: parts[1], Group: parts[2]}
}

// dubboMetadata is an instance's metadata less the server's internal-nacos-*
// keys: a Dubbo provider's URL parameters, or an application-level
// instance's metadata.
func dubboMetadata(meta map[string]string) map[string]string {
	out := make(map[string]string, len(meta))
	for k, v := range meta {
		if !strings.HasPrefix(k, internalMetaPrefix) {
			out[k] = v
		}
	}
	return out
}

// dubboEntryID names a Nacos instance that is no valid Dubbo registration:
// "<ip>:<port>".
func dubboEntryID(h nacosmodel.Instance) string {
	return h.Ip + ":" + strconv.FormatUint(h.Port, 10)
}

// readDubboInterface converts the instances of the Nacos service name, a
// "providers:" name, into its interface-level Dubbo service (doc.go rule 8):
// each usable instance is a provider whose URL parameters are its metadata
// and whose protocol is its protocol metadata (default dubbo); an instance
// that is not a provider is ignored, one that is malformed is an instance
// with Invalid set. The service is the one the name says, whatever the
// parameters (Dubbo consumers look providers up by that name); the Dubbo
// weight parameter, when set, wins over the Nacos weight.
func readDubboInterface(svc nacosmodel.Service, ns, name string, clusters []string, b *dubbo.Builder) registries.Service {
	want := providersService(name)
	var providers []dubbo.Provider
	var malformed []dubbo.Malformed
	for _, h := range svc.Hosts {
		weight, ok := usableWeight(h, clusters)
		if !ok {
			continue
		}
		params := dubboMetadata(h.Metadata)
		if params["interface"] == "" && want.Interface != "" {
			params["interface"] = want.Interface
		}
		p, err := dubbo.ProviderFromParams(cmp.Or(params[MetaProtocol], "dubbo"), h.Ip, uint32(h.Port), params)
		switch {
		case errors.Is(err, dubbo.ErrNotProvider):
			continue
		case err != nil:
			malformed = append(malformed, dubbo.Malformed{ID: dubboEntryID(h), Detail: err.Error()})
			continue
		}
		if p.Weight == 0 {
			p.Weight = weight
		}
		providers = append(providers, p)
	}
	return b.InterfaceService(ns, name, want, providers, malformed)
}

// readDubboApplication converts the instances of the Nacos service name, a
// Dubbo 3 application, into its application-level Dubbo service (doc.go
// rule 8): each usable instance is an application instance of its address,
// port and metadata; one that is malformed is an instance with Invalid set.
// The weight metadata, when set, wins over the Nacos weight.
func readDubboApplication(svc nacosmodel.Service, ns, name string, clusters []string, b *dubbo.Builder) registries.Service {
	var insts []dubbo.AppInstance
	var malformed []dubbo.Malformed
	for _, h := range svc.Hosts {
		weight, ok := usableWeight(h, clusters)
		if !ok {
			continue
		}
		a, err := dubbo.AppInstanceFromMetadata(name, h.Ip, uint32(h.Port), dubboMetadata(h.Metadata))
		if err != nil {
			malformed = append(malformed, dubbo.Malformed{ID: dubboEntryID(h), Detail: err.Error()})
			continue
		}
		if a.Weight == 0 {
			a.Weight = weight
		}
		insts = append(insts, a)
	}
	out := b.ApplicationService(ns, name, insts, malformed, nil)
	if out.Instances == nil {
		out.Instances = []registries.Instance{}
	}
	return out
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

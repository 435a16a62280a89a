package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/golang/protobuf/jsonpb" //nolint:staticcheck // istiod's YAML decoding: Go durations
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/meshbridge/meshbridge/xds/gen"
)

// Object is one DestinationRule or VirtualService document of a file.
type Object struct {
	// Kind is KindDestinationRule or KindVirtualService.
	Kind string
	// Namespace and Name are its metadata's; Namespace "default" when
	// unset, as kubectl applies it.
	Namespace, Name string
	// Source is "<file>#<document>", documents counted from 1.
	Source string
	// Rule is a DestinationRule's spec, host in lower case; Routing a
	// VirtualService's, hosts in lower case. Nil when Err is set.
	Rule    *networking.DestinationRule
	Routing *networking.VirtualService
	// Err is why the document is not a valid object of its kind (rules
	// 1, 2).
	Err error
}

// The kinds read.
const (
	KindDestinationRule = "DestinationRule"
	KindVirtualService  = "VirtualService"
)

// ID is "namespace/name", the identity an object keeps across edits
// (one per kind).
func (o Object) ID() string { return o.Namespace + "/" + o.Name }

// Ignored is a document of a kind this package does not read (rule 1).
type Ignored struct {
	Source, APIVersion, Kind, Name string
}

// apiVersions are the versions read of both kinds (rule 1).
var apiVersions = map[string]bool{
	"networking.istio.io/v1":       true,
	"networking.istio.io/v1beta1":  true,
	"networking.istio.io/v1alpha3": true,
}

// document is the envelope of a Kubernetes-style document.
type document struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec yamlRaw `json:"spec"`
}

// yamlRaw keeps a field's JSON for protojson.
type yamlRaw []byte

func (r *yamlRaw) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// Parse reads the YAML documents of data, from file name: every
// DestinationRule and VirtualService (valid or not, Object.Err) and the
// documents of other kinds. It fails only when data is not a stream of YAML documents.
func Parse(name string, data []byte) ([]Object, []Ignored, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []Object
	var ignored []Ignored
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, ignored, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: document %d: %w", name, n, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			n--
			continue
		}
		source := fmt.Sprintf("%s#%d", name, n)
		var d document
		if err := yaml.Unmarshal(doc, &d); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", source, err)
		}
		if d.Kind != KindDestinationRule && d.Kind != KindVirtualService || !apiVersions[d.APIVersion] {
			ignored = append(ignored, Ignored{Source: source, APIVersion: d.APIVersion, Kind: d.Kind, Name: d.Metadata.Name})
			continue
		}
		o := Object{Kind: d.Kind, Namespace: d.Metadata.Namespace, Name: d.Metadata.Name, Source: source}
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		if d.Kind == KindDestinationRule {
			o.Rule, o.Err = parseRule(d)
		} else {
			o.Routing, o.Err = parseVirtualService(d)
		}
		objs = append(objs, o)
	}
}

// stripComments drops full-line comments, so that a document of comments
// only is empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// parseSpec decodes d's spec into m.
func parseSpec(d document, m protoadapt.MessageV1) error {
	if d.Metadata.Name == "" {
		return errors.New("metadata.name is empty")
	}
	if len(d.Spec) == 0 {
		return errors.New("spec is empty")
	}
	// jsonpb, as istiod reads its objects' YAML: durations as Go writes
	// them ("5m"), which protojson refuses; unknown fields are errors.
	if err := (&jsonpb.Unmarshaler{}).Unmarshal(bytes.NewReader(d.Spec), m); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}

// parseRule reads and validates d's spec.
func parseRule(d document) (*networking.DestinationRule, error) {
	dr := &networking.DestinationRule{}
	if err := parseSpec(d, dr); err != nil {
		return nil, err
	}
	return checkRule(dr)
}

// checkRule lower-cases dr's host, in place, and validates it (rule 2): a
// DestinationRule of any source.
func checkRule(dr *networking.DestinationRule) (*networking.DestinationRule, error) {
	dr.Host = strings.ToLower(dr.GetHost())
	if err := validateExportTo(dr.GetExportTo()); err != nil {
		return nil, err
	}
	if err := validate(dr); err != nil {
		return nil, err
	}
	return dr, nil
}

// validateExportTo refuses an exportTo that limits an object to some
// namespaces ("." its own, "~" none, or names): istiod shows such an
// object only to the proxies of those namespaces, and meshbridge serves
// every client the same rules, so serving it would show it to clients
// it is not exported to, and ignoring the limit is not an option (rule
// 9). Empty (Istio's default) and a list holding "*" are every namespace.
func validateExportTo(exportTo []string) error {
	if len(exportTo) == 0 || slices.Contains(exportTo, "*") {
		return nil
	}
	return fmt.Errorf("spec.exportTo %q limits it to some namespaces: meshbridge serves every client the same "+
		"rules; export it to \"*\" (or leave exportTo out) to serve it", exportTo)
}

// validateHost checks a host as istiod does: an FQDN or one label, or a
// wildcard "*.<DNS name>", or "*" when star.
func validateHost(at, host string, star bool) error {
	switch {
	case host == "":
		return fmt.Errorf("%s is empty", at)
	case host == "*":
		if !star {
			return fmt.Errorf("%s %q: \"*\" is not a host for the mesh", at, host)
		}
	case strings.HasPrefix(host, "*."):
		if !dnsName.MatchString(host[2:]) {
			return fmt.Errorf("%s %q: not a wildcard of a DNS name", at, host)
		}
	case !dnsName.MatchString(host) || len(host) > 253:
		return fmt.Errorf("%s %q: not a DNS name", at, host)
	}
	return nil
}

// dnsName is an FQDN of lower-case labels, or one label.
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// validate checks dr as istiod's ValidateDestinationRule does for the
// fields meshbridge reads and their neighbours (rule 2).
func validate(dr *networking.DestinationRule) error {
	if err := validateHost("spec.host", dr.GetHost(), true); err != nil {
		return err
	}
	if err := validatePolicy("spec.trafficPolicy", dr.GetTrafficPolicy()); err != nil {
		return err
	}
	names := map[string]bool{}
	for i, s := range dr.GetSubsets() {
		at := fmt.Sprintf("spec.subsets[%d]", i)
		switch {
		case s.GetName() == "":
			return fmt.Errorf("%s.name is empty", at)
		case names[s.GetName()]:
			return fmt.Errorf("%s.name %q: a subset of that name comes before", at, s.GetName())
		case len(validation.IsDNS1123Label(s.GetName())) > 0:
			return fmt.Errorf("%s.name %q: not a DNS-1123 label (%s)", at, s.GetName(),
				strings.Join(validation.IsDNS1123Label(s.GetName()), "; "))
		}
		names[s.GetName()] = true
		for _, k := range slices.Sorted(maps.Keys(s.GetLabels())) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Errorf("%s.labels: key %q: %s", at, k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(s.GetLabels()[k]); len(errs) > 0 {
				return fmt.Errorf("%s.labels[%s]: value %q: %s", at, k, s.GetLabels()[k], strings.Join(errs, "; "))
			}
		}
		if err := validatePolicy(at+".trafficPolicy", s.GetTrafficPolicy()); err != nil {
			return err
		}
	}
	return nil
}

// validatePolicy checks a traffic policy and its port-level settings.
func validatePolicy(at string, tp *networking.TrafficPolicy) error {
	if tp == nil {
		return nil
	}
	if err := validateSettings(at, tp.GetConnectionPool(), tp.GetOutlierDetection()); err != nil {
		return err
	}
	if err := validateLocality(at+".loadBalancer.localityLbSetting", tp.GetLoadBalancer().GetLocalityLbSetting()); err != nil {
		return err
	}
	ports := map[uint32]bool{}
	for i, p := range tp.GetPortLevelSettings() {
		pat := fmt.Sprintf("%s.portLevelSettings[%d]", at, i)
		switch n := p.GetPort().GetNumber(); {
		case n == 0 || n > 65535:
			return fmt.Errorf("%s.port.number %d: not a port (1-65535)", pat, n)
		case ports[n]:
			return fmt.Errorf("%s.port.number %d: a setting for that port comes before", pat, n)
		default:
			ports[n] = true
		}
		if err := validateSettings(pat, p.GetConnectionPool(), p.GetOutlierDetection()); err != nil {
			return err
		}
		if err := validateLocality(pat+".loadBalancer.localityLbSetting", p.GetLoadBalancer().GetLocalityLbSetting()); err != nil {
			return err
		}
	}
	return nil
}

// validateSettings checks a connection pool and an outlier detection.
func validateSettings(at string, cp *networking.ConnectionPoolSettings, od *networking.OutlierDetection) error {
	if n := cp.GetHttp().GetHttp2MaxRequests(); n < 0 {
		return fmt.Errorf("%s.connectionPool.http.http2MaxRequests %d: negative", at, n)
	}
	if od == nil {
		return nil
	}
	for _, d := range []struct {
		field string
		v     *durationpb.Duration
	}{{"interval", od.GetInterval()}, {"baseEjectionTime", od.GetBaseEjectionTime()}} {
		if d.v != nil && (d.v.CheckValid() != nil || d.v.AsDuration() < 1e6) {
			return fmt.Errorf("%s.outlierDetection.%s %v: must be at least 1ms", at, d.field, d.v.AsDuration())
		}
	}
	for _, p := range []struct {
		field string
		v     int32
	}{{"maxEjectionPercent", od.GetMaxEjectionPercent()}, {"minHealthPercent", od.GetMinHealthPercent()}} {
		if p.v < 0 || p.v > 100 {
			return fmt.Errorf("%s.outlierDetection.%s %d: not a percentage (0-100)", at, p.field, p.v)
		}
	}
	if od.GetConsecutiveErrors() < 0 {
		return fmt.Errorf("%s.outlierDetection.consecutiveErrors %d: negative", at, od.GetConsecutiveErrors())
	}
	return nil
}

// validateLocality checks a localityLbSetting as istiod's
// validateLocalityLbSetting does: distribute and failover exclusive; each
// distribute rule's to weights in 1-100 and summing to 100; a locality
// with at most one "*", as its last part, and none listed twice; failover
// between two different regions, without "/" or "*"; no topology label in
// failoverPriority next to failover.
func validateLocality(at string, lb *networking.LocalityLoadBalancerSetting) error {
	if lb == nil {
		return nil
	}
	if len(lb.GetDistribute()) > 0 && len(lb.GetFailover()) > 0 {
		return fmt.Errorf("%s: distribute and failover cannot both be set", at)
	}
	if len(lb.GetFailover()) > 0 {
		for _, l := range lb.GetFailoverPriority() {
			switch name, _, _ := strings.Cut(l, "="); name {
			case gen.LabelTopologyRegion, gen.LabelTopologyZone, gen.LabelTopologySubzone:
				return fmt.Errorf("%s: failoverPriority %q: a topology label cannot be set with failover", at, l)
			}
		}
	}
	checkLocalities := func(at string, localities []string) error {
		seen := map[string]bool{}
		for _, l := range localities {
			if n := strings.Count(l, "*"); n > 1 || n == 1 && !strings.HasSuffix(l, "*") {
				return fmt.Errorf("%s: locality %q: a wildcard '*' may only be its last part", at, l)
			}
			if seen[l] {
				return fmt.Errorf("%s: locality %q is listed twice", at, l)
			}
			seen[l] = true
		}
		return nil
	}
	from := make([]string, 0, len(lb.GetDistribute()))
	for i, d := range lb.GetDistribute() {
		dat := fmt.Sprintf("%s.distribute[%d]", at, i)
		from = append(from, d.GetFrom())
		var total uint32
		for _, loc := range slices.Sorted(maps.Keys(d.GetTo())) {
			w := d.GetTo()[loc]
			if w < 1 || w > 100 {
				return fmt.Errorf("%s.to[%s]: weight %d is not in 1-100", dat, loc, w)
			}
			total += w
		}
		if total != 100 {
			return fmt.Errorf("%s.to: the weights sum to %d, not 100", dat, total)
		}
		if err := checkLocalities(dat+".to", slices.Sorted(maps.Keys(d.GetTo()))); err != nil {
			return err
		}
	}
	if err := checkLocalities(at+".distribute", from); err != nil {
		return err
	}
	for i, f := range lb.GetFailover() {
		fat := fmt.Sprintf("%s.failover[%d]", at, i)
		switch {
		case f.GetFrom() == f.GetTo():
			return fmt.Errorf("%s: from and to are the same region %q", fat, f.GetFrom())
		case strings.ContainsAny(f.GetFrom()+f.GetTo(), "/*"):
			return fmt.Errorf("%s: from and to are regions, without '/' or '*'", fat)
		}
	}
	return nil
}

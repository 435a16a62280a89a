package xds

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshbridge/meshbridge/xds/bootstrap"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// What each xDS client accepts: a client NACKs a cluster whose lb_policy
// it does not implement, and the NACK rejects the whole CDS response (gRPC
// doc/grpc_xds_features.md), so one DestinationRule asking LEAST_REQUEST
// would break every client that lacks it. The bridge tells the client
// family and version from the node's user_agent_name and
// user_agent_version and serves it only the optional features
// (gen.Features) its row says it accepts, each from the version it is
// known from (and TLS clusters only when its node also declares the
// certificate provider they name, declaresCertificateProvider); a resource using another is served in the form gen built
// for the features the client lacks (gen.Varied), and each substitution
// served is counted (meshbridge_xds_policy_substitutions_total) and shown
// on the stream in /debug/syncz. A client no row names gets only what
// every client accepts.

// clientRow is one client family.
type clientRow struct {
	// family names it in metrics and status.
	family string
	// agent is its node user_agent_name, or a prefix of it when prefix.
	agent  string
	prefix bool
	// versionPrefix comes before the version in its user_agent_version
	// (C-core's "C-core 29.0.0 Python 1.51.1": its core version).
	versionPrefix string
	// accepts are the features it accepts, each from a version.
	accepts []acceptance
}

// acceptance is a set of features a family accepts from version since
// ("" any), and where that is known from.
type acceptance struct {
	features gen.Features
	since    string
	source   string
}

// clientTable is the one table of what each client family accepts.
var clientTable = []clientRow{
	{family: "envoy", agent: "envoy", accepts: []acceptance{
		{gen.AllFeatures, "", "Envoy implements every Cluster lb_policy"}}},
	{family: "grpc-go", agent: "gRPC Go", accepts: []acceptance{
		{gen.LeastRequest, "1.73.0", "gRFC A48: least_request on by default from grpc-go 1.73.0 (GRPC_EXPERIMENTAL_ENABLE_LEAST_REQUEST)"},
		{gen.RingHash, "1.41.0", "gRFC A42: grpc doc/grpc_xds_features.md, Go 1.41.0"},
		{gen.UpstreamTLS, "1.41.0", "gRFC A29: on by default from grpc-go 1.41.0 (GRPC_XDS_EXPERIMENTAL_SECURITY_SUPPORT), " +
			"validation_context.ca_certificate_provider_instance read (xdsclient/xds.go)"}}},
	{family: "grpc-java", agent: "gRPC Java", accepts: []acceptance{
		{gen.LeastRequest, "1.48.0", "gRFC A48: grpc doc/grpc_xds_features.md, Java 1.48.0"},
		{gen.RingHash, "1.40.1", "gRFC A42: grpc doc/grpc_xds_features.md, Java 1.40.1"},
		{gen.UpstreamTLS, "1.85.0", "gRFC A29: the form served verified with 1.85.1 (e2e TestProxylessTLS); earlier versions are refused"}}},
	// gRPC C-core (C++, Python, Ruby, PHP): "gRPC C-core <platform>…",
	// version "C-core <core version> …"; no least_request (grpc
	// doc/grpc_xds_features.md). Ring hash from core 30 (gRPC 1.53): the
	// ring hash picker of core 29 (gRPC 1.51, Debian's python3-grpcio)
	// crashes the process (grpc/grpc#31766, fixed by #32012; seen here:
	// TestProxylessRingHash).
	{family: "grpc-c-core", agent: "gRPC C-core", prefix: true, versionPrefix: "C-core ", accepts: []acceptance{
		{gen.RingHash, "30.0.0", "gRFC A42, after grpc/grpc#32012"},
		{gen.UpstreamTLS, "29.0.0", "gRFC A29: the form served verified with core 29 (Python 1.51.1, e2e TestProxylessTLS); earlier cores are refused"}}},
	// grpc-js-xds: no least_request (grpc doc/grpc_xds_features.md); A29
	// from 1.13.0 (1.10.1 ignores transport_socket: it would call in
	// plaintext).
	{family: "grpc-js", agent: "gRPC Node Pure JS", accepts: []acceptance{
		{gen.RingHash, "1.10.0", "gRFC A42: grpc doc/grpc_xds_features.md, Node 1.10.0"},
		{gen.UpstreamTLS, "1.13.0", "gRFC A29: grpc-js-xds 1.13.0 validates and applies transport_socket (cluster-resource-type.js)"}}},
}

// familyUnknown is the family of a client no row names.
const familyUnknown = "unknown"

// clientAgent is what the client table says of a node.
type clientAgent struct {
	family string
	// userAgent is the node's user_agent_name and version, as shown.
	userAgent string
	// lacks are the features it is not served; its profile in the xDS
	// caches (xds/cache ServeProfiles).
	lacks gen.Features
}

// agentOf classifies node by the client table.
func agentOf(node *core.Node) clientAgent {
	name, version := node.GetUserAgentName(), node.GetUserAgentVersion()
	a := clientAgent{family: familyUnknown, userAgent: strings.TrimSpace(name + " " + version), lacks: gen.AllFeatures}
	for _, row := range clientTable {
		if name != row.agent && !(row.prefix && strings.HasPrefix(name, row.agent)) {
			continue
		}
		a.family = row.family
		version := strings.TrimPrefix(version, row.versionPrefix)
		for _, acc := range row.accepts {
			if acc.since == "" || !versionBefore(version, acc.since) {
				a.lacks &^= acc.features
			}
		}
		break
	}
	if !declaresCertificateProvider(node) {
		a.lacks |= gen.UpstreamTLS
	}
	return a
}

// declaresCertificateProvider reports whether node's metadata declares the
// certificate provider instance TLS clusters name
// (bootstrap.MetadataCertificateProvider): a client NACKs a cluster naming
// an instance its bootstrap lacks, and the bridge sees the bootstrap only
// through the node.
func declaresCertificateProvider(node *core.Node) bool {
	v := node.GetMetadata().GetFields()[bootstrap.MetadataCertificateProvider]
	return v.GetStringValue() == gen.CertProviderInstance
}

// placeOf is where node runs, as the endpoints cache serves Localized
// assignments by it (xds/cache ServeLocalized): its locality as
// "region/zone/subzone" and its labels, the string fields of its metadata
// LABELS object (bootstrap.MetadataLabels, as Istio's proxies send them);
// nil when it has none.
func placeOf(node *core.Node) (locality string, labels map[string]string) {
	if l := node.GetLocality(); l != nil && (l.GetRegion() != "" || l.GetZone() != "" || l.GetSubZone() != "") {
		locality = strings.TrimRight(l.GetRegion()+"/"+l.GetZone()+"/"+l.GetSubZone(), "/")
	}
	fields := node.GetMetadata().GetFields()[bootstrap.MetadataLabels].GetStructValue().GetFields()
	for k, v := range fields {
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			if labels == nil {
				labels = make(map[string]string, len(fields))
			}
			labels[k] = s.StringValue
		}
	}
	return locality, labels
}

// profileOf is the xDS caches' profile of node: the features it lacks.
func profileOf(node *core.Node) int { return int(agentOf(node).lacks) }

// versionBefore reports whether version (a user_agent_version, "1.85.0",
// "1.73.0-dev") is before since ("1.73.0"), comparing the dotted numbers
// it starts with; a version with no number is before every since.
func versionBefore(version, since string) bool {
	v, s := versionNumbers(version), versionNumbers(since)
	if len(v) == 0 {
		return true
	}
	return slices.Compare(v, s) < 0
}

// versionNumbers returns the dotted numbers a version starts with.
func versionNumbers(version string) []int {
	var out []int
	for part := range strings.SplitSeq(strings.TrimPrefix(version, "v"), ".") {
		end := 0
		for end < len(part) && part[end] >= '0' && part[end] <= '9' {
			end++
		}
		if end == 0 {
			break
		}
		n, err := strconv.Atoi(part[:end])
		if err != nil {
			break
		}
		out = append(out, n)
		if end < len(part) {
			break
		}
	}
	return out
}

// substitutions records what each node was served in a substituted form
// (the xDS caches' served hook), for the metric and /debug/syncz, while a
// stream of the node is open: a node's streams (several per client
// process, and a reconnection's overlapping the old one) share its record,
// which goes when the last closes.
type substitutions struct {
	mu      sync.Mutex
	byNode  map[string]map[string]bool // node ID → substituted fields
	streams map[string]int             // node ID → open streams
}

// opened counts a stream of node, once its first request named it.
func (s *substitutions) opened(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams = map[string]int{}
	}
	s.streams[node]++
}

// closed uncounts a stream of node that opened counted, and drops node's
// record when it was the last.
func (s *substitutions) closed(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[node]--; s.streams[node] > 0 {
		return
	}
	delete(s.streams, node)
	delete(s.byNode, node)
}

// served counts and records the substituted forms a response to node
// carried (one entry per resource and substitution); a node with no open
// stream (a response racing its stream's close) is counted, not recorded.
// Called under a cache's lock: it takes only its own.
func (s *substitutions) served(node *core.Node, substituted []string) {
	family := agentOf(node).family
	for _, field := range substituted {
		policySubstitutions.WithLabelValues(family, field).Inc()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[node.GetId()] == 0 {
		return
	}
	if s.byNode == nil {
		s.byNode = map[string]map[string]bool{}
	}
	fields := s.byNode[node.GetId()]
	if fields == nil {
		fields = map[string]bool{}
		s.byNode[node.GetId()] = fields
	}
	for _, field := range substituted {
		fields[field] = true
	}
}

// of returns the fields node was served substituted, sorted.
func (s *substitutions) of(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for field := range s.byNode[node] {
		out = append(out, field)
	}
	slices.Sort(out)
	return out
}

package wire

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1"
)

// TestEncodersKnowEveryField checks each encoder's knowledge of its
// messages against their descriptors. For the messages it reads
// (WorkloadEntry, ServiceEntry and theirs), every field must be one it
// encodes, or the encoder declines every such message at run time and the
// content hash and the JSON size fall back to the reflective encoding: a
// field added by a newer istio.io/api fails here until the encoder is
// taught it. For the messages it writes (the ClusterLoadAssignment's, the
// xDS responses'), every field is one it sets or one listed as never set,
// with the reason: a new field fails here until someone decides whether
// meshbridge should send it.
func TestEncodersKnowEveryField(t *testing.T) {
	for _, tc := range []struct {
		msg   proto.Message
		known []protoreflect.Name
	}{
		{&networking.WorkloadEntry{}, workloadEntryFields},
		{&networking.ServiceEntry{}, serviceEntryFields},
		{&networking.ServicePort{}, servicePortFields},
		{&networking.WorkloadSelector{}, workloadSelectorFields},
	} {
		d := tc.msg.ProtoReflect().Descriptor()
		if !known(d, tc.known) {
			t.Errorf("%s has fields %v; AppendWorkloadEntry, WorkloadEntryJSONSize and ServiceEntryJSONSize know %v "+
				"and decline it: teach them the new fields (workloadentry.go, json.go, fields.go)", d.FullName(), names(d), tc.known)
		}
	}
	if !workloadEntryKnown || !serviceEntryKnown {
		t.Error("an encoder declines every message of the linked istio.io/api")
	}

	// The messages LoadAssignment and LbEndpoint write: fields set, and
	// fields deliberately left unset.
	for _, tc := range []struct {
		msg      proto.Message
		set      []protoreflect.Name
		notSet   []protoreflect.Name
		whyUnset string
	}{
		{&endpoint.ClusterLoadAssignment{}, []protoreflect.Name{"cluster_name", "endpoints"}, []protoreflect.Name{"named_endpoints", "policy"},
			"no named endpoints; no drop or overprovisioning policy (istiod sets none for these clusters)"},
		{&endpoint.LocalityLbEndpoints{}, []protoreflect.Name{"locality", "lb_endpoints", "load_balancing_weight"},
			[]protoreflect.Name{"metadata", "load_balancer_endpoints", "leds_cluster_locality_config", "priority", "proximity"},
			"one priority (0) and no LEDS: grpc-go and Envoy read lb_endpoints"},
		{&endpoint.LbEndpoint{}, []protoreflect.Name{"endpoint", "health_status", "load_balancing_weight"}, []protoreflect.Name{"endpoint_name", "metadata"},
			"endpoints are addresses, not named references; no client reads endpoint metadata from meshbridge"},
		{&endpoint.Endpoint{}, []protoreflect.Name{"address"}, []protoreflect.Name{"health_check_config", "hostname", "additional_addresses", "observability_name"},
			"no active health checks, one address per endpoint"},
		{&core.Address{}, []protoreflect.Name{"socket_address"}, []protoreflect.Name{"pipe", "envoy_internal_address"}, "TCP endpoints only"},
		{&core.SocketAddress{}, []protoreflect.Name{"protocol", "address", "port_value"}, []protoreflect.Name{"named_port", "resolver_name", "ipv4_compat", "network_namespace_filepath"},
			"protocol is TCP, the zero value; numeric ports; the default resolver"},
		{&core.Locality{}, []protoreflect.Name{"region", "zone", "sub_zone"}, nil, ""},
		{&wrapperspb.UInt32Value{}, []protoreflect.Name{"value"}, nil, ""},
	} {
		d := tc.msg.ProtoReflect().Descriptor()
		if !known(d, slices.Concat(tc.set, tc.notSet)) {
			t.Errorf("%s has fields %v; LoadAssignment sets %v and leaves %v unset (%s): decide for the new ones",
				d.FullName(), names(d), tc.set, tc.notSet, tc.whyUnset)
		}
	}

	// The messages SotWResponse and DeltaResponse write (Parts adds the
	// nonce).
	for _, tc := range []struct {
		msg      proto.Message
		set      []protoreflect.Name
		notSet   []protoreflect.Name
		whyUnset string
	}{
		{&discovery.DiscoveryResponse{}, []protoreflect.Name{"version_info", "resources", "type_url", "nonce"},
			[]protoreflect.Name{"canary", "control_plane", "resource_errors"},
			"meshbridge sets none of them today (xds); a response that needs one goes through proto.Marshal"},
		{&discovery.DeltaDiscoveryResponse{}, []protoreflect.Name{"system_version_info", "resources", "type_url", "nonce", "removed_resources"},
			[]protoreflect.Name{"removed_resource_names", "control_plane", "resource_errors"},
			"removals by plain name (no dynamic parameters); no control plane identifier or per-resource errors, as in SotW"},
		{&discovery.Resource{}, []protoreflect.Name{"name", "version", "resource"},
			[]protoreflect.Name{"resource_name", "aliases", "ttl", "cache_control", "metadata"},
			"plain names (no dynamic parameters, no VHDS aliases); no TTL, cache control or metadata"},
		{&anypb.Any{}, []protoreflect.Name{"type_url", "value"}, nil, ""},
	} {
		d := tc.msg.ProtoReflect().Descriptor()
		if !known(d, slices.Concat(tc.set, tc.notSet)) {
			t.Errorf("%s has fields %v; SotWResponse and DeltaResponse set %v and leave %v unset (%s): decide for the new ones",
				d.FullName(), names(d), tc.set, tc.notSet, tc.whyUnset)
		}
	}
}

func names(d protoreflect.MessageDescriptor) []protoreflect.Name {
	out := make([]protoreflect.Name, d.Fields().Len())
	for i := range out {
		out[i] = d.Fields().Get(i).Name()
	}
	return out
}

// TestEncodersDeclineUnknownDescriptors: a message with a field an encoder
// does not know is never encoded by hand.
func TestEncodersDeclineUnknownDescriptors(t *testing.T) {
	d := (*networking.WorkloadEntry)(nil).ProtoReflect().Descriptor()
	if known(d, workloadEntryFields[1:]) || known(d, append(slices.Clone(workloadEntryFields), "new_field")) {
		t.Fatal("known accepts a descriptor whose fields differ from the list")
	}
	saved := workloadEntryKnown
	defer func() { workloadEntryKnown = saved }()
	workloadEntryKnown = false
	we := &networking.WorkloadEntry{Address: "10.0.0.1"}
	if _, ok := AppendWorkloadEntry(nil, we); ok {
		t.Error("AppendWorkloadEntry encoded a WorkloadEntry it does not know every field of")
	}
	if _, ok := WorkloadEntryJSONSize(we); ok {
		t.Error("WorkloadEntryJSONSize sized a WorkloadEntry it does not know every field of")
	}
}

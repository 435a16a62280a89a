package wire

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1"
)

// The fields each encoder handles, by proto name. An encoder declines a
// message whose descriptor has any other field (known), so that a field a
// newer istio.io/api adds is never silently left out of a content hash or a
// size: the caller falls back to the reflective encoding, which covers it,
// until the encoder is taught the field (TestEncodersKnowEveryField fails
// meanwhile).
var (
	// workloadEntryFields: AppendWorkloadEntry and WorkloadEntryJSONSize.
	workloadEntryFields = []protoreflect.Name{"address", "ports", "labels", "network", "locality", "weight", "service_account"}
	// serviceEntryFields, servicePortFields, workloadSelectorFields:
	// ServiceEntryJSONSize (with workloadEntryFields for its endpoints).
	serviceEntryFields = []protoreflect.Name{"hosts", "addresses", "ports", "location", "resolution", "endpoints",
		"workload_selector", "export_to", "subject_alt_names"}
	servicePortFields      = []protoreflect.Name{"number", "protocol", "name", "target_port"}
	workloadSelectorFields = []protoreflect.Name{"labels"}
)

// Whether the encoders know every field of the linked istio.io/api's
// messages (known). Computed once: descriptors do not change at run time.
var (
	workloadEntryKnown = known((*networking.WorkloadEntry)(nil).ProtoReflect().Descriptor(), workloadEntryFields)
	serviceEntryKnown  = workloadEntryKnown &&
		known((*networking.ServiceEntry)(nil).ProtoReflect().Descriptor(), serviceEntryFields) &&
		known((*networking.ServicePort)(nil).ProtoReflect().Descriptor(), servicePortFields) &&
		known((*networking.WorkloadSelector)(nil).ProtoReflect().Descriptor(), workloadSelectorFields)
)

// known reports whether d's fields are exactly names.
func known(d protoreflect.MessageDescriptor, names []protoreflect.Name) bool {
	if d.Fields().Len() != len(names) {
		return false
	}
	for _, name := range names {
		if d.Fields().ByName(name) == nil {
			return false
		}
	}
	return true
}

package translate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// MergeInline returns the inline ServiceEntry se, built by this Translator,
// with endpoints added (the instances of other registries with the same
// host, translated against se's ports: conflictPolicy merge), as a new
// object: endpoints sorted by address, validated, labels and meshbridge's
// annotations kept, hashed again. se is not modified. It fails when the
// result is not a valid ServiceEntry, or has more than MaxInlineEndpoints
// endpoints.
func (t *Translator) MergeInline(se *model.Config, endpoints []*networking.WorkloadEntry) (*model.Config, error) {
	if len(endpoints) == 0 {
		return se, nil
	}
	spec := proto.Clone(se.ServiceEntry()).(*networking.ServiceEntry)
	spec.Endpoints = append(spec.Endpoints, endpoints...)
	if len(spec.Endpoints) > MaxInlineEndpoints {
		return nil, fmt.Errorf("%s", endpointCountFallback(len(spec.Endpoints), MaxInlineEndpoints))
	}
	slices.SortStableFunc(spec.Endpoints, func(a, b *networking.WorkloadEntry) int {
		return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(len(a.Ports), len(b.Ports)))
	})
	if err := ValidateServiceEntry(spec); err != nil {
		return nil, err
	}
	return t.newConfig(model.KindServiceEntry, se.Name, se.Labels, se.Annotations, spec), nil
}

// InlineEndpoints returns the endpoints res serves: its inline
// ServiceEntry's endpoints, or its WorkloadEntries' specs without the
// meshbridge.io/service selection label. The specs are copies.
func InlineEndpoints(res Result) []*networking.WorkloadEntry {
	var out []*networking.WorkloadEntry
	if len(res.WorkloadEntries) == 0 && res.ServiceEntry != nil {
		for _, e := range res.ServiceEntry.ServiceEntry().GetEndpoints() {
			out = append(out, proto.Clone(e).(*networking.WorkloadEntry))
		}
		return out
	}
	for _, we := range res.WorkloadEntries {
		e := we.Spec()
		// The spec less the selection label (WorkloadEntry.Labels), in
		// maps of its own.
		e.Labels, e.Ports = maps.Clone(we.Labels), maps.Clone(e.Ports)
		if len(e.Labels) == 0 {
			e.Labels = nil
		}
		out = append(out, e)
	}
	return out
}

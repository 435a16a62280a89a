package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// Rejection is an instance Translate skipped. Reason is a short,
// low-cardinality metric label (the Reject* constants); Detail is for logs.
type Rejection struct {
	InstanceID string
	Reason     string
	Detail     string
}

// LabelDrop is a registry label Translate left off an instance's labels.
// Key is the raw registry key; Reason is one of the Drop* constants.
type LabelDrop struct {
	InstanceID string
	Key        string
	Reason     string
}

// Result is what Translate produces for one service.
type Result struct {
	// Host is the mesh host, also the ServiceEntry's metadata.name.
	Host string
	// ServiceEntry is nil only when no port is known yet: no servicePort,
	// no declared port, nothing kept in Sticky and no usable instance.
	ServiceEntry *model.Config
	// WorkloadEntries are sorted by name; empty in inline mode.
	WorkloadEntries []*model.Config
	// Rejected lists skipped instances, sorted by instance ID.
	Rejected []Rejection
	// DroppedLabels lists labels left off, sorted by instance ID then key.
	DroppedLabels []LabelDrop
	// Sticky is the state to pass to the next Translate of this service.
	Sticky Sticky
}

// Translate converts one registry service into a ServiceEntry and, in
// workloadentry mode, one WorkloadEntry per usable instance (DESIGN.md §3,
// issue 2). prev is the Sticky returned by the previous call for this service
// (zero on the first). Instance problems become Rejections and LabelDrops,
// never an error: the error is for service-level failures only (an invalid
// host, an invalid declared port, or a generated ServiceEntry failing
// ValidateServiceEntry); on error the Result is zero and the caller keeps its
// previous state. Output is deterministic for equal inputs; in
// workloadentry mode the ServiceEntry depends on instances only through the
// first choice of port and protocol. Translate is pure and safe for
// concurrent use; the returned objects are new and owned by the caller.
func (t *Translator) Translate(svc registries.Service, prev Sticky) (Result, error) {
	host, err := t.Host(svc)
	if err != nil {
		return Result{}, err
	}
	res := Result{Host: host, Sticky: prev}
	insts := t.admit(svc.Instances, &res)
	plan, err := t.planPorts(svc, prev, insts)
	if err != nil {
		return Result{}, fmt.Errorf("service %q: %w", svc.Name, err)
	}
	if plan == nil {
		return res, nil
	}
	res.Sticky = plan.sticky
	entries := t.buildEntries(host, plan, insts, &res)
	se := t.serviceEntrySpec(host, plan, entries)
	if err := ValidateServiceEntry(se); err != nil {
		return Result{}, fmt.Errorf("service %q: generated ServiceEntry for host %q is invalid: %w", svc.Name, host, err)
	}
	res.ServiceEntry = t.newConfig(model.KindServiceEntry, host, t.ownershipLabels(), se)
	if t.opts.Endpoints == EndpointsWorkloadEntry {
		res.WorkloadEntries = t.workloadEntries(host, entries)
	}
	slices.SortStableFunc(res.Rejected, func(a, b Rejection) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	slices.SortStableFunc(res.DroppedLabels, func(a, b LabelDrop) int {
		return cmp.Or(strings.Compare(a.InstanceID, b.InstanceID), strings.Compare(a.Key, b.Key))
	})
	return res, nil
}

// entry is a validated WorkloadEntry spec for one instance.
type entry struct {
	id   string
	port uint32
	spec *networking.WorkloadEntry
}

// buildEntries builds and validates one WorkloadEntry spec per candidate. In
// workloadentry mode the specs carry the meshbridge.io/service selection label.
// A spec failing validation rejects its instance (RejectInvalidEntry).
func (t *Translator) buildEntries(host string, plan *portPlan, insts []candidate, res *Result) []entry {
	names := plan.names()
	selection := ServiceLabelValue(host)
	out := make([]entry, 0, len(insts))
	for _, c := range insts {
		labels, drops := sanitizeLabels(c.inst.ID, c.inst.Labels)
		res.DroppedLabels = append(res.DroppedLabels, drops...)
		if t.opts.Endpoints == EndpointsWorkloadEntry {
			if labels == nil {
				labels = make(map[string]string, 1)
			}
			labels[model.LabelService] = selection
		}
		spec := &networking.WorkloadEntry{
			Address:  c.address,
			Ports:    plan.targetPorts(c.inst.Port),
			Labels:   labels,
			Weight:   max(c.inst.Weight, 1),
			Locality: c.locality,
		}
		if err := t.validateEntry(spec, names); err != nil {
			res.Rejected = append(res.Rejected, Rejection{InstanceID: c.inst.ID, Reason: RejectInvalidEntry, Detail: err.Error()})
			continue
		}
		out = append(out, entry{id: c.inst.ID, port: c.inst.Port, spec: spec})
	}
	return out
}

// validateEntry applies the checks istiod applies to a WorkloadEntry, or to
// an inline endpoint of a ServiceEntry with this resolution and these ports.
func (t *Translator) validateEntry(we *networking.WorkloadEntry, portNames map[string]bool) error {
	if t.opts.Endpoints == EndpointsInline {
		return validateEndpoint(we, portNames, t.resolution())
	}
	return ValidateWorkloadEntry(we)
}

func (t *Translator) resolution() networking.ServiceEntry_Resolution {
	if t.opts.Resolution == model.ResolutionDNS {
		return networking.ServiceEntry_DNS
	}
	return networking.ServiceEntry_STATIC
}

// serviceEntrySpec builds the ServiceEntry: one host, MESH_INTERNAL, the
// planned ports, and either a workloadSelector on meshbridge.io/service or the
// entries inline, sorted by address then port.
func (t *Translator) serviceEntrySpec(host string, plan *portPlan, entries []entry) *networking.ServiceEntry {
	se := &networking.ServiceEntry{
		Hosts:      []string{host},
		Ports:      plan.ports,
		Location:   networking.ServiceEntry_MESH_INTERNAL,
		Resolution: t.resolution(),
	}
	if t.opts.Endpoints == EndpointsWorkloadEntry {
		se.WorkloadSelector = &networking.WorkloadSelector{Labels: map[string]string{model.LabelService: ServiceLabelValue(host)}}
		return se
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int {
		return cmp.Or(strings.Compare(a.spec.Address, b.spec.Address), cmp.Compare(a.port, b.port))
	})
	for _, e := range sorted {
		se.Endpoints = append(se.Endpoints, e.spec)
	}
	return se
}

// workloadEntries wraps the entries as WorkloadEntry objects, sorted by name.
// Their metadata labels are the ownership labels plus the selection label.
func (t *Translator) workloadEntries(host string, entries []entry) []*model.Config {
	out := make([]*model.Config, 0, len(entries))
	for _, e := range entries {
		labels := t.ownershipLabels()
		labels[model.LabelService] = ServiceLabelValue(host)
		name := WorkloadEntryName(host, t.opts.Registry, e.id)
		out = append(out, t.newConfig(model.KindWorkloadEntry, name, labels, e.spec))
	}
	slices.SortFunc(out, func(a, b *model.Config) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (t *Translator) newConfig(kind model.Kind, name string, labels map[string]string, spec proto.Message) *model.Config {
	return &model.Config{
		Meta: model.Meta{
			Kind:        kind,
			Name:        name,
			Namespace:   t.opts.Namespace,
			Labels:      labels,
			Annotations: map[string]string{model.AnnotationHash: ContentHash(labels, spec)},
		},
		Spec: spec,
	}
}

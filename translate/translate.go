package translate

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// LabelChange is a registry label that an instance does not carry as the
// registry wrote it: changed (NewKey set) or dropped (NewKey "").
type LabelChange struct {
	InstanceID string
	// Key and Value are the label as the registry wrote it.
	Key, Value string
	// NewKey and NewValue are the label the instance carries instead; both
	// "" when it is dropped.
	NewKey, NewValue string
	// Reason is one of the Change* and Drop* constants.
	Reason string
	// Repeated is set when the previous translation of the service (the
	// Sticky passed as prev) reported the same change (Key, Value, NewKey,
	// NewValue and Reason) for the same instance. A caller counting changes
	// skips repeated ones, so each is counted once per instance until the
	// instance's label or its outcome changes.
	Repeated bool
}

// Dropped reports whether the label was left off the instance.
func (c LabelChange) Dropped() bool { return c.NewKey == "" }

// String renders the change for logs: `key=value→newKey=newValue`, or
// `key=value→dropped` when dropped; keys and values are quoted (%q) when
// they hold a character outside printable ASCII and clipped to 40 bytes.
func (c LabelChange) String() string {
	from := clipLabel(c.Key) + "=" + clipLabel(c.Value)
	if c.Dropped() {
		return from + "→dropped"
	}
	return from + "→" + clipLabel(c.NewKey) + "=" + clipLabel(c.NewValue)
}

func clipLabel(s string) string {
	const maxLen = 40
	if len(s) > maxLen {
		s = strings.ToValidUTF8(s[:maxLen], "") + "…"
	}
	if !isPrintableASCII(strings.TrimSuffix(s, "…")) {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// Result is what Translate produces for one service.
type Result struct {
	// Host is the mesh host, also the ServiceEntry's metadata.name.
	Host string
	// ServiceEntry is nil only when no port is known yet: no servicePort,
	// no declared port, nothing kept in Sticky and no usable instance.
	ServiceEntry *model.Config
	// WorkloadEntries are sorted by name; empty in inline mode unless
	// Fallback is set. They are compact records (model.WorkloadEntry),
	// which AsConfig materialises; the WorkloadEntries of one call share
	// one WorkloadGroup.
	WorkloadEntries []*model.WorkloadEntry
	// Rejected lists skipped instances, sorted by instance ID.
	Rejected []Rejection
	// LabelChanges lists every registry label an instance does not carry as
	// written (package doc, "Registry labels"), sorted by instance ID then
	// raw key. Read-only: Sticky holds the same slice.
	LabelChanges []LabelChange
	// LabelSetChanged reports whether the service's label changes, as a set
	// of (raw key, reason) pairs over all its instances, differ from those
	// of the previous translation (prev's). A caller logs a service's label
	// changes when it is set: once per change of which labels are changed or
	// dropped and why, not per snapshot nor per instance (a new instance
	// with the same labels changes nothing).
	LabelSetChanged bool
	// Sticky is the state to pass to the next Translate of this service.
	Sticky Sticky
	// Resolution is the ServiceEntry's, STATIC or DNS (rule 2); "" when
	// there is no ServiceEntry.
	Resolution model.Resolution
	// Fallback is empty unless inline mode could not list the service's
	// endpoints inline (rule 10): more than MaxInlineEndpoints admitted
	// instances, or an inline ServiceEntry over MaxObjectBytes. The service
	// is then emitted in WorkloadEntry form, exactly as workloadentry mode
	// emits it (a ServiceEntry with the meshbridge.io/service
	// workloadSelector and one WorkloadEntry per instance), and Fallback is
	// the human reason, for a warning, e.g. "4,200 endpoints exceed the
	// ServiceEntry CRD's limit of 4096 inline endpoints". It is decided
	// anew on every call: a service that shrinks goes back inline.
	// Workloadentry mode never sets it.
	Fallback string
}

// Translate converts one registry service into a ServiceEntry and, in
// workloadentry mode or when inline endpoints would not fit (Result.Fallback,
// rule 10), one WorkloadEntry per usable instance (docs/design.md §3, rule 4).
// prev is the Sticky returned by the previous call for this service
// (zero on the first). Instance problems become Rejections and LabelChanges,
// never an error: the error is for service-level failures only (an invalid
// host, an invalid declared port, a generated ServiceEntry failing
// ValidateServiceEntry, or a service that must fall back to WorkloadEntries
// whose host is too long to name them); on error the Result is zero and
// the caller keeps its previous state. Output is deterministic for equal
// inputs; in workloadentry mode the ServiceEntry depends on instances only
// through the first choice of port and protocol. Translate is pure and safe
// for concurrent use; the returned objects are new and owned by the caller.
func (t *Translator) Translate(svc registries.Service, prev Sticky) (Result, error) {
	return t.translate(svc, prev, nil, nil)
}

// TranslateReusing is Translate for a service translated before: last is
// the Result of the previous call for this service (its Sticky is still
// passed as prev). The ServiceEntry of last, and when the service is emitted
// in WorkloadEntry form every WorkloadEntry of last, whose name and spec
// equal the new one is returned as is, the same *model.Config with its
// content hash, instead of being validated and hashed again; so a
// change of one instance costs one instance's hash, not the service's
// (serviceentry's BenchmarkSyncInstanceChange). The output equals Translate's,
// also when the service switches between inline and WorkloadEntry form
// (Result.Fallback): an object of the other form never has an equal spec.
// last is read, never modified; a zero last reuses nothing.
func (t *Translator) TranslateReusing(svc registries.Service, prev Sticky, last Result) (Result, error) {
	return t.translate(svc, prev, last.WorkloadEntries, last.ServiceEntry)
}

// translate is Translate; reuse, sorted by name, are WorkloadEntries and
// lastSE a ServiceEntry that are returned again when their spec is
// unchanged (validation and the content hash depend on the spec alone).
//
// The form is decided per call: the configured mode, except that an inline
// service with more than MaxInlineEndpoints admitted instances is built in
// WorkloadEntry form, and one whose inline ServiceEntry is over
// MaxObjectBytes is built again in that form (Result.Fallback).
func (t *Translator) translate(svc registries.Service, prev Sticky, reuse []*model.WorkloadEntry, lastSE *model.Config) (Result, error) {
	res, err := t.build(svc, prev, reuse, lastSE)
	if err != nil {
		return Result{}, err
	}
	slices.SortStableFunc(res.Rejected, func(a, b Rejection) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	slices.SortFunc(res.LabelChanges, compareLabelChanges)
	res.LabelSetChanged = markRepeated(res.LabelChanges, prev.LabelChanges)
	res.Sticky.LabelChanges = res.LabelChanges
	return res, nil
}

// build is translate without the final sorting and the comparison of label
// changes with prev.
func (t *Translator) build(svc registries.Service, prev Sticky, reuse []*model.WorkloadEntry, lastSE *model.Config) (Result, error) {
	host, err := t.Host(svc)
	if err != nil {
		return Result{}, err
	}
	res := Result{Host: host, Sticky: prev}
	insts := t.admit(svc.Instances, t.admitsNames(prev.Resolution), &res)
	plan, err := t.planPorts(svc, prev, insts)
	if err != nil {
		return Result{}, fmt.Errorf("service %q: %w", svc.Name, err)
	}
	if plan == nil {
		return res, nil
	}
	res.Sticky = plan.sticky
	plan.resolution = t.resolutionOf(prev.Resolution, slices.ContainsFunc(insts, func(c candidate) bool { return c.named }))
	res.Resolution = plan.resolution
	mode := t.opts.Endpoints
	// Hysteresis (rule 10): a service in WorkloadEntry form stays so until
	// it is under 90 % of the limits, so one near them does not flap.
	countLimit, sizeLimit := MaxInlineEndpoints, maxInlineJSONBytes
	if prev.InlineFallback {
		countLimit, sizeLimit = MaxInlineEndpoints*9/10, maxInlineJSONBytes*9/10
	}
	if mode == EndpointsInline && len(insts) > countLimit {
		mode, res.Fallback = EndpointsWorkloadEntry, endpointCountFallback(len(insts), countLimit)
		if err := checkFallbackHost(svc, host, res.Fallback); err != nil {
			return Result{}, err
		}
	}
	// buildEntries appends to these; a rebuild in the other form starts over.
	rejected, changed := len(res.Rejected), len(res.LabelChanges)
	entries := t.buildEntries(mode, host, plan, insts, reuse, &res)
	se := t.serviceEntrySpec(mode, host, plan, entries)
	annotations := serviceEntryAnnotations(entries)
	reused := reusable(lastSE, host, se, annotations)
	// A reused inline ServiceEntry passed this check when it was built: the
	// size depends on the spec, the annotations and this Translator's
	// metadata alone.
	if mode == EndpointsInline && !reused {
		if reason := t.inlineSizeFallback(host, annotations, se, sizeLimit); reason != "" {
			mode, res.Fallback = EndpointsWorkloadEntry, reason
			if err := checkFallbackHost(svc, host, reason); err != nil {
				return Result{}, err
			}
			res.Rejected, res.LabelChanges = res.Rejected[:rejected], res.LabelChanges[:changed]
			entries = t.buildEntries(mode, host, plan, insts, reuse, &res)
			se = t.serviceEntrySpec(mode, host, plan, entries)
			annotations = serviceEntryAnnotations(entries)
			reused = reusable(lastSE, host, se, annotations)
		}
	}
	if reused {
		res.ServiceEntry = lastSE
	} else {
		if err := ValidateServiceEntry(se); err != nil {
			return Result{}, fmt.Errorf("service %q: generated ServiceEntry for host %q is invalid: %w", svc.Name, host, err)
		}
		res.ServiceEntry = t.newConfig(model.KindServiceEntry, host, t.ownershipLabels(), annotations, se)
	}
	res.Sticky.InlineFallback = res.Fallback != ""
	if mode == EndpointsWorkloadEntry {
		res.WorkloadEntries = t.workloadEntries(host, entries, reuse)
	}
	return res, nil
}

// compareLabelChanges orders label changes by instance ID, then raw key: a
// total order, instance IDs being unique after admit.
func compareLabelChanges(a, b LabelChange) int {
	return cmp.Or(strings.Compare(a.InstanceID, b.InstanceID), strings.Compare(a.Key, b.Key))
}

// markRepeated sets Repeated on each change of cur that prev (both sorted by
// compareLabelChanges) holds for the same instance and raw key with the same
// outcome, and reports whether the two differ as sets of (raw key, reason).
func markRepeated(cur, prev []LabelChange) (setChanged bool) {
	if len(cur) == 0 && len(prev) == 0 {
		return false
	}
	j := 0
	for i := range cur {
		c := &cur[i]
		for j < len(prev) && compareLabelChanges(prev[j], *c) < 0 {
			j++
		}
		if j < len(prev) && compareLabelChanges(prev[j], *c) == 0 {
			p := prev[j]
			c.Repeated = p.Value == c.Value && p.NewKey == c.NewKey && p.NewValue == c.NewValue && p.Reason == c.Reason
		}
	}
	if len(cur) == len(prev) && !slices.ContainsFunc(cur, func(c LabelChange) bool { return !c.Repeated }) {
		return false // the same changes for the same instances: the steady case
	}
	type keyReason struct{ key, reason string }
	set := func(changes []LabelChange) map[keyReason]bool {
		m := make(map[keyReason]bool)
		for _, c := range changes {
			m[keyReason{c.Key, c.Reason}] = true
		}
		return m
	}
	return !maps.Equal(set(cur), set(prev))
}

// checkFallbackHost fails a service that must fall back to WorkloadEntry
// form when its host, valid inline, is too long to name WorkloadEntries
// (maxHostLength): neither form can then be written.
func checkFallbackHost(svc registries.Service, host, reason string) error {
	if len(host) <= maxHostLength {
		return nil
	}
	return fmt.Errorf("service %q: host %q: cannot be written inline (%s) nor as WorkloadEntries (host longer than %d characters)",
		svc.Name, host, reason, maxHostLength)
}

// entry is a validated WorkloadEntry spec for one instance.
type entry struct {
	id       string
	port     uint32
	methods  []string                    // the instance's (Dubbo) methods
	defaults registries.ProviderDefaults // what it declares for its callers (Dubbo)
	spec     *networking.WorkloadEntry
	// In WorkloadEntry form: labels are spec.Labels less the selection
	// label (what the record keeps), weID names it (WorkloadEntryID), and
	// reused is a WorkloadEntry of reuse with this spec, or nil.
	labels map[string]string
	weID   [5]byte
	reused *model.WorkloadEntry
}

// buildEntries builds and validates one WorkloadEntry spec per candidate for
// the form mode. In WorkloadEntry form the specs carry the
// meshbridge.io/service selection label and are validated as WorkloadEntries;
// inline, as endpoints of the ServiceEntry. A spec failing validation rejects
// its instance (RejectInvalidEntry).
//
// In WorkloadEntry form, a candidate whose WorkloadEntry is in reuse (sorted
// by name) with an equal spec keeps that object: validation and hashing
// depend on the spec alone. Inline, reuse is ignored.
func (t *Translator) buildEntries(mode EndpointMode, host string, plan *portPlan, insts []candidate, reuse []*model.WorkloadEntry, res *Result) []entry {
	names := plan.names()
	selection := ServiceLabelValue(host)
	weMode := mode == EndpointsWorkloadEntry
	out := make([]entry, 0, len(insts))
	// Instances of one service mostly carry equal labels; equal label maps
	// are shared (objects are read-only once returned), which saves a map
	// per instance in every stage that keeps the spec (P1 bridge memory in
	// docs/benchmarks.md).
	var shared map[string]string
	// raw is the last instance's registry labels and sanitized what they
	// gave: an instance holding that same map (registries.Compact shares
	// equal ones) gets the same labels without sanitizing them again.
	var raw map[string]string
	var sanitized map[string]string
	var rawChanges []LabelChange
	var checked labelCheck
	// In WorkloadEntry form the spec carries the selection label too:
	// selected is shared's map with it, for the last shared.
	var selectedFor, selected map[string]string
	for _, c := range insts {
		var labels map[string]string
		if sanitized != nil && registries.SameLabels(c.inst.Labels, raw) {
			labels = sanitized
			for _, ch := range rawChanges {
				ch.InstanceID = c.inst.ID
				res.LabelChanges = append(res.LabelChanges, ch)
			}
		} else {
			var changes []LabelChange
			labels, changes = sanitizeLabels(c.inst.ID, c.inst.Labels, t.allow)
			res.LabelChanges = append(res.LabelChanges, changes...)
			if len(labels) > 0 && len(shared) > 0 && maps.Equal(labels, shared) {
				labels = shared
			}
			if labels == nil {
				labels = map[string]string{} // so that SameLabels sees it again
			}
			raw, sanitized, rawChanges = c.inst.Labels, labels, changes
		}
		if len(labels) > 0 {
			shared = labels
		}
		specLabels := labels
		if weMode {
			if !registries.SameLabels(labels, selectedFor) || selected == nil {
				selectedFor = labels
				selected = make(map[string]string, len(labels)+1)
				maps.Copy(selected, labels)
				selected[model.LabelService] = selection
			}
			specLabels = selected
		}
		if len(specLabels) == 0 {
			specLabels = nil
		}
		spec := &networking.WorkloadEntry{
			Address:  c.address,
			Ports:    plan.targetPorts(c.inst),
			Labels:   specLabels,
			Weight:   cmp.Or(c.inst.Weight, model.DefaultWeight),
			Locality: c.locality,
		}
		e := entry{id: c.inst.ID, port: c.inst.Port, methods: c.inst.Methods(), defaults: c.inst.Defaults(), spec: spec}
		if weMode {
			e.labels = labels
			if len(e.labels) == 0 {
				e.labels = nil
			}
			e.weID = WorkloadEntryID(t.opts.Registry, c.inst.ID)
			if old := findWorkloadEntry(reuse, host, e.weID); old != nil && old.SameSpec(spec) {
				e.reused = old
				out = append(out, e)
				continue
			}
		}
		if err := validateEntry(mode, plan.resolution, spec, names, &checked); err != nil {
			res.Rejected = append(res.Rejected, Rejection{InstanceID: c.inst.ID, Reason: RejectInvalidEntry, Detail: err.Error()})
			continue
		}
		out = append(out, e)
	}
	return out
}

// validateEntry applies the checks istiod applies to a WorkloadEntry, or, in
// inline form, to an endpoint of a ServiceEntry with this resolution and
// these ports.
func validateEntry(mode EndpointMode, resolution model.Resolution, we *networking.WorkloadEntry, portNames map[string]bool, labels *labelCheck) error {
	if mode == EndpointsInline {
		return validateEndpoint(we, portNames, istioResolution(resolution), labels)
	}
	return validateWorkloadEntry(we, true, labels)
}

// serviceEntrySpec builds the ServiceEntry: one host, MESH_INTERNAL, the
// planned ports, and per form mode either a workloadSelector on
// meshbridge.io/service or the entries inline, sorted by address then port.
func (t *Translator) serviceEntrySpec(mode EndpointMode, host string, plan *portPlan, entries []entry) *networking.ServiceEntry {
	se := &networking.ServiceEntry{
		Hosts:      []string{host},
		Ports:      plan.ports,
		Location:   networking.ServiceEntry_MESH_INTERNAL,
		Resolution: istioResolution(plan.resolution),
	}
	if mode == EndpointsWorkloadEntry {
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

// workloadEntries makes the entries WorkloadEntry records sorted by name,
// named "<host>-<10 hex>" (WorkloadEntryName), in one WorkloadGroup:
// namespace, host, the ownership labels and the selection label, which
// their metadata labels and specs carry. A reused entry keeps its record
// (and its hash); the group of a reused record with the same content is
// shared by the new ones. The content hash covers the metadata labels and
// the spec as Kubernetes and MCP are sent them.
func (t *Translator) workloadEntries(host string, entries []entry, reuse []*model.WorkloadEntry) []*model.WorkloadEntry {
	out := make([]*model.WorkloadEntry, 0, len(entries))
	group := &model.WorkloadGroup{Namespace: t.opts.Namespace, Host: host, Labels: t.ownershipLabels(), Selection: ServiceLabelValue(host)}
	for _, r := range reuse {
		if g := r.Group; g.Namespace == group.Namespace && g.Host == group.Host && g.Selection == group.Selection &&
			registries.SameLabels(g.Labels, group.Labels) {
			group = g
			break
		}
	}
	var meta map[string]string // the metadata labels, for the hash
	for _, e := range entries {
		if e.reused != nil {
			out = append(out, e.reused)
			continue
		}
		if meta == nil {
			meta = group.MetaLabels()
		}
		out = append(out, model.NewWorkloadEntry(group, e.weID, e.spec, e.labels, ContentSum(meta, nil, e.spec)))
	}
	slices.SortFunc(out, model.CompareName)
	return out
}

// newConfig wraps spec as an object with these labels, and annotations
// (meshbridge's own, may be nil) plus the content hash.
func (t *Translator) newConfig(kind model.Kind, name string, labels, annotations map[string]string, spec proto.Message) *model.Config {
	if len(annotations) == 0 {
		annotations = nil
	}
	return &model.Config{
		Meta: model.Meta{
			Kind:        kind,
			Name:        name,
			Namespace:   t.opts.Namespace,
			Labels:      labels,
			Annotations: annotations,
			Hash:        ContentSum(labels, annotations, spec),
		},
		Spec: spec,
	}
}

// reusable reports whether the last ServiceEntry can be returned again: same
// name, spec and annotations (its own, the content hash aside).
func reusable(last *model.Config, host string, se *networking.ServiceEntry, annotations map[string]string) bool {
	if last == nil || last.Name != host || !maps.Equal(last.Annotations, annotations) {
		return false
	}
	return proto.Equal(last.Spec, se)
}

// MaxDubboMethodsBytes caps the meshbridge.io/dubbo-methods annotation: past
// it, the list is cut after a whole method and ",...(+N more)" is appended.
const MaxDubboMethodsBytes = 4096

// serviceEntryAnnotations returns meshbridge's own annotations of a
// ServiceEntry: when its entries serve methods (registries.InstanceExtra:
// only Dubbo's do), meshbridge.io/dubbo-methods, the sorted union of their
// methods; when they declare call defaults, meshbridge.io/dubbo-defaults
// (routeDefaults); else nil.
func serviceEntryAnnotations(entries []entry) map[string]string {
	out := methodsAnnotation(entries)
	if d := routeDefaults(entries); d != (model.RouteDefaults{}) {
		if out == nil {
			out = map[string]string{}
		}
		out[model.AnnotationDubboDefaults] = d.String()
	}
	return out
}

// routeDefaults are the call defaults entries declare (Dubbo's timeout in
// milliseconds, retries and loadbalance): for each, the value most of the
// entries that declare a valid one declare, ties going to the longer
// timeout, the fewer retries and the first load balancer name. A value
// that does not parse is left out, as Dubbo ignores it.
func routeDefaults(entries []entry) model.RouteDefaults {
	timeouts, retries, balancers := map[int64]int{}, map[uint64]int{}, map[string]int{}
	for _, e := range entries {
		if ms, err := strconv.ParseInt(e.defaults.Timeout, 10, 64); err == nil && ms > 0 && ms <= maxDefaultTimeoutMs {
			timeouts[ms]++
		}
		if n, err := strconv.ParseUint(e.defaults.Retries, 10, 32); err == nil {
			retries[n]++
		}
		if lb := strings.ToLower(strings.TrimSpace(e.defaults.LoadBalance)); lb != "" && utf8.ValidString(lb) && len(lb) <= 64 {
			balancers[lb]++
		}
	}
	var d model.RouteDefaults
	if ms, ok := mostCommon(timeouts, func(a, b int64) bool { return a > b }); ok {
		d.Timeout = time.Duration(ms) * time.Millisecond
	}
	if n, ok := mostCommon(retries, func(a, b uint64) bool { return a < b }); ok {
		d.Retries, d.RetriesSet = uint32(n), true
	}
	d.LoadBalance, _ = mostCommon(balancers, func(a, b string) bool { return a < b })
	return d
}

// maxDefaultTimeoutMs bounds a declared timeout: a day.
const maxDefaultTimeoutMs = 24 * 3600 * 1000

// mostCommon returns the key counted most often, ties going to the key
// better says comes first; false when counts is empty.
func mostCommon[K comparable](counts map[K]int, better func(a, b K) bool) (K, bool) {
	var best K
	n := 0
	for k, c := range counts {
		if c > n || c == n && better(k, best) {
			best, n = k, c
		}
	}
	return best, n > 0
}

// methodsAnnotation is meshbridge.io/dubbo-methods of entries, nil when
// they serve no method.
func methodsAnnotation(entries []entry) map[string]string {
	var methods []string
	for _, e := range entries {
		for _, m := range e.methods {
			// An annotation must be UTF-8: JSON would replace the bytes
			// (the written object would no longer match its hash) and
			// MCP's proto3 metadata cannot carry them.
			if utf8.ValidString(m) {
				methods = append(methods, m)
			}
		}
	}
	if len(methods) == 0 {
		return nil
	}
	slices.Sort(methods)
	methods = slices.Compact(methods)
	return map[string]string{model.AnnotationDubboMethods: joinMethods(methods, MaxDubboMethodsBytes)}
}

// joinMethods joins methods with commas in at most limit bytes: when they do
// not fit, the whole methods that fit before ",...(+N more)" are kept.
func joinMethods(methods []string, limit int) string {
	joined := strings.Join(methods, ",")
	if len(joined) <= limit {
		return joined
	}
	kept := 0 // bytes of joined holding methods[:i]
	for i, m := range methods {
		next := kept + len(m)
		if i > 0 {
			next++
		}
		if next+len(moreMarker(len(methods)-i-1)) > limit {
			return strings.TrimPrefix(joined[:kept]+moreMarker(len(methods)-i), ",")
		}
		kept = next
	}
	return joined
}

// moreMarker is the suffix of a cut methods list that leaves out n.
func moreMarker(n int) string { return ",...(+" + strconv.Itoa(n) + " more)" }

// findWorkloadEntry returns the WorkloadEntry of workloads (sorted by
// name, translate's for one host) named host and id, or nil.
func findWorkloadEntry(workloads []*model.WorkloadEntry, host string, id [5]byte) *model.WorkloadEntry {
	i, found := slices.BinarySearchFunc(workloads, id, func(w *model.WorkloadEntry, id [5]byte) int {
		_, wid, _ := w.NameID()
		return bytes.Compare(wid[:], id[:])
	})
	if !found {
		return nil
	}
	if h, _, ok := workloads[i].NameID(); !ok || h != host {
		return nil
	}
	return workloads[i]
}

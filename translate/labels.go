package translate

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/model"
)

// Reasons a registry label is changed or dropped (LabelChange.Reason); they
// are the values of the reason label of
// meshbridge_translate_labels_changed_total. A label gets one reason: the
// first that applies in the order of sanitizeLabel (package doc, "Registry
// labels").
const (
	// ChangeKey: the key is rewritten (prefix lower-cased, invalid characters
	// → '-', ends trimmed); the value may have changed too.
	ChangeKey = "key-changed"
	// ChangeValue: the key is as written, the value rewritten (invalid
	// characters → '-', ends trimmed).
	ChangeValue = "value-changed"
	// ChangeTruncated: the key is as written, the value over 63 characters:
	// its first 52, '-' and 10 hex of its sha256.
	ChangeTruncated = "truncated"

	// DropVolatile: Dubbo pid, timestamp, …, which would rewrite the object
	// on every restart.
	DropVolatile = "volatile"
	// DropReservedPrefix: a prefix meshbridge, Istio or Kubernetes
	// interprets (ReservedLabel), not in Options.AllowLabels.
	DropReservedPrefix = "reserved-prefix"
	// DropInvalidKey: a character outside printable ASCII, or no label key
	// after sanitizing (nothing left, a name over 63 or a prefix over 253
	// characters).
	DropInvalidKey = "invalid-key"
	// DropInvalidValue: a character outside printable ASCII, or sanitizing
	// would empty the value or drop a '-' or '.' before a digit.
	DropInvalidValue = "invalid-value"
	// DropCollision: another registry key gives the same key and wins (the
	// key as written, else the lexically smallest raw key).
	DropCollision = "collision"
	// DropTooMany: past MaxInstanceLabels, in key order.
	DropTooMany = "too-many-labels"
)

// MaxInstanceLabels is the most registry labels one instance keeps: the
// WorkloadEntry CRD allows 256 labels (istio.io/api workload_entry.proto,
// labels +kubebuilder:validation:MaxProperties=256) and meshbridge.io/service
// takes one. The same bound applies to inline endpoints (the same message),
// so an instance carries the same labels in either endpoint mode.
const MaxInstanceLabels = maxEntryLabels - 1

// reservedDomains are the label prefixes, each with its subdomains, whose
// labels mean something to meshbridge, Istio or Kubernetes: meshbridge.io
// (ownership and selection), istio.io (istiod derives endpoint mTLS from
// security.istio.io/tlsMode and the network from topology.istio.io/network;
// istio.io/rev selects the control plane), and kubernetes.io and k8s.io,
// which Kubernetes reserves for its own components (app.kubernetes.io/managed-by
// marks ownership, topology.kubernetes.io/* the locality).
var reservedDomains = []string{ownDomain, "istio.io", "kubernetes.io", "k8s.io"}

// ownDomain is meshbridge's label domain: no registry label may be under it.
const ownDomain = "meshbridge.io"

// ReservedLabel reports whether key, a label key with a lower-case prefix,
// is under a reserved prefix: meshbridge.io/, istio.io/, kubernetes.io/,
// k8s.io/ or a subdomain of one (security.istio.io/, topology.kubernetes.io/,
// app.kubernetes.io/, …). A registry label under one is dropped
// (DropReservedPrefix) unless Options.AllowLabels lets it through.
func ReservedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && underDomains(prefix, reservedDomains)
}

// ownedLabel reports whether key is one no allow-list may let through:
// meshbridge.io/ and its subdomains, and app.kubernetes.io/managed-by. They
// decide ownership (garbage collection) and selection.
func ownedLabel(key string) bool {
	prefix, _, _ := strings.Cut(key, "/")
	return key == model.LabelManagedBy || underDomains(prefix, []string{ownDomain})
}

func underDomains(prefix string, domains []string) bool {
	for _, d := range domains {
		if prefix == d || len(prefix) > len(d) && prefix[len(prefix)-len(d)-1] == '.' && strings.HasSuffix(prefix, d) {
			return true
		}
	}
	return false
}

// allowList is Options.AllowLabels, compiled: exact keys and prefixes
// (without their '/').
type allowList struct {
	keys, prefixes map[string]bool
}

// newAllowList validates Options.AllowLabels. Each entry is a label key or a
// DNS-1123 subdomain followed by '/', under a reserved prefix, and neither
// an owned key nor a prefix covering one (app.kubernetes.io/ covers
// app.kubernetes.io/managed-by).
func newAllowList(entries []string) (allowList, error) {
	var a allowList
	for i, e := range entries {
		fail := func(format string, args ...any) (allowList, error) {
			return allowList{}, fmt.Errorf("allowLabels[%d]: %q "+format, append([]any{i, e}, args...)...)
		}
		if prefix, ok := strings.CutSuffix(e, "/"); ok {
			switch {
			case !isDNS1123Subdomain(prefix):
				return fail("is not a label prefix: want a lower-case DNS-1123 subdomain followed by '/'")
			case !ReservedLabel(e + "x"):
				return fail("is not a reserved prefix; labels under it need no allow-listing")
			case ownedLabel(e+"x") || strings.HasPrefix(model.LabelManagedBy, e):
				return fail("would let registries set meshbridge's ownership and selection labels (meshbridge.io/*, %s); "+
					"list the other keys one by one", model.LabelManagedBy)
			}
			if a.prefixes == nil {
				a.prefixes = make(map[string]bool)
			}
			a.prefixes[prefix] = true
			continue
		}
		if err := ValidateLabelKey(e); err != nil {
			return fail("is neither a label key nor a prefix ending in '/': %v", err)
		}
		switch {
		case !ReservedLabel(e):
			return fail("is not under a reserved prefix; it needs no allow-listing")
		case ownedLabel(e):
			return fail("is one of meshbridge's ownership and selection labels (meshbridge.io/*, %s), which registries may never set",
				model.LabelManagedBy)
		}
		if a.keys == nil {
			a.keys = make(map[string]bool)
		}
		a.keys[e] = true
	}
	return a, nil
}

// ValidateAllowLabels checks entries as New checks Options.AllowLabels, for
// a caller validating its configuration before building Translators. The
// error names the entry: `allowLabels[1]: "meshbridge.io/service" is one of
// meshbridge's ownership and selection labels ...`.
func ValidateAllowLabels(entries []string) error {
	_, err := newAllowList(entries)
	return err
}

// allows reports whether the reserved key is allow-listed.
func (a allowList) allows(key string) bool {
	if a.keys[key] {
		return true
	}
	prefix, _, _ := strings.Cut(key, "/")
	return a.prefixes[prefix]
}

// volatileKeys are registry parameters that change on every process restart
// or re-registration (Dubbo URL parameters). As labels they would change the
// WorkloadEntry, its content hash and the pushes for no routing reason.
var volatileKeys = map[string]bool{
	"pid":                     true,
	"timestamp":               true,
	"remote.timestamp":        true,
	"dubbo.metadata.revision": true,
}

// ValidateLabelKey reports whether key is a valid Kubernetes label key: an
// optional DNS-1123 subdomain prefix (≤ 253) and "/", then a name of at most
// 63 characters matching [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?
// (apimachinery IsQualifiedName, which istio labels.Instance.Validate applies).
func ValidateLabelKey(key string) error {
	if isLabelKey(key) {
		return nil
	}
	if prefix, _, hasPrefix := strings.Cut(key, "/"); hasPrefix && !isDNS1123Subdomain(prefix) {
		return fmt.Errorf("invalid label key %q: prefix %q is not a DNS-1123 subdomain", key, prefix)
	}
	return fmt.Errorf("invalid label key %q: name part must be 1-63 characters of [-A-Za-z0-9_.], "+
		"starting and ending with an alphanumeric", key)
}

func isLabelKey(key string) bool {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name = prefix
	} else if !isDNS1123Subdomain(prefix) {
		return false
	}
	return len(name) <= maxLabelLength && isQualifiedName(name)
}

func isLabelValue(value string) bool {
	return value == "" || len(value) <= maxLabelLength && isQualifiedName(value)
}

// ValidateLabelValue reports whether value is a valid Kubernetes label value:
// empty, or at most 63 characters matching [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?.
func ValidateLabelValue(value string) error {
	if !isLabelValue(value) {
		return fmt.Errorf("invalid label value %q: must be at most 63 characters of [-A-Za-z0-9_.], "+
			"starting and ending with an alphanumeric", value)
	}
	return nil
}

// ValidateLabels checks every key and value of labels (istio labels.Instance.Validate).
// Errors are reported for the keys in sorted order; the first is returned.
func ValidateLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := ValidateLabelKey(k); err != nil {
			return err
		}
		if err := ValidateLabelValue(labels[k]); err != nil {
			return fmt.Errorf("label %q: %w", k, err)
		}
	}
	return nil
}

func isQualifiedName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

func isNameChar(c byte) bool {
	return isAlnum(c) || c == '-' || c == '_' || c == '.'
}

// ServiceLabelValue returns the meshbridge.io/service label value for host:
// host itself when it is a valid label value (≤ 63 characters), else its first
// 52 characters (trailing '.' and '-' trimmed) + "-" + the first 10 hex digits
// of sha256(host). The SE's workloadSelector and its WorkloadEntries carry it
// (README "Naming conventions", "selection").
func ServiceLabelValue(host string) string {
	if ValidateLabelValue(host) == nil {
		return host
	}
	sum := sha256.Sum256([]byte(host))
	prefix := host
	if len(prefix) > 52 {
		prefix = prefix[:52]
	}
	prefix = strings.TrimRightFunc(prefix, func(r rune) bool { return r > 127 || !isAlnum(byte(r)) })
	if prefix == "" {
		return hex.EncodeToString(sum[:])[:10]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:10]
}

// sanitizeLabels turns an instance's raw registry labels into valid
// Kubernetes labels (package doc, "Registry labels") and reports every label
// it changed or dropped, sorted by raw key. The result does not depend on
// map iteration order. When every label is kept as written, the result is
// raw itself, which the registry's listing holds anyway (read-only once
// delivered, as translated objects are): one map per distinct label set
// instead of two, about 290 bytes per service (P1 in docs/benchmarks.md);
// otherwise it is new.
func sanitizeLabels(instanceID string, raw map[string]string, allow allowList) (map[string]string, []LabelChange) {
	if len(raw) == 0 {
		return nil, nil
	}
	if len(raw) <= MaxInstanceLabels && labelsAsWritten(raw) {
		return raw, nil
	}
	var buf [8]labelCandidate // most instances: on the stack
	cands := buf[:0]
	for k, v := range raw {
		cands = append(cands, sanitizeLabel(k, v, allow))
	}
	// Kept labels ordered by key; among those with one key, the key as
	// written first, then by raw key: the first of each key wins, the rest
	// collide. Dropped ones (key "") come first and are skipped.
	slices.SortFunc(cands, func(a, b labelCandidate) int {
		return cmp.Or(strings.Compare(a.key, b.key), -cmp.Compare(a.exact(), b.exact()), strings.Compare(a.rawKey, b.rawKey))
	})
	kept, last := 0, ""
	for i := range cands {
		c := &cands[i]
		switch {
		case c.dropped:
		case c.key == last:
			c.reason, c.dropped = DropCollision, true
		case kept == MaxInstanceLabels:
			last = c.key
			c.reason, c.dropped = DropTooMany, true
		default:
			last = c.key
			kept++
		}
	}
	out := make(map[string]string, kept+1)
	var changes []LabelChange
	for _, c := range cands {
		if !c.dropped {
			out[c.key] = c.value
		}
		if c.reason == "" {
			continue
		}
		ch := LabelChange{InstanceID: instanceID, Key: c.rawKey, Value: c.rawValue, Reason: c.reason}
		if !c.dropped {
			ch.NewKey, ch.NewValue = c.key, c.value
		}
		changes = append(changes, ch)
	}
	slices.SortFunc(changes, func(a, b LabelChange) int { return strings.Compare(a.Key, b.Key) })
	return out, changes
}

// labelsAsWritten reports whether every label of raw is kept unchanged.
func labelsAsWritten(raw map[string]string) bool {
	for k, v := range raw {
		if !isLabelKey(k) || !isLabelValue(v) || ReservedLabel(k) || volatileKeys[strings.ToLower(k)] {
			return false
		}
	}
	return true
}

// labelCandidate is one raw label after sanitizeLabel.
type labelCandidate struct {
	rawKey, rawValue string
	key, value       string // the sanitized label; "" when dropped
	reason           string // a Change* or Drop* reason, "" when unchanged
	dropped          bool
}

// exact reports whether the candidate keeps its key as written.
func (c labelCandidate) exact() int {
	if c.key == c.rawKey {
		return 1
	}
	return 0
}

// sanitizeLabel sanitizes one label, or drops it. The checks run in this
// order, the first that applies giving the reason: volatile key; reserved
// prefix (on the sanitized key, so Security.Istio.IO/x is caught) unless
// allow-listed; invalid key; invalid value; then, for a kept label, key
// changed, value truncated, value changed.
func sanitizeLabel(rawKey, rawValue string, allow allowList) labelCandidate {
	c := labelCandidate{rawKey: rawKey, rawValue: rawValue}
	drop := func(reason string) labelCandidate {
		c.reason, c.dropped = reason, true
		return c
	}
	if volatileKeys[strings.ToLower(rawKey)] {
		return drop(DropVolatile)
	}
	key := rawKey
	if !isLabelKey(key) {
		key = sanitizeKey(rawKey)
	}
	if ReservedLabel(key) && !allow.allows(key) {
		return drop(DropReservedPrefix)
	}
	if !isPrintableASCII(rawKey) || !isLabelKey(key) {
		return drop(DropInvalidKey)
	}
	value, reason := sanitizeValue(rawValue)
	if reason == DropInvalidValue {
		return drop(reason)
	}
	if key != rawKey {
		reason = ChangeKey
	}
	c.key, c.value, c.reason = key, value, reason
	return c
}

// sanitizeValue returns the label value for raw and ChangeValue or
// ChangeTruncated when it differs, or DropInvalidValue. Characters outside
// [-A-Za-z0-9_.] become '-' and non-alphanumeric ends are trimmed, unless
// that would mislead: raw holds a character outside printable ASCII (UTF-8
// bytes would each become '-'), nothing alphanumeric is left (a non-empty
// value would read as a bare flag), or the trim would drop a '-' or '.' right
// before a digit ("-1" is not "1", ".5" is not "5"). A value still over 63
// characters is shortened the way ServiceLabelValue shortens a host, so that
// values distinct after sanitizing stay distinct.
func sanitizeValue(raw string) (string, string) {
	if isLabelValue(raw) {
		return raw, ""
	}
	if !isPrintableASCII(raw) {
		return "", DropInvalidValue
	}
	value := sanitizeName(raw)
	if value == "" {
		return "", DropInvalidValue
	}
	if i := strings.IndexFunc(raw, func(r rune) bool { return r < 128 && isAlnum(byte(r)) }); i > 0 &&
		isDigit(raw[i]) && (raw[i-1] == '-' || raw[i-1] == '.') {
		return "", DropInvalidValue
	}
	if len(value) > maxLabelLength {
		return ServiceLabelValue(value), ChangeTruncated
	}
	return value, ChangeValue
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isPrintableASCII reports whether s holds only U+0020-U+007E.
func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// sanitizeKey lower-cases the prefix (DNS names are case-insensitive) and
// replaces characters invalid in either part with '-'. A key with more than
// one '/' keeps the first as the prefix separator.
func sanitizeKey(raw string) string {
	prefix, name, hasPrefix := strings.Cut(raw, "/")
	if !hasPrefix {
		return sanitizeName(raw)
	}
	return sanitizePrefix(prefix) + "/" + sanitizeName(name)
}

// sanitizeName replaces every character outside [-A-Za-z0-9_.] with '-' and
// trims leading and trailing non-alphanumerics.
func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isNameChar(c) {
			b[i] = '-'
		}
	}
	return trimNonAlnum(string(b))
}

// sanitizePrefix lower-cases s, replaces characters outside [-a-z0-9.] with
// '-' and trims each dot-separated label's leading and trailing '-'.
func sanitizePrefix(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !isLowerAlnum(c) && c != '.' && c != '-' {
			b[i] = '-'
		}
	}
	labels := strings.Split(string(b), ".")
	for i, l := range labels {
		labels[i] = strings.Trim(l, "-")
	}
	return strings.Join(labels, ".")
}

func trimNonAlnum(s string) string {
	start, end := 0, len(s)
	for start < end && !isAlnum(s[start]) {
		start++
	}
	for end > start && !isAlnum(s[end-1]) {
		end--
	}
	return s[start:end]
}

// ownershipLabels returns the labels every object carries: managed-by,
// registry and, when set, meshbridge.io/instance and istio.io/rev
// (docs/design.md §3; README "Naming conventions"). The map is shared by
// every ServiceEntry the Translator makes: read-only.
func (t *Translator) ownershipLabels() map[string]string { return t.ownership }

func (t *Translator) newOwnershipLabels() map[string]string {
	l := map[string]string{
		model.LabelManagedBy: model.ManagedByValue,
		model.LabelRegistry:  t.opts.Registry,
	}
	if t.opts.Instance != "" {
		l[model.LabelInstance] = t.opts.Instance
	}
	if t.opts.Revision != "" {
		l[model.LabelRevision] = t.opts.Revision
	}
	return l
}

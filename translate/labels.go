package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/model"
)

// Reasons a registry label is dropped (LabelDrop.Reason).
const (
	DropReservedPrefix = "reserved-prefix" // meshbridge.io/ or app.kubernetes.io/: no forged ownership (issue 2)
	DropVolatile       = "volatile"        // Dubbo pid, timestamp, …: would rewrite the object on every restart
	DropInvalidKey     = "invalid-key"     // still not a qualified name after sanitizing, or too long
	DropInvalidValue   = "invalid-value"   // still not a label value after sanitizing, or too long
	DropDuplicateKey   = "duplicate-key"   // two registry keys sanitize to one key; the first wins
)

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
// (issue 2, "Names, labels and ownership").
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

// sanitizeLabels turns raw registry labels into valid Kubernetes labels. Keys
// that are already valid are placed first, so that a valid key is never
// displaced by another key that sanitizes to it. Drops are returned sorted by key.
func sanitizeLabels(instanceID string, raw map[string]string) (map[string]string, []LabelDrop) {
	if len(raw) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		if isLabelKey(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	valid := len(keys)
	for k := range raw {
		if !isLabelKey(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys[valid:])
	out := make(map[string]string, len(raw))
	var drops []LabelDrop
	for _, rawKey := range keys {
		key, value, reason := sanitizeLabel(rawKey, raw[rawKey])
		if reason == "" {
			if _, dup := out[key]; dup {
				reason = DropDuplicateKey
			}
		}
		if reason != "" {
			drops = append(drops, LabelDrop{InstanceID: instanceID, Key: rawKey, Reason: reason})
			continue
		}
		out[key] = value
	}
	slices.SortFunc(drops, func(a, b LabelDrop) int { return strings.Compare(a.Key, b.Key) })
	return out, drops
}

// sanitizeLabel returns the sanitized key and value, or a drop reason.
func sanitizeLabel(rawKey, rawValue string) (key, value, reason string) {
	if volatileKeys[strings.ToLower(rawKey)] {
		return "", "", DropVolatile
	}
	key = sanitizeKey(rawKey)
	lower := strings.ToLower(key)
	if strings.HasPrefix(lower, model.ReservedPrefixMB) || strings.HasPrefix(lower, model.ReservedPrefixApp) {
		return "", "", DropReservedPrefix
	}
	if !isLabelKey(key) {
		return "", "", DropInvalidKey
	}
	value = sanitizeName(rawValue)
	if !isLabelValue(value) {
		return "", "", DropInvalidValue
	}
	return key, value, ""
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
// registry and, when set, istio.io/rev (DESIGN.md §3, issue 2).
func (t *Translator) ownershipLabels() map[string]string {
	l := map[string]string{
		model.LabelManagedBy: model.ManagedByValue,
		model.LabelRegistry:  t.opts.Registry,
	}
	if t.opts.Revision != "" {
		l[model.LabelRevision] = t.opts.Revision
	}
	return l
}

package translate

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/internal/wire"
	"github.com/meshbridge/meshbridge/model"
)

// Limits of what inline mode may write (rule 10). A service past either is
// emitted in WorkloadEntry form instead, and Result.Fallback says why.
const (
	// MaxInlineEndpoints is the most endpoints one ServiceEntry may list: the
	// ServiceEntry CRD's spec.endpoints maxItems (istio.io/api
	// networking/v1alpha3/service_entry.proto,
	// +kubebuilder:validation:MaxItems=4096). The API server rejects a
	// ServiceEntry with more, whatever istiod's own validation says.
	MaxInlineEndpoints = 4096
	// MaxObjectBytes is the size limit of one stored object: etcd's default
	// --max-request-bytes of 1.5 MiB (1,572,864 bytes), which bounds the
	// request that writes it. The API server stores custom resources as
	// JSON, so the check is on the object's JSON encoding as ToJSON renders
	// it (apiVersion, kind, metadata, spec, compact, with encoding/json's
	// escaping; the API server's encoding differs only in key order): an
	// inline ServiceEntry is too large when that encoding plus 8 KiB, kept
	// for what the API server adds (uid, resourceVersion, creationTimestamp,
	// the server-side apply's managedFields: about 1 KiB) and for etcd's
	// request framing, exceeds MaxObjectBytes.
	//
	// The check is cheap: the length is computed by walking the spec, with
	// no encoding (about 5% of translating it); the object is encoded to
	// measure it only when the walk lands within 16 KiB of the limit.
	MaxObjectBytes = 1536 * 1024
)

const (
	// storedObjectReserve is the 8 KiB of MaxObjectBytes kept free for the
	// metadata the API server adds and etcd's framing (see MaxObjectBytes).
	storedObjectReserve = 8 << 10
	// maxInlineJSONBytes is the most JSON an inline ServiceEntry may take.
	maxInlineJSONBytes = MaxObjectBytes - storedObjectReserve
	// sizeSlack is how far from maxInlineJSONBytes the walk's length must
	// be to decide alone; closer, the object is encoded to measure it, so
	// that a drift of the walk from protojson could not put an object over.
	sizeSlack = 16 << 10
)

// inlineSizeFallback returns why the inline ServiceEntry se of host may not
// be written (its JSON is over maxInlineJSONBytes), or "" when it may.
//
// The length is computed by walking the spec (serviceEntryObjectJSONSize:
// one pass over the endpoints, nothing encoded or allocated; TestJSONSize
// holds it equal to the encoding). Only when the walk cannot size a field,
// or lands within sizeSlack of the limit, is the object encoded
// (objectJSONSize, ten to twenty times the walk's cost) to decide.
func (t *Translator) inlineSizeFallback(host string, annotations map[string]string, se *networking.ServiceEntry, limit int) string {
	labels := t.ownershipLabels()
	withHash := map[string]string{model.AnnotationHash: hashPlaceholder}
	maps.Copy(withHash, annotations)
	n, ok := serviceEntryObjectJSONSize(host, t.opts.Namespace, labels, withHash, se)
	if !ok || n > limit-sizeSlack && n <= limit+sizeSlack {
		cfg := &model.Config{
			Meta: model.Meta{
				Kind:        model.KindServiceEntry,
				Name:        host,
				Namespace:   t.opts.Namespace,
				Labels:      labels,
				Annotations: annotations,
				Hash:        model.Hash{1}, // any non-zero hash: 64 hex digits
			},
			Spec: se,
		}
		var err error
		if n, err = objectJSONSize(cfg); err != nil {
			// protojson fails only on invalid UTF-8, which sanitized
			// labels, validated addresses and localities cannot hold; were
			// it to fail, the writer could not send the object either.
			return fmt.Sprintf("the inline ServiceEntry cannot be encoded as JSON to check its size: %v", err)
		}
	}
	if n <= limit {
		return ""
	}
	if limit < maxInlineJSONBytes {
		return fmt.Sprintf("the inline ServiceEntry would take %s bytes of JSON: it stays in WorkloadEntry form until under %s "+
			"(90 %% of etcd's 1.5 MiB request limit less 8 KiB)", groupDigits(n), groupDigits(limit))
	}
	return fmt.Sprintf("the inline ServiceEntry would take %s bytes of JSON, over the %s bytes allowed "+
		"(etcd's 1.5 MiB request limit less 8 KiB for the API server's metadata)",
		groupDigits(n), groupDigits(maxInlineJSONBytes))
}

// endpointCountFallback is Result.Fallback for n admitted instances, past
// limit: MaxInlineEndpoints, or 90 % of it for a service already in
// WorkloadEntry form.
func endpointCountFallback(n, limit int) string {
	if limit < MaxInlineEndpoints {
		return fmt.Sprintf("%s endpoints: it stays in WorkloadEntry form until at most %d (90 %% of the ServiceEntry CRD's limit of %d inline endpoints)",
			groupDigits(n), limit, MaxInlineEndpoints)
	}
	return fmt.Sprintf("%s endpoints exceed the ServiceEntry CRD's limit of %d inline endpoints",
		groupDigits(n), MaxInlineEndpoints)
}

// hashPlaceholder stands in for the content hash when measuring an object
// that has none yet: ContentHash is always 64 hex digits.
var hashPlaceholder = strings.Repeat("0", 64)

// serviceEntryObjectJSONSize is objectJSONSize of the ServiceEntry named
// name in namespace with these labels and annotations, computed by walking
// se (internal/wire) instead of encoding it; ok is false where the walk
// cannot size it.
func serviceEntryObjectJSONSize(name, namespace string, labels, annotations map[string]string, se *networking.ServiceEntry) (int, bool) {
	spec, ok := wire.ServiceEntryJSONSize(se)
	if !ok {
		return 0, false
	}
	return wire.ObjectJSONSize(model.APIVersion, string(model.KindServiceEntry), name, namespace, labels, annotations, spec)
}

// objectJSONSize returns the length of cfg's JSON encoding: one item of
// ToJSON's list, without indentation.
func objectJSONSize(cfg *model.Config) (int, error) {
	o, err := toObject(cfg)
	if err != nil {
		return 0, err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", cfg.Key(), err)
	}
	return len(b), nil
}

// groupDigits formats a non-negative n with commas between thousands:
// 4200 → "4,200".
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	if n < 0 || len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	if lead > 0 {
		b.WriteString(s[:lead])
	}
	for i := lead; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1"
)

// The functions here compute, without encoding or allocating, the length of
// an object's JSON as translate.ToJSON renders it one item at a time: the
// spec as compact protojson (camelCase names, unset fields omitted, enums by
// name), the whole through encoding/json, which also escapes <, > and & and
// U+2028/U+2029. Inline mode checks every new ServiceEntry's size
// (translate.MaxObjectBytes), and encoding a ServiceEntry of thousands of
// endpoints with protojson costs as much as translating it. TestJSONSize
// holds them equal to that encoding. ok is false for what they do not size
// (unknown fields, an unknown enum value, invalid UTF-8, a nil element, a
// message of an istio.io/api with fields they do not know); the caller then
// encodes.

// jsonObject sums the members of one JSON object.
type jsonObject struct{ size, members int }

// field adds "name":<value bytes>; name needs no escaping.
func (o *jsonObject) field(name string, value int) { o.member(len(name)+2, value) }

// member adds a member whose key, quoted and escaped, takes key bytes.
func (o *jsonObject) member(key, value int) {
	o.size += key + 1 + value
	o.members++
}

// total is the object's length: braces, members and the commas between.
func (o *jsonObject) total() int {
	if o.members == 0 {
		return 2
	}
	return o.size + o.members - 1 + 2
}

// jsonStringSize is the length of s as a quoted JSON string: protojson's
// escapes (\" \\ \b \f \n \r \t, \u00XX for other control characters), then
// encoding/json's HTML-safe ones (\u003c \u003e \u0026 \u2028 \u2029).
func jsonStringSize(s string) (int, bool) {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < ' ' || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return 0, false
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n, true
}

// jsonUintSize is the length of v in decimal.
func jsonUintSize(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

func jsonStringsSize(ss []string) (int, bool) {
	n := 2 + max(len(ss)-1, 0)
	for _, s := range ss {
		sn, ok := jsonStringSize(s)
		if !ok {
			return 0, false
		}
		n += sn
	}
	return n, true
}

func jsonStringMapSize(m map[string]string) (int, bool) {
	var o jsonObject
	for k, v := range m {
		kn, ok1 := jsonStringSize(k)
		vn, ok2 := jsonStringSize(v)
		if !ok1 || !ok2 {
			return 0, false
		}
		o.member(kn, vn)
	}
	return o.total(), true
}

// jsonEnumSize is the length of an enum's name, quoted; protojson writes an
// unknown value as a number, which is not sized.
func jsonEnumSize(e protoreflect.Enum) (int, bool) {
	v := e.Descriptor().Values().ByNumber(e.Number())
	if v == nil {
		return 0, false
	}
	return jsonStringSize(string(v.Name()))
}

// ObjectJSONSize is the length of an object's JSON: apiVersion, kind,
// metadata (name, namespace, labels and annotations, each left out when
// empty) and a spec whose JSON takes spec bytes (ServiceEntryJSONSize,
// WorkloadEntryJSONSize). apiVersion and kind need no escaping.
func ObjectJSONSize(apiVersion, kind, name, namespace string, labels, annotations map[string]string, spec int) (int, bool) {
	var meta jsonObject
	n, ok := jsonStringSize(name)
	meta.field("name", n)
	if namespace != "" {
		n, ok2 := jsonStringSize(namespace)
		ok = ok && ok2
		meta.field("namespace", n)
	}
	if len(labels) > 0 {
		n, ok2 := jsonStringMapSize(labels)
		ok = ok && ok2
		meta.field("labels", n)
	}
	if len(annotations) > 0 {
		n, ok2 := jsonStringMapSize(annotations)
		ok = ok && ok2
		meta.field("annotations", n)
	}
	var o jsonObject
	o.field("apiVersion", 2+len(apiVersion))
	o.field("kind", 2+len(kind))
	o.field("metadata", meta.total())
	o.field("spec", spec)
	return o.total(), ok
}

// ServiceEntryJSONSize is the length of se's compact protojson.
func ServiceEntryJSONSize(se *networking.ServiceEntry) (int, bool) {
	if !serviceEntryKnown || se == nil || len(se.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	var o jsonObject
	ok := true
	list := func(name string, ss []string) {
		if len(ss) > 0 {
			n, ok2 := jsonStringsSize(ss)
			ok = ok && ok2
			o.field(name, n)
		}
	}
	list("hosts", se.Hosts)
	list("addresses", se.Addresses)
	if len(se.Ports) > 0 {
		n := 2 + len(se.Ports) - 1
		for _, p := range se.Ports {
			pn, ok2 := servicePortJSONSize(p)
			ok = ok && ok2
			n += pn
		}
		o.field("ports", n)
	}
	if se.Location != 0 {
		n, ok2 := jsonEnumSize(se.Location)
		ok = ok && ok2
		o.field("location", n)
	}
	if se.Resolution != 0 {
		n, ok2 := jsonEnumSize(se.Resolution)
		ok = ok && ok2
		o.field("resolution", n)
	}
	if len(se.Endpoints) > 0 {
		n := 2 + len(se.Endpoints) - 1
		for _, we := range se.Endpoints {
			wn, ok2 := WorkloadEntryJSONSize(we)
			if !ok2 {
				return 0, false
			}
			n += wn
		}
		o.field("endpoints", n)
	}
	list("exportTo", se.ExportTo)
	list("subjectAltNames", se.SubjectAltNames)
	if sel := se.WorkloadSelector; sel != nil {
		if len(sel.ProtoReflect().GetUnknown()) > 0 {
			return 0, false
		}
		var so jsonObject
		if len(sel.Labels) > 0 {
			n, ok2 := jsonStringMapSize(sel.Labels)
			ok = ok && ok2
			so.field("labels", n)
		}
		o.field("workloadSelector", so.total())
	}
	return o.total(), ok
}

func servicePortJSONSize(p *networking.ServicePort) (int, bool) {
	if p == nil || len(p.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	var o jsonObject
	ok := true
	if p.Number != 0 {
		o.field("number", jsonUintSize(uint64(p.Number)))
	}
	if p.Protocol != "" {
		n, ok2 := jsonStringSize(p.Protocol)
		ok = ok && ok2
		o.field("protocol", n)
	}
	if p.Name != "" {
		n, ok2 := jsonStringSize(p.Name)
		ok = ok && ok2
		o.field("name", n)
	}
	if p.TargetPort != 0 {
		o.field("targetPort", jsonUintSize(uint64(p.TargetPort)))
	}
	return o.total(), ok
}

// WorkloadEntryJSONSize is the length of we's compact protojson.
func WorkloadEntryJSONSize(we *networking.WorkloadEntry) (int, bool) {
	if !workloadEntryKnown || we == nil || len(we.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	var o jsonObject
	ok := true
	str := func(name, s string) {
		if s != "" {
			n, ok2 := jsonStringSize(s)
			ok = ok && ok2
			o.field(name, n)
		}
	}
	str("address", we.Address)
	if len(we.Ports) > 0 {
		var po jsonObject
		for k, v := range we.Ports {
			kn, ok2 := jsonStringSize(k)
			ok = ok && ok2
			po.member(kn, jsonUintSize(uint64(v)))
		}
		o.field("ports", po.total())
	}
	if len(we.Labels) > 0 {
		n, ok2 := jsonStringMapSize(we.Labels)
		ok = ok && ok2
		o.field("labels", n)
	}
	str("network", we.Network)
	str("locality", we.Locality)
	if we.Weight != 0 {
		o.field("weight", jsonUintSize(uint64(we.Weight)))
	}
	str("serviceAccount", we.ServiceAccount)
	return o.total(), ok
}

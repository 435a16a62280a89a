package strict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Unmarshal decodes YAML data into v (a pointer to a struct). A key given
// twice in one mapping and a second YAML document are errors naming the line
// (YAML itself would let the last key win and a reader take the first
// document only).
func Unmarshal(data []byte, v any) error {
	if err := singleDocument(data); err != nil {
		return err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	return UnmarshalJSON(js, v)
}

// singleDocument fails when data holds more than one non-empty YAML
// document. Documents are separated only by a marker ("---" or "...") at the
// start of a line (YAML 1.2 §9.1; inside a scalar such a line is not
// allowed), so data without one is a single document and is not parsed here:
// the parse is a third of Unmarshal's cost.
func singleDocument(data []byte) error {
	if !hasDocumentMarker(data) {
		return nil
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("invalid YAML: %w", err)
		}
		if i > 0 && !emptyDocument(&doc) {
			return fmt.Errorf("line %d: a second YAML document; a configuration is one document (remove the \"---\" and what follows, or merge it)", doc.Line)
		}
	}
}

// hasDocumentMarker reports whether a line of data starts with a document
// marker: "---" or "..." followed by a space, a tab, a line break or the
// end.
func hasDocumentMarker(data []byte) bool {
	for line := range bytes.Lines(data) {
		if len(line) < 3 || (!bytes.HasPrefix(line, []byte("---")) && !bytes.HasPrefix(line, []byte("..."))) {
			continue
		}
		if len(line) == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\n' || line[3] == '\r' {
			return true
		}
	}
	return false
}

// emptyDocument reports whether doc holds nothing but an empty or null value
// (a trailing "---" makes one).
func emptyDocument(doc *yamlv3.Node) bool {
	for _, n := range doc.Content {
		if n.Kind != yamlv3.ScalarNode || (n.Tag != "!!null" && n.Value != "") {
			return false
		}
	}
	return true
}

// PathError is a decoding error at a field path ("registries[0].consul.adress").
// A json.Unmarshaler that decodes a nested block with Unmarshal or
// UnmarshalJSON returns one, and the enclosing decode joins the paths.
type PathError struct {
	// Path is dotted, with list indexes: "items[1].inner.port"; "" is the
	// document itself.
	Path string
	Err  error
}

func (e *PathError) Error() string { return orRoot(e.Path) + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

var errUnknownField = errors.New("unknown field")

func pathErrorf(path, format string, args ...any) error {
	return &PathError{Path: path, Err: fmt.Errorf(format, args...)}
}

// UnmarshalJSON decodes JSON data into v (a pointer to a struct) with the
// same checks as Unmarshal; errors are *PathError relative to data. It is
// for json.Unmarshaler implementations that decode a block whose type is
// known only at run time.
func UnmarshalJSON(data []byte, v any) error {
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return err
	}
	if err := check(generic, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return pathErrorf(te.Field, "cannot use a %s as %s", te.Value, te.Type)
		}
		return err
	}
	return nil
}

var unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// check walks a decoded document against t and reports the first unknown
// key or wrongly shaped value, in document order.
func check(val any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if val == nil {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		raw, err := json.Marshal(val)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
		}
		if err != nil {
			var pe *PathError
			if errors.As(err, &pe) {
				// A nested Unmarshal (a registry's configuration block)
				// named the field inside the value.
				return &PathError{Path: join(path, pe.Path), Err: pe.Err}
			}
			return &PathError{Path: path, Err: err}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		if _, ok := val.(string); !ok {
			return pathErrorf(path, "must be a string, not %s%s", describe(val), quoteHint(val))
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			return pathErrorf(path, "must be true or false, not %s", describe(val))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := val.(float64)
		if !ok || n != float64(int64(n)) {
			return pathErrorf(path, "must be a whole number, not %s", describe(val))
		}
		if t.Kind() >= reflect.Uint && n < 0 {
			return pathErrorf(path, "must not be negative")
		}
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			return pathErrorf(path, "must be a mapping")
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				return &PathError{Path: join(path, k), Err: errUnknownField}
			}
			if err := check(m[k], ft, join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		list, ok := val.([]any)
		if !ok {
			return pathErrorf(path, "must be a list")
		}
		for i, e := range list {
			if err := check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := val.(map[string]any)
		if !ok {
			return pathErrorf(path, "must be a mapping")
		}
		for k, e := range m {
			if err := check(e, t.Elem(), join(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// describe names a decoded YAML value for an error message.
func describe(val any) string {
	switch v := val.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case float64:
		return fmt.Sprintf("the number %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", val)
}

// quoteHint explains YAML 1.1's booleans (y, yes, on, off, ...), the usual
// reason a word lands in a string field as a boolean.
func quoteHint(val any) string {
	if _, ok := val.(bool); ok {
		return " (YAML reads y, yes, no, on and off as booleans: quote the value)"
	}
	return ""
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

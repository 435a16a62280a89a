package strict

import (
	"testing"
	"time"
)

type duration struct{ time.Duration }

func (d *duration) UnmarshalJSON(b []byte) error {
	v, err := time.ParseDuration(string(b[1 : len(b)-1]))
	d.Duration = v
	return err
}

type doc struct {
	Items []struct {
		Name  string `json:"name"`
		Inner struct {
			Port int `json:"port"`
		} `json:"inner"`
	} `json:"items"`
	Wait   duration          `json:"wait"`
	Labels map[string]string `json:"labels"`
}

func TestUnmarshalNamesThePath(t *testing.T) {
	cases := map[string]struct {
		in      string
		wantErr string
	}{
		"a valid document decodes":                           {in: "items: [{name: a, inner: {port: 1}}]\nwait: 1s\nlabels: {a: b}", wantErr: ""},
		"an unknown top-level key is named":                  {in: "itemz: []", wantErr: "itemz: unknown field"},
		"an unknown nested key has its path":                 {in: "items: [{name: a}, {inner: {prot: 1}}]", wantErr: "items[1].inner.prot: unknown field"},
		"a scalar where a list belongs":                      {in: "items: 3", wantErr: "items: must be a list"},
		"a wrong scalar type names the indexed field":        {in: "items: [{}, {inner: {port: x}}]", wantErr: `items[1].inner.port: must be a whole number, not the string "x"`},
		"a YAML 1.1 boolean in a string field says to quote": {in: "items: [{name: y}]", wantErr: "items[0].name: must be a string, not the boolean true (YAML reads y, yes, no, on and off as booleans: quote the value)"},
		"a fraction is not a whole number":                   {in: "items: [{inner: {port: 1.5}}]", wantErr: "items[0].inner.port: must be a whole number, not the number 1.5"},
		"a custom decoder's error gets the path":             {in: "wait: soon", wantErr: `wait: time: invalid duration "soon"`},
		"an empty document is valid":                         {in: "", wantErr: ""},
		"a key given twice names its line":                   {in: "wait: 1s\nlabels:\n  a: b\n  a: c\n", wantErr: "invalid YAML: yaml: unmarshal errors:\n  line 4: key \"a\" already set in map"},
		"a top-level key given twice":                        {in: "wait: 1s\nwait: 2s\n", wantErr: "invalid YAML: yaml: unmarshal errors:\n  line 2: key \"wait\" already set in map"},
		"a second document names its line":                   {in: "wait: 1s\n---\nwait: 2s\n", wantErr: `line 2: a second YAML document; a configuration is one document (remove the "---" and what follows, or merge it)`},
		"a trailing document separator is harmless":          {in: "wait: 1s\n---\n", wantErr: ""},
		"a leading document separator is harmless":           {in: "---\nwait: 1s\n", wantErr: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var d doc
			err := Unmarshal([]byte(tc.in), &d)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Fatalf("err = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// TestHasDocumentMarker: only a marker at the start of a line separates
// documents; data without one skips the document check's parse.
func TestHasDocumentMarker(t *testing.T) {
	for in, want := range map[string]bool{
		"a: 1\n":                       false,
		"a: |\n  ---\n  text\n":        false,
		"a: \"x --- y\"\n":             false,
		"a: ----\n":                    false,
		"----\n":                       false,
		"---\na: 1\n":                  true,
		"a: 1\n---\n":                  true,
		"a: 1\n--- \nb: 2\n":           true,
		"a: 1\n...\n":                  true,
		"a: 1\n---":                    true,
		"a: 1\r\n---\r\nb: 2\r\n":      true,
		"a: 1\n---\t# comment\nb: 2\n": true,
	} {
		if got := hasDocumentMarker([]byte(in)); got != want {
			t.Errorf("hasDocumentMarker(%q) = %v, want %v", in, got, want)
		}
	}
}

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
		"a valid document decodes":            {in: "items: [{name: a, inner: {port: 1}}]\nwait: 1s\nlabels: {a: b}", wantErr: ""},
		"an unknown top-level key is named":   {in: "itemz: []", wantErr: "itemz: unknown field"},
		"an unknown nested key has its path":  {in: "items: [{name: a}, {inner: {prot: 1}}]", wantErr: "items[1].inner.prot: unknown field"},
		"a scalar where a list belongs":       {in: "items: 3", wantErr: "items: must be a list"},
		"a wrong scalar type names the field": {in: "items: [{inner: {port: x}}]", wantErr: "items.inner.port: cannot use a string as int"},
		"an empty document is valid":          {in: "", wantErr: ""},
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

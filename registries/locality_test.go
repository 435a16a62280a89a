package registries

import "testing"

func TestMetadataLocality(t *testing.T) {
	cases := []struct {
		meta map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{"version": "v1"}, ""},
		{map[string]string{"zone": "z1"}, "/z1/"},
		{map[string]string{"region": "r", "zone": "z", "subzone": "s"}, "r/z/s"},
		{map[string]string{"region": "r", "subzone": "s"}, "r//s"},
	}
	for _, tc := range cases {
		if got := MetadataLocality(tc.meta); got != tc.want {
			t.Errorf("MetadataLocality(%v) = %q, want %q", tc.meta, got, tc.want)
		}
	}
}

package translate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSanitizeLabels(t *testing.T) {
	long := strings.Repeat("v", 64)
	cases := map[string]struct {
		raw       map[string]string
		want      map[string]string
		wantDrops map[string]string // raw key → reason
	}{
		"valid labels are kept as they are": {
			raw:  map[string]string{"version": "v1", "example.com/team": "pay", "empty": ""},
			want: map[string]string{"version": "v1", "example.com/team": "pay", "empty": ""},
		},
		"invalid characters become dashes and ends are trimmed": {
			raw:  map[string]string{"build date": "2024-01-01 12:00", "_x_": "-y-"},
			want: map[string]string{"build-date": "2024-01-01-12-00", "x": "y"},
		},
		"a prefix is lower-cased": {
			raw:  map[string]string{"Example.COM/Team": "pay"},
			want: map[string]string{"example.com/Team": "pay"},
		},
		"reserved prefixes are dropped so a registry cannot forge ownership": {
			raw: map[string]string{
				"meshbridge.io/service": "x", "app.kubernetes.io/managed-by": "x", "MeshBridge.IO/registry": "x",
			},
			want: map[string]string{},
			wantDrops: map[string]string{
				"meshbridge.io/service": DropReservedPrefix, "app.kubernetes.io/managed-by": DropReservedPrefix,
				"MeshBridge.IO/registry": DropReservedPrefix,
			},
		},
		"volatile dubbo parameters are never labels": {
			raw:       map[string]string{"pid": "1", "timestamp": "2", "Remote.Timestamp": "3", "side": "provider"},
			want:      map[string]string{"side": "provider"},
			wantDrops: map[string]string{"pid": DropVolatile, "timestamp": DropVolatile, "Remote.Timestamp": DropVolatile},
		},
		"values past 63 characters are dropped": {
			raw: map[string]string{"k": long}, want: map[string]string{}, wantDrops: map[string]string{"k": DropInvalidValue},
		},
		"keys with nothing valid left are dropped": {
			raw: map[string]string{"%%%": "v", "a/%%": "v"}, want: map[string]string{},
			wantDrops: map[string]string{"%%%": DropInvalidKey, "a/%%": DropInvalidKey},
		},
		"a key name past 63 characters is dropped": {
			raw: map[string]string{long: "v"}, want: map[string]string{}, wantDrops: map[string]string{long: DropInvalidKey},
		},
		"an already valid key wins over one that sanitizes to it": {
			raw:       map[string]string{"zone a": "1", "zone-a": "2"},
			want:      map[string]string{"zone-a": "2"},
			wantDrops: map[string]string{"zone a": DropDuplicateKey},
		},
		"extra slashes become dashes in the name": {
			raw: map[string]string{"a.io/b/c": "v"}, want: map[string]string{"a.io/b-c": "v"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, drops := sanitizeLabels("i1", tc.raw)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			gotDrops := map[string]string{}
			for _, d := range drops {
				if d.InstanceID != "i1" {
					t.Errorf("drop %+v: wrong instance", d)
				}
				gotDrops[d.Key] = d.Reason
			}
			if diff := cmp.Diff(tc.wantDrops, gotDrops, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("drops (-want +got):\n%s", diff)
			}
			if err := ValidateLabels(got); err != nil {
				t.Errorf("sanitized labels invalid: %v", err)
			}
		})
	}
}

func TestValidateLabelKeyAndValue(t *testing.T) {
	keys := map[string]bool{
		"app": true, "a.b/c": true, "example.com/x_y.z": true, "A": true,
		"": false, "/x": false, "a/": false, "Upper.com/x": false, "-a": false, "a/b/c": false,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
	}
	for k, valid := range keys {
		if err := ValidateLabelKey(k); (err == nil) != valid {
			t.Errorf("ValidateLabelKey(%q) = %v, want valid=%v", k, err, valid)
		}
	}
	values := map[string]bool{
		"": true, "v1": true, "a-b_c.d": true, "-a": false, "a b": false, strings.Repeat("a", 64): false,
	}
	for v, valid := range values {
		if err := ValidateLabelValue(v); (err == nil) != valid {
			t.Errorf("ValidateLabelValue(%q) = %v, want valid=%v", v, err, valid)
		}
	}
}

func TestServiceLabelValue(t *testing.T) {
	long := "a-very-long-service-name-for-testing.with-many-labels.in-its-host.example.internal"
	cases := map[string]struct {
		host string
		want string
	}{
		"a host of at most 63 characters is its own value":  {"web.service.consul", "web.service.consul"},
		"a longer host is 52 characters, a dash and 10 hex": {long, long[:52] + "-08503a8b21"},
		"trailing dots and dashes of the prefix are trimmed": {
			strings.Repeat("a", 51) + ".b" + strings.Repeat("c", 20), strings.Repeat("a", 51) + "-",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ServiceLabelValue(tc.host)
			if !strings.HasPrefix(got, tc.want) || (len(tc.want) == len(tc.host) && got != tc.want) {
				t.Errorf("ServiceLabelValue = %q, want %q…", got, tc.want)
			}
			if err := ValidateLabelValue(got); err != nil {
				t.Errorf("not a label value: %v", err)
			}
		})
	}
}

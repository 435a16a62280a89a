package translate

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
)

func TestSanitizeLabels(t *testing.T) {
	long := strings.Repeat("v", 64)
	manyLabels := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("tag%04d", i)] = ""
		}
		return m
	}
	tooMany := func(from, to int) map[string]string {
		m := map[string]string{}
		for i := from; i < to; i++ {
			m[fmt.Sprintf("tag%04d", i)] = DropTooMany
		}
		return m
	}
	cases := map[string]struct {
		raw         map[string]string
		allow       []string
		want        map[string]string
		wantChanges map[string]string // raw key → reason
	}{
		"valid labels are kept as they are": {
			raw:  map[string]string{"version": "v1", "example.com/team": "pay", "empty": ""},
			want: map[string]string{"version": "v1", "example.com/team": "pay", "empty": ""},
		},
		"invalid characters become dashes and ends are trimmed": {
			raw:         map[string]string{"build date": "2024-01-01 12:00", "_x_": "-y-"},
			want:        map[string]string{"build-date": "2024-01-01-12-00", "x": "y"},
			wantChanges: map[string]string{"build date": ChangeKey, "_x_": ChangeKey},
		},
		"a prefix is lower-cased": {
			raw:         map[string]string{"Example.COM/Team": "pay"},
			want:        map[string]string{"example.com/Team": "pay"},
			wantChanges: map[string]string{"Example.COM/Team": ChangeKey},
		},
		"a value is sanitized under its key as written": {
			raw:         map[string]string{"k": "v!!", "build": "1.2.3+meta.5", "when": "2024-01-01 12:00", "flag": ""},
			want:        map[string]string{"k": "v", "build": "1.2.3-meta.5", "when": "2024-01-01-12-00", "flag": ""},
			wantChanges: map[string]string{"k": ChangeValue, "build": ChangeValue, "when": ChangeValue},
		},
		"values past 63 characters are shortened to 52 characters, a dash and 10 hex": {
			raw: map[string]string{"k": long, "sha": "sha256:" + strings.Repeat("ab", 32)},
			want: map[string]string{
				"k":   ServiceLabelValue(long),
				"sha": ServiceLabelValue("sha256-" + strings.Repeat("ab", 32)),
			},
			wantChanges: map[string]string{"k": ChangeTruncated, "sha": ChangeTruncated},
		},
		"a changed key takes precedence over a changed value": {
			raw:         map[string]string{"build date": "a b", "Example.COM/x": long},
			want:        map[string]string{"build-date": "a-b", "example.com/x": ServiceLabelValue(long)},
			wantChanges: map[string]string{"build date": ChangeKey, "Example.COM/x": ChangeKey},
		},
		"keys outside printable ASCII are dropped, not mangled": {
			raw:         map[string]string{"ünïcode": "ü", "tab\tkey": "v", "zone": "a"},
			want:        map[string]string{"zone": "a"},
			wantChanges: map[string]string{"ünïcode": DropInvalidKey, "tab\tkey": DropInvalidKey},
		},
		"keys with nothing valid left are dropped": {
			raw: map[string]string{"%%%": "v", "a/%%": "v"}, want: map[string]string{},
			wantChanges: map[string]string{"%%%": DropInvalidKey, "a/%%": DropInvalidKey},
		},
		"a key name past 63 characters is dropped": {
			raw: map[string]string{long: "v"}, want: map[string]string{}, wantChanges: map[string]string{long: DropInvalidKey},
		},
		"a prefix that stays invalid is dropped": {
			raw:         map[string]string{"a..b/x": "v", strings.Repeat("p.", 127) + "p/x": "v"},
			want:        map[string]string{},
			wantChanges: map[string]string{"a..b/x": DropInvalidKey, strings.Repeat("p.", 127) + "p/x": DropInvalidKey},
		},
		"values that sanitizing would make misleading are dropped": {
			raw: map[string]string{
				"owner": "Jürgen", "bang": "!!", "delay": "-1", "ratio": ".5", "ctl": "a\nb", "neg": "(-1)",
				"plus": "+1", "hash": "#1", "ok": "v-",
			},
			want: map[string]string{"plus": "1", "hash": "1", "ok": "v"},
			wantChanges: map[string]string{
				"owner": DropInvalidValue, "bang": DropInvalidValue, "delay": DropInvalidValue, "ratio": DropInvalidValue,
				"ctl": DropInvalidValue, "neg": DropInvalidValue, "plus": ChangeValue, "hash": ChangeValue, "ok": ChangeValue,
			},
		},
		"reserved prefixes are dropped so a registry cannot forge ownership": {
			raw: map[string]string{
				"meshbridge.io/service": "x", "app.kubernetes.io/managed-by": "x", "MeshBridge.IO/registry": "x",
			},
			want: map[string]string{},
			wantChanges: map[string]string{
				"meshbridge.io/service": DropReservedPrefix, "app.kubernetes.io/managed-by": DropReservedPrefix,
				"MeshBridge.IO/registry": DropReservedPrefix,
			},
		},
		"labels istiod and Kubernetes interpret are reserved, however spelt": {
			raw: map[string]string{
				"security.istio.io/tlsMode": "disabled", "Topology.Istio.IO/network": "n2", "istio.io/rev": "canary",
				"sidecar.istio.io/inject": "true", "networking.istio.io/x": "v", "topology.kubernetes.io/zone": "z",
				"kubernetes.io/hostname": "h", "node.k8s.io/x": "v", "security.istio.io /tlsMode": "disabled",
				"sync.meshbridge.io/x": "v",
			},
			want: map[string]string{},
			wantChanges: map[string]string{
				"security.istio.io/tlsMode": DropReservedPrefix, "Topology.Istio.IO/network": DropReservedPrefix,
				"istio.io/rev": DropReservedPrefix, "sidecar.istio.io/inject": DropReservedPrefix,
				"networking.istio.io/x": DropReservedPrefix, "topology.kubernetes.io/zone": DropReservedPrefix,
				"kubernetes.io/hostname": DropReservedPrefix, "node.k8s.io/x": DropReservedPrefix,
				"security.istio.io /tlsMode": DropReservedPrefix, "sync.meshbridge.io/x": DropReservedPrefix,
			},
		},
		"look-alike prefixes are not reserved": {
			raw:  map[string]string{"notistio.io/x": "v", "istio.io.example.com/x": "v", "istio.io": "v"},
			want: map[string]string{"notistio.io/x": "v", "istio.io.example.com/x": "v", "istio.io": "v"},
		},
		"an allow-listed key and prefix pass, the rest of their domains does not": {
			raw: map[string]string{
				"topology.istio.io/network": "n2", "Topology.Istio.IO/cluster": "c1", "topology.kubernetes.io/zone": "z",
				"topology.kubernetes.io/region": "r", "security.istio.io/tlsMode": "disabled",
			},
			allow: []string{"topology.istio.io/network", "topology.kubernetes.io/"},
			want: map[string]string{
				"topology.istio.io/network": "n2", "topology.kubernetes.io/zone": "z", "topology.kubernetes.io/region": "r",
			},
			wantChanges: map[string]string{
				"Topology.Istio.IO/cluster": DropReservedPrefix, "security.istio.io/tlsMode": DropReservedPrefix,
			},
		},
		"an allow-listed key is matched after sanitizing": {
			raw:         map[string]string{"Topology.Istio.IO/network": "n2"},
			allow:       []string{"topology.istio.io/network"},
			want:        map[string]string{"topology.istio.io/network": "n2"},
			wantChanges: map[string]string{"Topology.Istio.IO/network": ChangeKey},
		},
		"volatile dubbo parameters are never labels": {
			raw:         map[string]string{"pid": "1", "timestamp": "2", "Remote.Timestamp": "3", "side": "provider"},
			want:        map[string]string{"side": "provider"},
			wantChanges: map[string]string{"pid": DropVolatile, "timestamp": DropVolatile, "Remote.Timestamp": DropVolatile},
		},
		"an already valid key wins over one that sanitizes to it": {
			raw:         map[string]string{"zone a": "1", "zone-a": "2"},
			want:        map[string]string{"zone-a": "2"},
			wantChanges: map[string]string{"zone a": DropCollision},
		},
		"an exact key wins even when another sorts first": {
			raw:         map[string]string{"a b": "1", "a-b": "3", "a!b": "2"},
			want:        map[string]string{"a-b": "3"},
			wantChanges: map[string]string{"a b": DropCollision, "a!b": DropCollision},
		},
		"among sanitized keys the lexically smallest raw key wins": {
			raw:         map[string]string{"a+b": "3", "a!b": "2", "a b": "1"},
			want:        map[string]string{"a-b": "1"},
			wantChanges: map[string]string{"a b": ChangeKey, "a!b": DropCollision, "a+b": DropCollision},
		},
		"prefixes differing in case collide": {
			raw:         map[string]string{"Example.com/x": "1", "EXAMPLE.com/x": "2"},
			want:        map[string]string{"example.com/x": "2"},
			wantChanges: map[string]string{"EXAMPLE.com/x": ChangeKey, "Example.com/x": DropCollision},
		},
		"extra slashes become dashes in the name": {
			raw:         map[string]string{"a.io/b/c": "v"},
			want:        map[string]string{"a.io/b-c": "v"},
			wantChanges: map[string]string{"a.io/b/c": ChangeKey},
		},
		"past MaxInstanceLabels the labels last in key order are dropped": {
			raw:         manyLabels(300),
			want:        func() map[string]string { m := manyLabels(MaxInstanceLabels); return m }(),
			wantChanges: tooMany(MaxInstanceLabels, 300),
		},
		"labels dropped for another reason do not count against the limit": {
			raw: func() map[string]string {
				m := manyLabels(MaxInstanceLabels)
				m["pid"], m["istio.io/rev"] = "1", "x"
				return m
			}(),
			want:        manyLabels(MaxInstanceLabels),
			wantChanges: map[string]string{"pid": DropVolatile, "istio.io/rev": DropReservedPrefix},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			allow, err := newAllowList(tc.allow)
			if err != nil {
				t.Fatal(err)
			}
			got, changes := sanitizeLabels("i1", tc.raw, allow)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			gotChanges := map[string]string{}
			for _, c := range changes {
				gotChanges[c.Key] = c.Reason
				checkChange(t, c, tc.raw, got)
			}
			if diff := cmp.Diff(tc.wantChanges, gotChanges, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if !slices.IsSortedFunc(changes, func(a, b LabelChange) int { return strings.Compare(a.Key, b.Key) }) {
				t.Errorf("changes not sorted by raw key: %v", changes)
			}
			if err := ValidateLabels(got); err != nil {
				t.Errorf("sanitized labels invalid: %v", err)
			}
			// Every raw label is either kept as written or reported.
			for k, v := range tc.raw {
				if _, reported := gotChanges[k]; !reported && got[k] != v {
					t.Errorf("raw label %q=%q neither kept as written nor reported", k, v)
				}
			}
		})
	}
}

// checkChange holds a reported change to what the labels show.
func checkChange(t *testing.T, c LabelChange, raw, got map[string]string) {
	t.Helper()
	if c.InstanceID != "i1" || raw[c.Key] != c.Value || c.Repeated {
		t.Errorf("change %+v: wrong instance, raw value or Repeated", c)
	}
	isDrop := strings.HasPrefix(c.Reason, "invalid-") || c.Reason == DropReservedPrefix || c.Reason == DropVolatile ||
		c.Reason == DropCollision || c.Reason == DropTooMany
	switch {
	case isDrop != c.Dropped():
		t.Errorf("change %+v: reason %s but Dropped() = %v", c, c.Reason, c.Dropped())
	case c.Dropped() && c.NewValue != "":
		t.Errorf("change %+v: dropped with a new value", c)
	case !c.Dropped() && got[c.NewKey] != c.NewValue:
		t.Errorf("change %+v: labels hold %q=%q", c, c.NewKey, got[c.NewKey])
	case !c.Dropped() && c.NewKey == c.Key && c.NewValue == c.Value:
		t.Errorf("change %+v: nothing changed", c)
	}
}

// TestSanitizeLabelsIsDeterministic builds the same raw labels in many
// insertion orders (and Go randomizes map iteration on top): the labels
// kept and the changes reported never vary, collisions included.
func TestSanitizeLabelsIsDeterministic(t *testing.T) {
	pairs := [][2]string{
		{"a b", "1"}, {"a-b", "3"}, {"a!b", "2"}, {"c d", "1"}, {"c+d", "2"}, {"c=d", "3"}, {"C.io/x", "1"},
		{"c.IO/x", "2"}, {"c.io/x", "3"}, {"k", "v!!"}, {"ünïcode", "ü"}, {"istio.io/rev", "x"}, {"pid", "1"},
	}
	for i := range 300 {
		pairs = append(pairs, [2]string{fmt.Sprintf("t%03d", i), ""})
	}
	build := func(order []int) map[string]string {
		m := make(map[string]string)
		for _, i := range order {
			m[pairs[i][0]] = pairs[i][1]
		}
		return m
	}
	rng := rand.New(rand.NewPCG(1, 2))
	wantLabels, wantChanges := sanitizeLabels("i1", build(rng.Perm(len(pairs))), allowList{})
	if wantLabels["a-b"] != "3" || wantLabels["c-d"] != "1" || wantLabels["c.io/x"] != "3" || len(wantLabels) != MaxInstanceLabels {
		t.Fatalf("unexpected winners: a-b=%q c-d=%q c.io/x=%q, %d labels", wantLabels["a-b"], wantLabels["c-d"],
			wantLabels["c.io/x"], len(wantLabels))
	}
	for range 50 {
		got, changes := sanitizeLabels("i1", build(rng.Perm(len(pairs))), allowList{})
		if !maps.Equal(wantLabels, got) {
			t.Fatalf("labels vary with input order:\n%s", cmp.Diff(wantLabels, got))
		}
		if diff := cmp.Diff(wantChanges, changes); diff != "" {
			t.Fatalf("changes vary with input order (-first +now):\n%s", diff)
		}
	}
}

func TestNewAllowLabels(t *testing.T) {
	cases := map[string]struct {
		allow   []string
		wantErr string // substring; "" = valid
	}{
		"keys and prefixes under reserved prefixes": {
			allow: []string{"topology.istio.io/network", "topology.kubernetes.io/", "istio.io/", "app.kubernetes.io/name", "k8s.io/x"},
		},
		"none":                               {},
		"a meshbridge key":                   {allow: []string{"topology.istio.io/network", "meshbridge.io/service"}, wantErr: `allowLabels[1]: "meshbridge.io/service" is one of meshbridge's ownership`},
		"the meshbridge prefix":              {allow: []string{"meshbridge.io/"}, wantErr: `allowLabels[0]: "meshbridge.io/" would let registries set meshbridge's ownership`},
		"a meshbridge subdomain":             {allow: []string{"x.meshbridge.io/"}, wantErr: `"x.meshbridge.io/" would let registries set`},
		"managed-by":                         {allow: []string{"app.kubernetes.io/managed-by"}, wantErr: `"app.kubernetes.io/managed-by" is one of meshbridge's ownership`},
		"a prefix covering managed-by":       {allow: []string{"app.kubernetes.io/"}, wantErr: `"app.kubernetes.io/" would let registries set`},
		"a key outside the reserved domains": {allow: []string{"example.com/x"}, wantErr: `"example.com/x" is not under a reserved prefix`},
		"a prefix outside them":              {allow: []string{"example.com/"}, wantErr: `"example.com/" is not a reserved prefix`},
		"a prefix without its slash":         {allow: []string{"topology.kubernetes.io"}, wantErr: `"topology.kubernetes.io" is not under a reserved prefix`},
		"an upper-case key":                  {allow: []string{"Topology.Istio.IO/network"}, wantErr: `is neither a label key nor a prefix`},
		"an invalid prefix":                  {allow: []string{"bad prefix/"}, wantErr: `"bad prefix/" is not a label prefix`},
		"an empty entry":                     {allow: []string{""}, wantErr: `allowLabels[0]: "" is neither a label key`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(Options{Registry: "dc1", HostTemplate: consul.HostTemplate, Namespace: "mesh", AllowLabels: tc.allow})
			if verr := ValidateAllowLabels(tc.allow); fmt.Sprint(verr) != fmt.Sprint(err) {
				t.Errorf("ValidateAllowLabels = %v, New = %v", verr, err)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New: error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestReservedLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"meshbridge.io/service": true, "a.meshbridge.io/x": true, "istio.io/rev": true, "security.istio.io/tlsMode": true,
		"a.b.istio.io/x": true, "kubernetes.io/hostname": true, "app.kubernetes.io/name": true, "k8s.io/x": true,
		"topology.kubernetes.io/zone": true,
		"notistio.io/x":               false, "istio.io": false, "istio.io.evil.com/x": false, "example.com/x": false, "version": false,
		"io/x": false,
	} {
		if got := ReservedLabel(key); got != want {
			t.Errorf("ReservedLabel(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestLabelChangeString(t *testing.T) {
	cases := map[string]struct {
		change LabelChange
		want   string
	}{
		"changed": {LabelChange{Key: "k", Value: "v!!", NewKey: "k", NewValue: "v", Reason: ChangeValue}, "k=v!!→k=v"},
		"dropped, non-ASCII quoted": {
			LabelChange{Key: "ünïcode", Value: "ü", Reason: DropInvalidKey}, `"ünïcode"="ü"→dropped`,
		},
		"long values clipped": {
			LabelChange{Key: "k", Value: strings.Repeat("v", 100), NewKey: "k", NewValue: ServiceLabelValue(strings.Repeat("v", 100)), Reason: ChangeTruncated},
			"k=" + strings.Repeat("v", 40) + "…→k=" + ServiceLabelValue(strings.Repeat("v", 100))[:40] + "…",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.change.String(); got != tc.want {
				t.Errorf("String() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestLabelChangesAcrossTranslations follows one service through
// translations, each passing the previous Sticky: a change is Repeated
// while its instance keeps it, and LabelSetChanged is set only when the
// service's set of (raw key, reason) changes, not when an instance with
// the same labels comes or goes.
func TestLabelChangesAcrossTranslations(t *testing.T) {
	bad := map[string]string{"k": "v!!", "ünïcode": "ü", "version": "v1"}
	withLabels := func(id, addr string, labels map[string]string) registries.Instance {
		i := inst(id, addr, 8080, "grpc")
		i.Labels = labels
		return i
	}
	type step struct {
		instances    []registries.Instance
		wantNew      []string // "instance key" of the changes not Repeated
		wantRepeated int
		wantSet      bool
	}
	steps := []step{
		{[]registries.Instance{withLabels("a", "10.0.0.1", bad)}, []string{"a k", "a ünïcode"}, 0, true},
		{[]registries.Instance{withLabels("a", "10.0.0.1", bad)}, nil, 2, false},
		{[]registries.Instance{withLabels("a", "10.0.0.9", bad)}, nil, 2, false},
		{[]registries.Instance{withLabels("a", "10.0.0.9", bad), withLabels("b", "10.0.0.2", bad)}, []string{"b k", "b ünïcode"}, 2, false},
		{[]registries.Instance{withLabels("a", "10.0.0.9", map[string]string{"k": "w!!", "ünïcode": "ü"}), withLabels("b", "10.0.0.2", bad)},
			[]string{"a k"}, 3, false},
		{[]registries.Instance{withLabels("b", "10.0.0.2", bad)}, nil, 2, false},
		{[]registries.Instance{withLabels("b", "10.0.0.2", map[string]string{"k": "v!!", "istio.io/rev": "x"})}, []string{"b istio.io/rev"}, 1, true},
		{[]registries.Instance{withLabels("b", "10.0.0.2", map[string]string{"k": "v"})}, nil, 0, true},
		{[]registries.Instance{withLabels("b", "10.0.0.2", map[string]string{"k": "v"})}, nil, 0, false},
	}
	for _, mode := range []EndpointMode{EndpointsWorkloadEntry, EndpointsInline} {
		t.Run(string(mode), func(t *testing.T) {
			tr := mustNew(t, Options{Endpoints: mode})
			var last Result
			for i, s := range steps {
				svc := registries.Service{Name: "svc", Instances: s.instances}
				res := mustTranslate(t, tr, svc, last.Sticky)
				reusing, err := tr.TranslateReusing(svc, last.Sticky, last)
				if err != nil {
					t.Fatal(err)
				}
				if diff := diffResults(res, reusing); diff != "" {
					t.Fatalf("step %d: TranslateReusing differs from Translate:\n%s", i, diff)
				}
				var gotNew []string
				repeated := 0
				for _, c := range res.LabelChanges {
					if c.Repeated {
						repeated++
					} else {
						gotNew = append(gotNew, c.InstanceID+" "+c.Key)
					}
				}
				if !slices.Equal(gotNew, s.wantNew) || repeated != s.wantRepeated || res.LabelSetChanged != s.wantSet {
					t.Errorf("step %d: new %q, %d repeated, LabelSetChanged %v; want %q, %d, %v",
						i, gotNew, repeated, res.LabelSetChanged, s.wantNew, s.wantRepeated, s.wantSet)
				}
				if len(res.Sticky.LabelChanges) != len(res.LabelChanges) {
					t.Errorf("step %d: Sticky holds %d label changes, Result %d", i, len(res.Sticky.LabelChanges), len(res.LabelChanges))
				}
				last = res
			}
		})
	}
}

// TestInstanceWithThousandsOfLabels: an instance with 5,000 tags keeps its
// endpoint, with MaxInstanceLabels of them; the rest are reported dropped.
// The WorkloadEntry CRD allows 256 labels (MaxInstanceLabels + the selection
// label), which ValidateWorkloadEntry enforces as the API server would.
func TestInstanceWithThousandsOfLabels(t *testing.T) {
	labels := make(map[string]string, 5000)
	for i := range 5000 {
		labels[fmt.Sprintf("tag%04d", i)] = ""
	}
	for _, mode := range []EndpointMode{EndpointsWorkloadEntry, EndpointsInline} {
		t.Run(string(mode), func(t *testing.T) {
			tr := mustNew(t, Options{Endpoints: mode})
			i := inst("n1/a", "10.0.0.1", 8080, "grpc")
			i.Labels = labels
			res := mustTranslate(t, tr, registries.Service{Name: "tags", Instances: []registries.Instance{i}}, Sticky{})
			if len(res.Rejected) != 0 {
				t.Fatalf("rejected: %+v", res.Rejected)
			}
			var spec map[string]string
			if mode == EndpointsInline {
				eps := res.ServiceEntry.ServiceEntry().GetEndpoints()
				if len(eps) != 1 {
					t.Fatalf("%d endpoints, want 1", len(eps))
				}
				spec = eps[0].GetLabels()
			} else {
				if len(res.WorkloadEntries) != 1 {
					t.Fatalf("%d WorkloadEntries, want 1", len(res.WorkloadEntries))
				}
				spec = res.WorkloadEntries[0].Spec().GetLabels()
				delete(spec, "meshbridge.io/service")
			}
			if len(spec) != MaxInstanceLabels || spec["tag0000"] != "" || spec["tag0254"] != "" {
				t.Errorf("%d labels (tag0000 %v, tag0254 %v), want tag0000-tag0254", len(spec), hasKey(spec, "tag0000"), hasKey(spec, "tag0254"))
			}
			if n := len(res.LabelChanges); n != 5000-MaxInstanceLabels || res.LabelChanges[0].Key != "tag0255" ||
				res.LabelChanges[0].Reason != DropTooMany {
				t.Errorf("%d changes, first %+v; want %d too-many-labels from tag0255", n, res.LabelChanges[0], 5000-MaxInstanceLabels)
			}
		})
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
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

// TestLabelSyntaxMatchesApimachinery holds the byte-loop label checks, which
// run on every label of every instance in each translation (about 60 times
// cheaper than apimachinery's regular expressions), to apimachinery's
// IsQualifiedName and IsValidLabelValue on random strings over the
// characters that matter. The one deliberate difference: a prefix label
// over 63 characters, which DNS forbids and apimachinery lets through.
func TestLabelSyntaxMatchesApimachinery(t *testing.T) {
	const alphabet, rare = "aaaaZZ0099-_..//", " !ü"
	rng := rand.New(rand.NewPCG(3, 4))
	random := func() string {
		b := make([]byte, 0, 80)
		for range rng.IntN(80) {
			switch rng.IntN(60) {
			case 0:
				b = append(b, strings.Repeat("a", 30)...)
			case 1:
				b = append(b, rare[rng.IntN(len(rare))])
			default:
				b = append(b, alphabet[rng.IntN(len(alphabet))])
			}
		}
		return string(b)
	}
	inputs := []string{"", "a", "a/b", "a.b/c", "A/b", "-a", "a-", "a/b/c", strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("a", 63) + ".b/c", strings.Repeat("a", 64) + ".b/c", strings.Repeat("a.", 126) + "a/x"}
	for range 20000 {
		inputs = append(inputs, random())
	}
	for _, s := range inputs {
		if got, want := isLabelValue(s), len(validation.IsValidLabelValue(s)) == 0; got != want {
			t.Errorf("isLabelValue(%q) = %v, apimachinery %v", s, got, want)
		}
		want := len(validation.IsQualifiedName(s)) == 0
		if prefix, _, ok := strings.Cut(s, "/"); ok && want && slices.ContainsFunc(strings.Split(prefix, "."), func(l string) bool { return len(l) > 63 }) {
			want = false
		}
		if got := isLabelKey(s); got != want {
			t.Errorf("isLabelKey(%q) = %v, apimachinery %v", s, got, want)
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

func TestSharedLabelMapsTranslateAsEqualOnes(t *testing.T) {
	// Instances holding one label map (registries.Compact) translate
	// exactly as instances holding equal maps: same labels, same changes
	// per instance, whatever the mode.
	tests := map[string]map[string]string{
		"labels as written":  {"version": "v1", "env": "prod"},
		"labels changed":     {"Version!": "v 1", "env": "prod", "meshbridge.io/x": "reserved"},
		"no labels":          nil,
		"one label too long": {"k": strings.Repeat("v", 80)},
	}
	for name, labels := range tests {
		for _, mode := range []EndpointMode{EndpointsWorkloadEntry, EndpointsInline} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				shared := registries.Service{Name: "web"}
				equal := registries.Service{Name: "web"}
				for i := range 4 {
					in := inst(fmt.Sprintf("n/%d", i), fmt.Sprintf("10.0.0.%d", i+1), 8080, "grpc")
					in.Labels = labels
					shared.Instances = append(shared.Instances, in)
					in.Labels = maps.Clone(labels)
					equal.Instances = append(equal.Instances, in)
				}
				// One instance in the middle with other labels breaks the run.
				other := inst("n/x", "10.0.0.99", 8080, "grpc")
				other.Labels = map[string]string{"other": "yes"}
				shared.Instances = slices.Insert(shared.Instances, 2, other)
				equal.Instances = slices.Insert(equal.Instances, 2, other)
				got := mustTranslate(t, mustNew(t, Options{Endpoints: mode}), shared, Sticky{})
				want := mustTranslate(t, mustNew(t, Options{Endpoints: mode}), equal, Sticky{})
				if !slices.Equal(got.LabelChanges, want.LabelChanges) {
					t.Errorf("label changes %+v, want %+v", got.LabelChanges, want.LabelChanges)
				}
				if len(got.WorkloadEntries) != len(want.WorkloadEntries) {
					t.Fatalf("%d WorkloadEntries, want %d", len(got.WorkloadEntries), len(want.WorkloadEntries))
				}
				for i := range got.WorkloadEntries {
					if g, w := got.WorkloadEntries[i], want.WorkloadEntries[i]; g.Hash != w.Hash || !proto.Equal(g.Spec(), w.Spec()) {
						t.Errorf("WorkloadEntry %s differs: %v, want %v", g.Name(), g.Spec(), w.Spec())
					}
				}
				if g, w := got.ServiceEntry, want.ServiceEntry; g.Hash != w.Hash || !proto.Equal(g.Spec, w.Spec) {
					t.Errorf("ServiceEntry differs: %v, want %v", g.Spec, w.Spec)
				}
			})
		}
	}
}

func TestLabelCheck(t *testing.T) {
	valid := map[string]string{"app": "web"}
	invalid := map[string]string{"bad key!": "v"}
	for _, c := range []*labelCheck{{}, nil} {
		for i, step := range []struct {
			labels  map[string]string
			wantErr bool
		}{
			{valid, false}, {valid, false}, {invalid, true}, {invalid, true},
			{maps.Clone(valid), false}, {nil, false}, {valid, false},
		} {
			if err := c.check(step.labels); (err != nil) != step.wantErr {
				t.Errorf("checker %v, step %d: err = %v, want error %v", c != nil, i, err, step.wantErr)
			}
		}
	}
}

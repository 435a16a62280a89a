package translate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

// heavyService is a service with n instances whose 250 labels each are as
// long as label syntax allows (a 199-character prefix, a 63-character name
// and value): about 83 KB of JSON per inline endpoint, so that 20 instances
// make an inline ServiceEntry over MaxObjectBytes and 10 do not.
func heavyService(n int) registries.Service {
	prefix := strings.Join([]string{strings.Repeat("p", 63), strings.Repeat("q", 63), strings.Repeat("r", 63), "example"}, ".")
	labels := make(map[string]string, 250)
	for i := range 250 {
		labels[fmt.Sprintf("%s/k%03d-%s", prefix, i, strings.Repeat("n", 58))] = strings.Repeat("v", 63)
	}
	svc := registries.Service{Name: "heavy"}
	for i := range n {
		svc.Instances = append(svc.Instances, registries.Instance{
			ID: fmt.Sprintf("heavy-%03d", i), Address: fmt.Sprintf("10.1.0.%d", i+1), Port: 8080, Protocol: "http",
			Labels: labels, Locality: "dc1/zone-a",
		})
	}
	return svc
}

// wideService is benchService(n) with every address valid and distinct
// (benchService's 256th addresses are invalid and rejected).
func wideService(n int) registries.Service {
	svc := benchService(n)
	for i := range svc.Instances {
		svc.Instances[i].Address = fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
	}
	return svc
}

// checkResult validates every object of res as the API server and istiod
// would: specs by ValidateServiceEntry / ValidateWorkloadEntry, metadata,
// content hashes, and an inline ServiceEntry against the limits of limits.go.
// diffResults is cmp.Diff of two Results, computed only when a cheap
// comparison finds a difference: with thousands of WorkloadEntries a
// protocmp diff takes seconds under -race. The cheap comparison is exact:
// the objects' names, labels and annotations are compared as maps and the
// specs with proto.Equal.
func diffResults(want, got Result) string {
	same := func(a, b *model.Config) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Meta.Kind == b.Meta.Kind && a.Name == b.Name && a.Namespace == b.Namespace &&
			maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) && proto.Equal(a.Spec, b.Spec)
	}
	equal := want.Host == got.Host && want.Fallback == got.Fallback && same(want.ServiceEntry, got.ServiceEntry) &&
		slices.EqualFunc(model.AsConfigs(want.WorkloadEntries), model.AsConfigs(got.WorkloadEntries), same) &&
		cmp.Equal(want.Rejected, got.Rejected) && cmp.Equal(want.LabelChanges, got.LabelChanges) && want.LabelSetChanged == got.LabelSetChanged &&
		cmp.Equal(want.Sticky, got.Sticky, protocmp.Transform())
	if equal {
		return ""
	}
	return cmp.Diff(want, got, resultOptions)
}

func checkResult(t *testing.T, res Result) {
	t.Helper()
	if res.ServiceEntry == nil {
		t.Fatal("no ServiceEntry")
	}
	for _, c := range append([]*model.Config{res.ServiceEntry}, model.AsConfigs(res.WorkloadEntries)...) {
		var err error
		switch c.Kind {
		case model.KindServiceEntry:
			err = ValidateServiceEntry(c.ServiceEntry())
		case model.KindWorkloadEntry:
			err = ValidateWorkloadEntry(c.WorkloadEntry())
		}
		if err != nil {
			t.Fatalf("%s fails validation: %v", c.Key(), err)
		}
		o, err := toObject(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateMeta(o.APIVersion, o.Metadata); err != nil {
			t.Fatalf("%s: %v", c.Key(), err)
		}
		if got, want := c.ContentHash(), ContentHash(c.Labels, ownAnnotations(c.Annotations), c.Spec); got != want {
			t.Fatalf("%s: content hash %s, recomputed %s", c.Key(), got, want)
		}
	}
	se := res.ServiceEntry.ServiceEntry()
	if n := len(se.GetEndpoints()); n > 0 {
		if n > MaxInlineEndpoints {
			t.Fatalf("inline ServiceEntry has %d endpoints", n)
		}
		size, err := objectJSONSize(res.ServiceEntry)
		if err != nil || size > MaxObjectBytes-storedObjectReserve {
			t.Fatalf("inline ServiceEntry takes %d bytes of JSON (%v)", size, err)
		}
	}
	if (se.GetWorkloadSelector() != nil) != (len(se.GetEndpoints()) == 0) {
		t.Fatalf("ServiceEntry has a selector %v and %d endpoints", se.GetWorkloadSelector(), len(se.GetEndpoints()))
	}
}

// TestInlineFallback pins rule 10: inline mode never writes a ServiceEntry
// past the CRD's 4096 endpoints or past MaxObjectBytes; such a service is
// written exactly as workloadentry mode writes it, and Result.Fallback says
// why.
func TestInlineFallback(t *testing.T) {
	inline := Options{Endpoints: EndpointsInline}
	oneDuplicate := wideService(MaxInlineEndpoints + 1)
	oneDuplicate.Instances[2].Address = oneDuplicate.Instances[0].Address // same port: duplicate-endpoint
	cases := map[string]struct {
		opts          Options
		svc           registries.Service
		wantFallback  string // "" = none
		wantEndpoints int    // inline endpoints, without fallback
		wantWEs       int
	}{
		"4096 endpoints stay inline": {
			opts: inline, svc: wideService(4096), wantEndpoints: 4096,
		},
		"4097 endpoints are written as WorkloadEntries": {
			opts: inline, svc: wideService(4097), wantWEs: 4097,
			wantFallback: "4,097 endpoints exceed the ServiceEntry CRD's limit of 4096 inline endpoints",
		},
		"rejected instances do not count": {
			opts: inline, svc: oneDuplicate, wantEndpoints: 4096,
		},
		"an inline ServiceEntry over MaxObjectBytes is written as WorkloadEntries": {
			opts: inline, svc: heavyService(20), wantWEs: 20,
			wantFallback: "the inline ServiceEntry would take 1,6",
		},
		"a large inline ServiceEntry under MaxObjectBytes stays inline": {
			opts: inline, svc: heavyService(10), wantEndpoints: 10,
		},
		"DNS resolution falls back the same way": {
			opts: Options{Endpoints: EndpointsInline, Resolution: model.ResolutionDNS}, svc: wideService(4097), wantWEs: 4097,
			wantFallback: "4,097 endpoints exceed",
		},
		"workloadentry mode never falls back on the count": {
			svc: wideService(4097), wantWEs: 4097,
		},
		"workloadentry mode never falls back on the size": {
			svc: heavyService(20), wantWEs: 20,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := mustNew(t, tc.opts)
			got := mustTranslate(t, tr, tc.svc, Sticky{})
			checkResult(t, got)
			if !strings.HasPrefix(got.Fallback, tc.wantFallback) || (tc.wantFallback == "") != (got.Fallback == "") {
				t.Errorf("Fallback %q, want %q…", got.Fallback, tc.wantFallback)
			}
			se := got.ServiceEntry.ServiceEntry()
			if len(se.GetEndpoints()) != tc.wantEndpoints || len(got.WorkloadEntries) != tc.wantWEs {
				t.Errorf("%d inline endpoints and %d WorkloadEntries, want %d and %d",
					len(se.GetEndpoints()), len(got.WorkloadEntries), tc.wantEndpoints, tc.wantWEs)
			}
			if got.Fallback == "" {
				return
			}
			weOpts := tc.opts
			weOpts.Endpoints = EndpointsWorkloadEntry
			want := mustTranslate(t, mustNew(t, weOpts), tc.svc, Sticky{})
			got.Fallback, got.Sticky.InlineFallback = "", false
			if diff := diffResults(want, got); diff != "" {
				t.Errorf("fallback differs from workloadentry mode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFallbackWithHostTooLongForWorkloadEntries: inline mode allows hosts
// that cannot name WorkloadEntries; such a service past the limits is an
// error, never an inline ServiceEntry the API server would refuse.
func TestFallbackWithHostTooLongForWorkloadEntries(t *testing.T) {
	svc := wideService(MaxInlineEndpoints + 1)
	svc.Host = strings.Repeat(strings.Repeat("a", 60)+".", 4) + "io"
	_, err := mustNew(t, Options{Endpoints: EndpointsInline}).Translate(svc, Sticky{})
	if err == nil || !strings.Contains(err.Error(), "4,097 endpoints exceed") || !strings.Contains(err.Error(), "longer than 242") {
		t.Fatalf("err = %v, want the fallback reason and the host length", err)
	}
}

// TestTranslateReusingAcrossForms: a service that crosses a limit and comes
// back switches form both ways (back inline only under 90 % of the limits:
// hysteresis); every step equals Translate, and only objects of the form
// emitted are reused.
func TestTranslateReusingAcrossForms(t *testing.T) {
	type step struct {
		svc          registries.Service
		wantFallback bool
		wantSameSE   bool // the ServiceEntry is the previous step's object
		wantSameWEs  int  // WorkloadEntries that are the previous step's objects
	}
	seqs := map[string][]step{
		"endpoint count": {
			{svc: wideService(4096)},
			{svc: wideService(4097), wantFallback: true},
			{svc: wideService(4098), wantFallback: true, wantSameSE: true, wantSameWEs: 4097},
			{svc: wideService(4096), wantFallback: true, wantSameSE: true, wantSameWEs: 4096}, // hysteresis: above 90 %
			{svc: wideService(3600)},
			{svc: wideService(3600), wantSameSE: true},
		},
		"object size": {
			{svc: heavyService(10)},
			{svc: heavyService(20), wantFallback: true},
			{svc: heavyService(21), wantFallback: true, wantSameSE: true, wantSameWEs: 20},
			{svc: heavyService(10)},
			{svc: heavyService(10), wantSameSE: true},
		},
	}
	for name, steps := range seqs {
		t.Run(name, func(t *testing.T) {
			tr := mustNew(t, Options{Endpoints: EndpointsInline})
			var last Result
			for i, st := range steps {
				got, err := tr.TranslateReusing(st.svc, last.Sticky, last)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				checkResult(t, got)
				want := mustTranslate(t, tr, st.svc, last.Sticky)
				if diff := diffResults(want, got); diff != "" {
					t.Fatalf("step %d: TranslateReusing differs from Translate (-want +got):\n%s", i, diff)
				}
				if (got.Fallback != "") != st.wantFallback {
					t.Fatalf("step %d: Fallback %q, want set: %v", i, got.Fallback, st.wantFallback)
				}
				if same := got.ServiceEntry == last.ServiceEntry; same != st.wantSameSE {
					t.Errorf("step %d: ServiceEntry reused: %v, want %v", i, same, st.wantSameSE)
				}
				prev := make(map[*model.WorkloadEntry]bool, len(last.WorkloadEntries))
				for _, we := range last.WorkloadEntries {
					prev[we] = true
				}
				same := 0
				for _, we := range got.WorkloadEntries {
					if prev[we] {
						same++
					}
				}
				if same != st.wantSameWEs {
					t.Errorf("step %d: %d WorkloadEntries reused, want %d", i, same, st.wantSameWEs)
				}
				last = got
			}
		})
	}
}

// TestJSONSize holds the walk (internal/wire's JSON sizes) to the encoding
// it predicts: every ServiceEntry below, as Translate emits it in either
// form, must measure exactly objectJSONSize. internal/wire's tests add
// specs built by hand with every field and every kind of escape.
func TestJSONSize(t *testing.T) {
	escaping := registries.Service{Name: "escaping"}
	for i := range 50 {
		escaping.Instances = append(escaping.Instances, registries.Instance{
			ID: fmt.Sprint(i), Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 80, Weight: 1<<32 - 1,
			Locality: strings.Repeat("<", 2000) + "/" + strings.Repeat(`"`, 10) + `\` + "/&>~",
		})
	}
	dns := registries.Service{Name: "dns"}
	for i := range 100 {
		dns.Instances = append(dns.Instances, inst(fmt.Sprint(i), fmt.Sprintf("h%d.example.com", i), uint32(80+i%3), "http2"))
	}
	longHost := benchService(50)
	longHost.Host = strings.Repeat(strings.Repeat("a", 60)+".", 3) + strings.Repeat("b", 55) + ".io" // 241, WorkloadEntry names fit
	translated := map[string]struct {
		opts Options
		svc  registries.Service
	}{
		"one instance":               {svc: benchService(1)},
		"plain instances":            {svc: benchService(1000)},
		"escaped localities":         {svc: escaping},
		"long labels":                {svc: heavyService(3)},
		"DNS addresses, three ports": {opts: Options{Resolution: model.ResolutionDNS}, svc: dns},
		"long host and a revision":   {opts: Options{Revision: strings.Repeat("r", 63)}, svc: longHost},
		"no instances":               {opts: Options{ServicePort: 80}, svc: registries.Service{Name: "empty"}},
	}
	specs := map[string]*networking.ServiceEntry{}
	tr := mustNew(t, Options{Endpoints: EndpointsInline})
	for name, tc := range translated {
		for _, mode := range []EndpointMode{EndpointsInline, EndpointsWorkloadEntry} {
			opts := tc.opts
			opts.Endpoints = mode
			res := mustTranslate(t, mustNew(t, opts), tc.svc, Sticky{})
			specs[fmt.Sprintf("%s, %s", name, mode)] = res.ServiceEntry.ServiceEntry()
			if res.Fallback != "" {
				t.Fatalf("%s: Fallback %q", name, res.Fallback)
			}
		}
	}
	for name, se := range specs {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				name, namespace string
				annotations     map[string]string
			}{
				{"x.example.com", "mesh", map[string]string{model.AnnotationHash: hashPlaceholder}},
				{"<é>", "", map[string]string{model.AnnotationHash: hashPlaceholder, model.AnnotationDubboMethods: "a,<b>,é"}},
			} {
				labels := tr.ownershipLabels()
				got, ok := serviceEntryObjectJSONSize(c.name, c.namespace, labels, c.annotations, se)
				want, err := objectJSONSize(&model.Config{
					Meta: model.Meta{
						Kind: model.KindServiceEntry, Name: c.name, Namespace: c.namespace, Labels: labels,
						Annotations: c.annotations,
					},
					Spec: se,
				})
				if err != nil || !ok || got != want {
					t.Errorf("%s: walk says %d (ok %v), encoding %d (%v)", c.name, got, ok, want, err)
				}
			}
		})
	}
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 4097: "4,097", 123456: "123,456", 1572864: "1,572,864", -5: "-5"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestInlineFallbackHysteresis: a service in WorkloadEntry form for want of
// room inline goes back inline only under 90 % of the limit, so one
// hovering near 4096 endpoints does not switch form on every change.
func TestInlineFallbackHysteresis(t *testing.T) {
	tr := mustNew(t, Options{Endpoints: EndpointsInline})
	for _, tc := range []struct {
		name     string
		steps    []int // instance counts, translated in turn with the Sticky carried
		wantLast bool  // the last step is in WorkloadEntry form
	}{
		{"over the limit falls back", []int{4097}, true},
		{"just under the limit after a fallback stays", []int{4097, 4000}, true},
		{"at 90 % after a fallback stays", []int{4097, 3687}, true},
		{"under 90 % after a fallback goes back inline", []int{4097, 3686}, false},
		{"near the limit without a fallback stays inline", []int{4000, 4096}, false},
		{"back over after going inline falls back again", []int{4097, 3000, 4097}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prev Sticky
			var res Result
			for _, n := range tc.steps {
				res = mustTranslate(t, tr, wideService(n), prev)
				prev = res.Sticky
			}
			if got := res.Fallback != ""; got != tc.wantLast {
				t.Errorf("after %v: WorkloadEntry form %v (%q), want %v", tc.steps, got, res.Fallback, tc.wantLast)
			}
		})
	}
}

package translate

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
)

func TestRejections(t *testing.T) {
	cases := map[string]struct {
		opts Options
		inst registries.Instance
		want string // "" = accepted
	}{
		"an IPv4 address is accepted":                     {inst: inst("x", "10.0.0.9", 80, "")},
		"an IPv6 address is accepted":                     {inst: inst("x", "2001:db8::1", 80, "")},
		"a hostname under STATIC is rejected":             {opts: Options{Resolution: model.ResolutionStatic}, inst: inst("x", "db.example.com", 80, ""), want: RejectHostnameAddress},
		"a hostname under AUTO (the default) is accepted": {inst: inst("x", "db.example.com", 80, "")},
		"a hostname under DNS is accepted":                {opts: Options{Resolution: model.ResolutionDNS}, inst: inst("x", "db.example.com", 80, "")},
		"an invalid hostname under DNS is rejected":       {opts: Options{Resolution: model.ResolutionDNS}, inst: inst("x", "db..example.com", 80, ""), want: RejectInvalidAddress},
		"an empty address is rejected":                    {inst: inst("x", "", 80, ""), want: RejectInvalidAddress},
		"an out-of-range IPv4 is not a hostname":          {inst: inst("x", "10.0.0.300", 80, ""), want: RejectInvalidAddress},
		"port 0 is rejected":                              {inst: inst("x", "10.0.0.9", 0, ""), want: RejectInvalidPort},
		"a port above 65535 is rejected":                  {inst: inst("x", "10.0.0.9", 65536, ""), want: RejectInvalidPort},
		"a duplicate of an earlier instance by ID":        {inst: inst("z", "10.0.0.1", 8080, ""), want: RejectDuplicateEndpoint},
		"an IPv4-mapped duplicate is still a duplicate":   {inst: inst("z", "::ffff:10.0.0.1", 8080, ""), want: RejectDuplicateEndpoint},
		"the same address on another port is accepted":    {inst: inst("z", "10.0.0.1", 8081, "")},
		"a reused instance ID is rejected":                {inst: inst("a", "10.0.0.2", 8080, ""), want: RejectDuplicateID},
		"an invalid locality is rejected": {
			inst: registries.Instance{ID: "x", Address: "10.0.0.9", Port: 80, Locality: "a/b/c/d"}, want: RejectInvalidLocality,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := registries.Service{Name: "svc", Instances: []registries.Instance{tc.inst, inst("a", "10.0.0.1", 8080, "")}}
			res := mustTranslate(t, mustNew(t, tc.opts), svc, Sticky{})
			var got []string
			for _, r := range res.Rejected {
				if r.Detail == "" {
					t.Errorf("rejection %+v has no detail", r)
				}
				got = append(got, r.InstanceID+" "+r.Reason)
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.inst.ID + " " + tc.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
			if n := len(res.WorkloadEntries) + len(res.Rejected); n != 2 {
				t.Errorf("%d WorkloadEntries + %d rejections, want 2 in all", len(res.WorkloadEntries), len(res.Rejected))
			}
		})
	}
}

func TestObjectsCarryOwnershipLabelsAndHash(t *testing.T) {
	tr := mustNew(t, Options{Revision: "canary"})
	svc := registries.Service{Name: "web", Instances: []registries.Instance{
		{ID: "n1/web-1", Address: "10.0.0.1", Port: 80, Labels: map[string]string{"meshbridge.io/registry": "forged"}},
	}}
	res := mustTranslate(t, tr, svc, Sticky{})
	ownership := map[string]string{
		model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: "consul-dc1", model.LabelRevision: "canary",
	}
	if diff := cmp.Diff(ownership, res.ServiceEntry.Labels); diff != "" {
		t.Errorf("ServiceEntry labels (-want +got):\n%s", diff)
	}
	we := res.WorkloadEntries[0].AsConfig()
	ownership[model.LabelService] = "web.service.consul"
	if diff := cmp.Diff(ownership, we.Labels); diff != "" {
		t.Errorf("WorkloadEntry labels (-want +got):\n%s", diff)
	}
	if want := WorkloadEntryName("web.service.consul", "consul-dc1", "n1/web-1"); we.Name != want {
		t.Errorf("WorkloadEntry name %q, want %q", we.Name, want)
	}
	if got := we.WorkloadEntry().GetLabels(); got[model.LabelService] != "web.service.consul" || got[model.LabelRegistry] != "" {
		t.Errorf("WorkloadEntry spec labels %v: want the selection label and no forged registry label", got)
	}
	for _, c := range []*model.Config{res.ServiceEntry, we} {
		if c.Namespace != "meshbridge" || c.ContentHash() != ContentHash(c.Labels, ownAnnotations(c.Annotations), c.Spec) {
			t.Errorf("%s: namespace %q, hash %q", c.Key(), c.Namespace, c.ContentHash())
		}
	}
}

// TestInstanceLabel: output.instance puts meshbridge.io/instance on every
// object, in both endpoint modes, and the content hash covers it; a
// registry label of that name is dropped (reserved-prefix), whatever the
// allow-list says.
func TestInstanceLabel(t *testing.T) {
	svc := registries.Service{Name: "web", Instances: []registries.Instance{
		{ID: "n1/web-1", Address: "10.0.0.1", Port: 80, Labels: map[string]string{model.LabelInstance: "forged"}},
	}}
	cases := []struct {
		name     string
		opts     Options
		want     string // the label's value; "" = absent
		objects  int
		sameHash bool // the hashes equal those of the translation without an instance
	}{
		{name: "unset: no label", opts: Options{}, objects: 2, sameHash: true},
		{name: "workloadentry mode", opts: Options{Instance: "blue"}, want: "blue", objects: 2},
		{name: "inline mode", opts: Options{Instance: "blue", Endpoints: EndpointsInline}, want: "blue", objects: 1},
		{name: "with a revision", opts: Options{Instance: "a", Revision: "canary"}, want: "a", objects: 2},
		{name: "with an allow-list", opts: Options{Instance: "b", AllowLabels: []string{"topology.istio.io/"}}, want: "b", objects: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustTranslate(t, mustNew(t, c.opts), svc, Sticky{})
			plain := c.opts
			plain.Instance = ""
			base := mustTranslate(t, mustNew(t, plain), svc, Sticky{})
			objs := append([]*model.Config{res.ServiceEntry}, model.AsConfigs(res.WorkloadEntries)...)
			baseObjs := append([]*model.Config{base.ServiceEntry}, model.AsConfigs(base.WorkloadEntries)...)
			if len(objs) != c.objects || len(baseObjs) != c.objects {
				t.Fatalf("%d and %d objects, want %d", len(objs), len(baseObjs), c.objects)
			}
			for i, o := range objs {
				got, ok := o.Labels[model.LabelInstance]
				if got != c.want || ok != (c.want != "") {
					t.Errorf("%s: label %s = %q (present %v), want %q", o.Key(), model.LabelInstance, got, ok, c.want)
				}
				if h := ContentHash(o.Labels, ownAnnotations(o.Annotations), o.Spec); o.ContentHash() != h {
					t.Errorf("%s: content hash %s, recomputed %s", o.Key(), o.ContentHash(), h)
				}
				if same := o.ContentHash() == baseObjs[i].ContentHash(); same != c.sameHash {
					t.Errorf("%s: hash equal to the one without an instance: %v, want %v", o.Key(), same, c.sameHash)
				}
				endpointLabels := []map[string]string{o.WorkloadEntry().GetLabels()}
				for _, ep := range o.ServiceEntry().GetEndpoints() {
					endpointLabels = append(endpointLabels, ep.GetLabels())
				}
				for _, l := range endpointLabels {
					if _, ok := l[model.LabelInstance]; ok {
						t.Errorf("%s: the registry's %s reached the endpoint labels %v", o.Key(), model.LabelInstance, l)
					}
				}
			}
			dropped := false
			for _, lc := range res.LabelChanges {
				dropped = dropped || lc.Key == model.LabelInstance && lc.Reason == DropReservedPrefix && lc.Dropped()
			}
			if !dropped {
				t.Errorf("label changes %+v: want %s dropped as %s", res.LabelChanges, model.LabelInstance, DropReservedPrefix)
			}
		})
	}
}

func TestInlineMode(t *testing.T) {
	tr := mustNew(t, Options{Endpoints: EndpointsInline})
	svc := registries.Service{Name: "web", Instances: []registries.Instance{
		inst("c", "10.0.0.2", 80, "http"), inst("b", "10.0.0.1", 81, "http"), inst("a", "10.0.0.1", 80, "http"),
	}}
	res := mustTranslate(t, tr, svc, Sticky{})
	if len(res.WorkloadEntries) != 0 {
		t.Errorf("inline mode emitted %d WorkloadEntries", len(res.WorkloadEntries))
	}
	se := res.ServiceEntry.ServiceEntry()
	if se.GetWorkloadSelector() != nil {
		t.Error("inline ServiceEntry has a workloadSelector")
	}
	var got []string
	for _, ep := range se.GetEndpoints() {
		got = append(got, fmt.Sprintf("%s %v %v", ep.GetAddress(), ep.GetPorts(), ep.GetLabels()))
	}
	want := []string{"10.0.0.1 map[] map[]", "10.0.0.1 map[http-80:81] map[]", "10.0.0.2 map[] map[]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

// TestDeterministic pins rule 9: the order instances arrive in changes nothing.
func TestDeterministic(t *testing.T) {
	tr := mustNew(t, Options{})
	svc := benchService(30)
	want := mustTranslate(t, tr, svc, Sticky{})
	for i := range 5 {
		shuffled := svc
		shuffled.Instances = append([]registries.Instance(nil), svc.Instances...)
		rand.Shuffle(len(shuffled.Instances), func(a, b int) {
			shuffled.Instances[a], shuffled.Instances[b] = shuffled.Instances[b], shuffled.Instances[a]
		})
		got := mustTranslate(t, tr, shuffled, Sticky{})
		if diff := cmp.Diff(want, got, resultOptions); diff != "" {
			t.Fatalf("shuffle %d changed the result (-want +got):\n%s", i, diff)
		}
	}
}

func TestTranslateDoesNotModifyItsInput(t *testing.T) {
	labels := map[string]string{"build date": "x", "pid": "1"}
	svc := registries.Service{Name: "web", Instances: []registries.Instance{
		{ID: "b", Address: "10.0.0.2", Port: 80, Labels: labels}, {ID: "a", Address: "10.0.0.1", Port: 80},
	}}
	mustTranslate(t, mustNew(t, Options{}), svc, Sticky{})
	if svc.Instances[0].ID != "b" || len(labels) != 2 || labels["build date"] != "x" {
		t.Errorf("input modified: %+v", svc)
	}
}

func TestTranslateConcurrently(t *testing.T) {
	tr := mustNew(t, Options{})
	svc := benchService(20)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if _, err := tr.Translate(svc, Sticky{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

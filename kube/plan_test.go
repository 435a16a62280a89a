package kube

import (
	"maps"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshbridge/meshbridge/model"
)

// Pure tests of the writer's decision (plan, decide) and of what it knows of
// the apiserver (merge): no apiserver.

func planKey(kind model.Kind, ns, name string) model.ConfigKey {
	return model.ConfigKey{Kind: kind, Namespace: ns, Name: name}
}

// desiredObj is a store object of registry whose content hash is
// testHash(hash).
func desiredObj(kind model.Kind, ns, name, registry, hash string) *model.Config {
	c := &model.Config{Meta: model.Meta{Kind: kind, Name: name, Namespace: ns,
		Labels: map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: registry}}}
	if hash != "" {
		c.Hash = model.SumHash([]byte(hash))
	}
	return c
}

// testHash is the annotation value of the content hash named name, as
// desiredObj's objects carry it.
func testHash(name string) string { return model.SumHash([]byte(name)).String() }

// ownedLive is an object with meshbridge's labels for registry, in sync at
// resourceVersion 10.
func ownedLive(registry, hash string) liveState {
	return liveState{managedBy: model.ManagedByValue, registry: registry, hash: testHash(hash), uid: types.UID("uid-" + hash), rv: "10", applied: "10"}
}

// knows is planRules.known for a fixed set of registries.
func knows(registries ...string) func(string) bool {
	return func(r string) bool { return slices.Contains(registries, r) }
}

func (a action) String() string {
	s := a.op + " " + a.key.String()
	if a.op == OpDelete {
		s += " uid=" + string(a.uid)
	}
	return s
}

func TestPlan(t *testing.T) {
	const ns = "mesh"
	se, we := model.KindServiceEntry, model.KindWorkloadEntry
	synced := func(r string) bool { return r == "dc1" }
	edited := ownedLive("dc1", "h1")
	edited.rv = "12" // someone else's write after meshbridge's (10)
	unknownApplied := ownedLive("dc1", "h1")
	unknownApplied.applied = "" // appeared through a watch, written by someone else
	gone := ownedLive("dc1", "h1")
	gone.gone = true
	cases := []struct {
		name    string
		desired []*model.Config
		live    map[model.ConfigKey]liveState
		refused map[model.ConfigKey]string
		synced  func(string) bool
		want    []string
	}{
		{
			name:    "create a desired object that is absent",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			want:    []string{"create ServiceEntry/mesh/a"},
		},
		{
			name:    "update when the content hash differs",
			desired: []*model.Config{desiredObj(we, ns, "a", "dc1", "h2")},
			live:    map[model.ConfigKey]liveState{planKey(we, ns, "a"): ownedLive("dc1", "h1")},
			want:    []string{"update WorkloadEntry/mesh/a"},
		},
		{
			name:    "nothing when the content hash is equal",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "a"): ownedLive("dc1", "h1")},
		},
		{
			name:    "update when there is no content hash",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "a"): ownedLive("dc1", "")},
			want:    []string{"update ServiceEntry/mesh/a"},
		},
		{
			name:    "update an object someone else changed since meshbridge's write, though its hash is equal",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "a"): edited},
			want:    []string{"update ServiceEntry/mesh/a"},
		},
		{
			name:    "update an object of ours not known to be in sync",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "a"): unknownApplied},
			want:    []string{"update ServiceEntry/mesh/a"},
		},
		{
			name: "delete an orphan of a synced registry, with its UID as precondition",
			live: map[model.ConfigKey]liveState{planKey(we, ns, "old"): ownedLive("dc1", "h1")},
			want: []string{"delete WorkloadEntry/mesh/old uid=uid-h1"},
		},
		{
			name: "no delete for a registry that has not synced",
			live: map[model.ConfigKey]liveState{planKey(we, ns, "old"): ownedLive("dc2", "h1")},
		},
		{
			name:   "every registry has synced when synced is nil",
			live:   map[model.ConfigKey]liveState{planKey(we, ns, "old"): ownedLive("dc2", "h1")},
			synced: func(string) bool { return true },
			want:   []string{"delete WorkloadEntry/mesh/old uid=uid-h1"},
		},
		{
			name:    "a desired name held by an object without app.kubernetes.io/managed-by is a conflict",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "a"): {registry: "dc1", hash: testHash("h0"), uid: "u", rv: "3", applied: "3"}},
			want:    []string{"conflict ServiceEntry/mesh/a"},
		},
		{
			name: "an object without app.kubernetes.io/managed-by is never deleted",
			live: map[model.ConfigKey]liveState{planKey(se, ns, "b"): {registry: "dc1", uid: "u", rv: "3", applied: "3"}},
		},
		{
			name:    "managed-by another tool is not ours",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live: map[model.ConfigKey]liveState{
				planKey(se, ns, "a"): {managedBy: "helm", registry: "dc1", rv: "3", applied: "3"},
				planKey(se, ns, "b"): {managedBy: "helm", registry: "dc1", rv: "3", applied: "3"},
			},
			want: []string{"conflict ServiceEntry/mesh/a"},
		},
		{
			name:    "a registry no longer configured is not ours: neither written nor deleted",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live: map[model.ConfigKey]liveState{
				planKey(se, ns, "a"): ownedLive("dc9", "h0"),
				planKey(se, ns, "b"): ownedLive("dc9", "h0"),
			},
			want: []string{"conflict ServiceEntry/mesh/a"},
		},
		{
			name:    "a desired object of a registry not known is not written, nor its name's object deleted",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc9", "h1"), desiredObj(se, ns, "b", "dc9", "h1")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "b"): ownedLive("dc1", "h0")},
		},
		{
			name: "a desired object with an instance label is not written by a writer without one",
			desired: []*model.Config{func() *model.Config {
				c := desiredObj(se, ns, "a", "dc1", "h1")
				c.Labels[model.LabelInstance] = "a"
				return c
			}()},
		},
		{
			name:    "objects of another namespace are left alone",
			desired: []*model.Config{desiredObj(se, "other", "a", "dc1", "h1")},
			live:    map[model.ConfigKey]liveState{planKey(se, "other", "b"): ownedLive("dc1", "h1")},
		},
		{
			name:    "refused content is not sent again",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1"), desiredObj(se, ns, "b", "dc1", "h2")},
			live:    map[model.ConfigKey]liveState{planKey(se, ns, "b"): ownedLive("dc1", "h1")},
			refused: map[model.ConfigKey]string{planKey(se, ns, "a"): testHash("h1"), planKey(se, ns, "b"): testHash("h2")},
		},
		{
			name:    "changed content after a refusal is sent",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h3")},
			refused: map[model.ConfigKey]string{planKey(se, ns, "a"): testHash("h1")},
			want:    []string{"create ServiceEntry/mesh/a"},
		},
		{
			name:    "a deleted object is absent",
			desired: []*model.Config{desiredObj(se, ns, "a", "dc1", "h1")},
			live: map[model.ConfigKey]liveState{
				planKey(se, ns, "a"): gone,
				planKey(se, ns, "b"): gone,
			},
			want: []string{"create ServiceEntry/mesh/a"},
		},
		{
			name: "sorted by op, kind, then name",
			desired: []*model.Config{
				desiredObj(we, ns, "b", "dc1", "h1"), desiredObj(se, ns, "z", "dc1", "h1"), desiredObj(se, ns, "c", "dc1", "h2"),
				desiredObj(se, ns, "y", "dc1", "h1"), desiredObj(we, ns, "a", "dc1", "h1"),
			},
			live: map[model.ConfigKey]liveState{
				planKey(se, ns, "c"): ownedLive("dc1", "h1"),
				planKey(se, ns, "y"): {registry: "dc1"},
				planKey(we, ns, "d"): ownedLive("dc1", "h4"),
				planKey(se, ns, "e"): ownedLive("dc1", "h5"),
			},
			want: []string{
				"create ServiceEntry/mesh/z", "create WorkloadEntry/mesh/a", "create WorkloadEntry/mesh/b",
				"update ServiceEntry/mesh/c",
				"delete ServiceEntry/mesh/e uid=uid-h5", "delete WorkloadEntry/mesh/d uid=uid-h4",
				"conflict ServiceEntry/mesh/y",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules := planRules{namespace: ns, known: knows("dc1", "dc2"), synced: synced}
			if c.synced != nil {
				rules.synced = c.synced
			}
			got := []string{}
			for _, a := range plan(rules, c.desired, c.live, c.refused) {
				if (a.op == OpCreate || a.op == OpUpdate) != (a.desired != nil) {
					t.Errorf("%s carries desired %v", a, a.desired)
				}
				got = append(got, a.String())
			}
			if want := append([]string{}, c.want...); !slices.Equal(got, want) {
				t.Errorf("plan:\n got  %q\n want %q", got, want)
			}
		})
	}
}

// TestMerge: what the writer knows only moves forward in resourceVersion; a
// newer copy from a watch or list keeps the resourceVersion known in sync,
// so plan applies the object again, unless it differs from a copy in sync
// in .status alone (same generation, labels and annotations); a write's
// response is in sync.
func TestMerge(t *testing.T) {
	// at is a copy whose generation (the spec) is gen and whose labels
	// and annotations are meta.
	at := func(uid types.UID, rv, applied string, gen int64, meta uint64) liveState {
		return liveState{managedBy: model.ManagedByValue, registry: "dc1", hash: testHash("h"), uid: uid, rv: rv,
			owned: owned{generation: gen, metadata: meta}, applied: applied}
	}
	tomb := at("u1", "5", "5", 1, 1)
	tomb.gone = true
	cases := []struct {
		name     string
		old      *liveState
		obs      liveState
		src      source
		want     liveState
		wantNews bool
	}{
		{"a write's response is in sync", nil, at("u1", "5", "", 1, 1), fromWrite, at("u1", "5", "5", 1, 1), true},
		{"a write's response after an older copy", ptr(at("u1", "4", "4", 1, 1)), at("u1", "5", "", 2, 1), fromWrite,
			at("u1", "5", "5", 2, 1), true},
		{"a write's response after a newer change was seen", ptr(at("u1", "7", "4", 3, 1)), at("u1", "5", "", 2, 1), fromWrite,
			at("u1", "7", "5", 3, 1), true},
		{"a write's response after a newer status change was seen", ptr(at("u1", "7", "4", 2, 1)), at("u1", "5", "", 2, 1),
			fromWrite, at("u1", "7", "7", 2, 1), true},
		{"a write's response after a newer label change was seen", ptr(at("u1", "7", "4", 2, 9)), at("u1", "5", "", 2, 1),
			fromWrite, at("u1", "7", "5", 2, 9), true},
		{"a list of an unknown object is trusted", nil, at("u1", "5", "5", 1, 1), fromList, at("u1", "5", "5", 1, 1), true},
		{"a list newer than meshbridge's write keeps the write's version", ptr(at("u1", "5", "5", 1, 1)), at("u1", "7", "7", 2, 1),
			fromList, at("u1", "7", "5", 2, 1), true},
		{"a list whose .status alone is newer is in sync", ptr(at("u1", "5", "5", 1, 1)), at("u1", "7", "7", 1, 1), fromList,
			at("u1", "7", "7", 1, 1), true},
		{"a list no newer changes nothing", ptr(at("u1", "7", "5", 2, 1)), at("u1", "7", "7", 2, 1), fromList, at("u1", "7", "5", 2, 1), false},
		{"a list after a delete is trusted", ptr(tomb), at("u2", "9", "9", 1, 1), fromList, at("u2", "9", "9", 1, 1), true},
		{"a list of a replaced object is not in sync", ptr(at("u1", "5", "5", 1, 1)), at("u2", "9", "9", 1, 1), fromList,
			at("u2", "9", "", 1, 1), true},
		{"meshbridge's own write coming back", ptr(at("u1", "5", "5", 1, 1)), at("u1", "5", "5", 1, 1), fromWatch,
			at("u1", "5", "5", 1, 1), false},
		{"an earlier write of meshbridge's coming back late", ptr(at("u1", "6", "6", 2, 1)), at("u1", "5", "5", 1, 1), fromWatch,
			at("u1", "6", "6", 2, 1), false},
		{"someone else's change of the spec", ptr(at("u1", "5", "5", 1, 1)), at("u1", "8", "8", 2, 1), fromWatch,
			at("u1", "8", "5", 2, 1), true},
		{"someone else's change of labels or annotations", ptr(at("u1", "5", "5", 1, 1)), at("u1", "8", "8", 1, 2), fromWatch,
			at("u1", "8", "5", 1, 2), true},
		{"a change of .status alone is in sync", ptr(at("u1", "5", "5", 1, 1)), at("u1", "8", "8", 1, 1), fromWatch,
			at("u1", "8", "8", 1, 1), true},
		{"a change of .status alone after someone else's change is not", ptr(at("u1", "8", "5", 2, 1)), at("u1", "9", "9", 2, 1),
			fromWatch, at("u1", "9", "5", 2, 1), true},
		{"an object created by someone else", nil, at("u1", "5", "5", 1, 1), fromWatch, at("u1", "5", "", 1, 1), true},
		{"an object recreated by someone else", ptr(tomb), at("u2", "9", "9", 1, 1), fromWatch, at("u2", "9", "", 1, 1), true},
		{"a stale event of an older object", ptr(at("u2", "9", "9", 1, 1)), at("u1", "5", "5", 1, 1), fromWatch,
			at("u2", "9", "9", 1, 1), false},
		{"versions that are not integers: a different one is newer", ptr(at("u1", "a", "a", 1, 1)), at("u1", "b", "b", 2, 1),
			fromWatch, at("u1", "b", "a", 2, 1), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var old liveState
			if c.old != nil {
				old = *c.old
			}
			got, news := merge(old, c.old != nil, c.obs, c.src)
			if got != c.want || news != c.wantNews {
				t.Errorf("merge = %+v, %v; want %+v, %v", got, news, c.want, c.wantNews)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestMergeThenDecide plays sequences of what the writer learns (writes'
// responses and watch events, in the orders the apiserver and the watch can
// deliver them) and checks plan's decision at the end: meshbridge's own
// writes and istiod's status writes never make it write again; anyone's
// change of the spec, labels or annotations does.
func TestMergeThenDecide(t *testing.T) {
	key := planKey(model.KindServiceEntry, "mesh", "a")
	desired := desiredObj(model.KindServiceEntry, "mesh", "a", "dc1", "h2")
	// copyAt is a copy at resourceVersion rv with content hash hash and
	// generation gen (the spec's).
	copyAt := func(rv, hash string, gen int64) liveState {
		ann := map[string]string{model.AnnotationHash: testHash(hash)}
		return liveState{managedBy: model.ManagedByValue, registry: "dc1", hash: testHash(hash), uid: "u1", rv: rv,
			owned: owned{generation: gen, metadata: metadataSum(nil, ann)}}
	}
	type step struct {
		obs liveState
		src source
	}
	cases := []struct {
		name  string
		steps []step
		want  string // "" for nothing
	}{
		{"own write, then its event", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("5", "h2", 1), fromWatch}}, ""},
		{"own write's event before its response", []step{{copyAt("5", "h2", 1), fromWatch}, {copyAt("5", "h2", 1), fromWrite}}, ""},
		{"two own writes, the first's event last", []step{{copyAt("5", "h1", 1), fromWrite}, {copyAt("6", "h2", 2), fromWrite},
			{copyAt("6", "h2", 2), fromWatch}, {copyAt("5", "h1", 1), fromWatch}}, ""},
		{"a hand edit of the spec after the write", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("7", "h2", 2), fromWatch}},
			OpUpdate},
		{"a hand edit seen before the write's response", []step{{copyAt("7", "h2", 2), fromWatch}, {copyAt("5", "h2", 1), fromWrite}},
			OpUpdate},
		{"a hand edit of the content hash", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("7", "x", 1), fromWatch}}, OpUpdate},
		{"the repair of a hand edit", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("7", "h2", 2), fromWatch},
			{copyAt("8", "h2", 3), fromWrite}, {copyAt("8", "h2", 3), fromWatch}}, ""},
		{"a restart's list", []step{{copyAt("5", "h2", 1), fromList}}, ""},
		{"istiod's status write after the write", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("5", "h2", 1), fromWatch},
			{copyAt("6", "h2", 1), fromWatch}}, ""},
		{"istiod's status write seen before the write's response", []step{{copyAt("3", "h1", 1), fromList},
			{copyAt("5", "h2", 2), fromWatch}, {copyAt("6", "h2", 2), fromWatch}, {copyAt("5", "h2", 2), fromWrite}}, ""},
		{"istiod's status writes after a restart's list", []step{{copyAt("5", "h2", 1), fromList}, {copyAt("6", "h2", 1), fromWatch},
			{copyAt("9", "h2", 1), fromList}}, ""},
		{"a status write after a hand edit", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("7", "h2", 2), fromWatch},
			{copyAt("8", "h2", 2), fromWatch}}, OpUpdate},
		{"a hand edit after a status write", []step{{copyAt("5", "h2", 1), fromWrite}, {copyAt("6", "h2", 1), fromWatch},
			{copyAt("7", "h2", 2), fromWatch}}, OpUpdate},
	}
	rules := planRules{namespace: "mesh", known: knows("dc1")}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				st  liveState
				had bool
			)
			for _, s := range c.steps {
				st, _ = merge(st, had, s.obs, s.src)
				had = true
			}
			a, ok := rules.decide(key, desired, &st, "")
			got := ""
			if ok {
				got = a.op
			}
			if got != c.want {
				t.Errorf("after %+v: decide = %q, want %q", st, got, c.want)
			}
		})
	}
}

// TestOurs: an object is ours with app.kubernetes.io/managed-by=meshbridge,
// meshbridge.io/instance equal to the writer's instance (absent or empty
// when the writer has none) and a known registry; the list and watch
// selector selects every object that may be ours, whatever its registry.
func TestOurs(t *testing.T) {
	own := func(registry, instance string) map[string]string {
		l := map[string]string{model.LabelManagedBy: model.ManagedByValue, model.LabelRegistry: registry}
		if instance != "" {
			l[model.LabelInstance] = instance
		}
		return l
	}
	with := func(l map[string]string, key, value string) map[string]string {
		l = maps.Clone(l)
		l[key] = value
		return l
	}
	cases := []struct {
		name     string
		instance string // the writer's
		labels   map[string]string
		ours     bool
		selected bool // by the list and watch selector
	}{
		{name: "no instance: a known registry's object", labels: own("dc1", ""), ours: true, selected: true},
		{name: "no instance: an empty instance label", labels: with(own("dc1", ""), model.LabelInstance, ""), ours: true, selected: true},
		{name: "no instance: an unknown registry's object", labels: own("dc9", ""), selected: true},
		{name: "no instance: no registry label", labels: map[string]string{model.LabelManagedBy: model.ManagedByValue}, selected: true},
		{name: "no instance: an object of instance a", labels: own("dc1", "a"), selected: true},
		{name: "no instance: managed by another tool", labels: with(own("dc1", ""), model.LabelManagedBy, "helm")},
		{name: "no instance: no labels", labels: nil},
		{name: "instance a: its own object", instance: "a", labels: own("dc1", "a"), ours: true, selected: true},
		{name: "instance a: an unknown registry's object", instance: "a", labels: own("dc9", "a"), selected: true},
		{name: "instance a: an object of instance b", instance: "a", labels: own("dc1", "b")},
		{name: "instance a: an object without an instance label", instance: "a", labels: own("dc1", "")},
		{name: "instance a: managed by another tool", instance: "a", labels: with(own("dc1", "a"), model.LabelManagedBy, "helm")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := planRules{namespace: "mesh", instance: c.instance, known: knows("dc1", "dc2")}
			st := stateOf(&liveObject{Name: "x", UID: "u", ResourceVersion: "1", Labels: c.labels})
			if got := r.ours(st); got != c.ours {
				t.Errorf("ours(%v) = %v, want %v", c.labels, got, c.ours)
			}
			if got := r.ownsLabels(c.labels); got != c.ours {
				t.Errorf("ownsLabels(%v) = %v, want %v", c.labels, got, c.ours)
			}
			if c.ours && !c.selected {
				t.Fatal("bad case: an object that is ours must be selected")
			}
			sel, err := labels.Parse(r.selector())
			if err != nil {
				t.Fatalf("selector %q: %v", r.selector(), err)
			}
			if got := sel.Matches(labels.Set(c.labels)); got != c.selected {
				t.Errorf("selector %q matches %v: %v, want %v", r.selector(), c.labels, got, c.selected)
			}
		})
	}
}

// TestPlanInstances: writers of different instances sharing a namespace
// and registry names each create, update and delete only their own
// objects; a name held by another instance's object is a conflict.
func TestPlanInstances(t *testing.T) {
	const ns = "mesh"
	se := model.KindServiceEntry
	desiredOf := func(name, instance, hash string) *model.Config {
		c := desiredObj(se, ns, name, "dc1", hash)
		if instance != "" {
			c.Labels[model.LabelInstance] = instance
		}
		return c
	}
	liveOf := func(instance, hash string) liveState {
		st := ownedLive("dc1", hash)
		st.instance = instance
		return st
	}
	// The cluster: each of "", a and b has a current object, an outdated
	// one and an orphan.
	live := map[model.ConfigKey]liveState{}
	for _, inst := range []string{"", "a", "b"} {
		live[planKey(se, ns, "current-"+inst)] = liveOf(inst, "h1")
		live[planKey(se, ns, "outdated-"+inst)] = liveOf(inst, "h1")
		live[planKey(se, ns, "orphan-"+inst)] = liveOf(inst, "h1")
	}
	cases := []struct {
		instance string
		want     []string
	}{
		{"", []string{"create ServiceEntry/mesh/new-", "update ServiceEntry/mesh/outdated-",
			"delete ServiceEntry/mesh/orphan- uid=uid-h1", "conflict ServiceEntry/mesh/current-a"}},
		{"a", []string{"create ServiceEntry/mesh/new-a", "update ServiceEntry/mesh/outdated-a",
			"delete ServiceEntry/mesh/orphan-a uid=uid-h1", "conflict ServiceEntry/mesh/current-b"}},
		{"b", []string{"create ServiceEntry/mesh/new-b", "update ServiceEntry/mesh/outdated-b",
			"delete ServiceEntry/mesh/orphan-b uid=uid-h1", "conflict ServiceEntry/mesh/current-"}},
	}
	other := map[string]string{"": "a", "a": "b", "b": ""}
	for _, c := range cases {
		t.Run("instance "+c.instance, func(t *testing.T) {
			desired := []*model.Config{
				desiredOf("current-"+c.instance, c.instance, "h1"),
				desiredOf("outdated-"+c.instance, c.instance, "h2"),
				desiredOf("new-"+c.instance, c.instance, "h1"),
				// The name of another instance's object.
				desiredOf("current-"+other[c.instance], c.instance, "h1"),
			}
			rules := planRules{namespace: ns, instance: c.instance, known: knows("dc1")}
			got := []string{}
			for _, a := range plan(rules, desired, live, nil) {
				got = append(got, a.String())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("plan:\n got  %q\n want %q", got, c.want)
			}
		})
	}
}

// TestKnownRegistriesGrow: an object of a registry the writer does not know
// is neither updated nor deleted; once the registry is added it is ours,
// and stays ours when nothing desires it any more (a registry removed at
// run time is still known, so its objects are deleted once it is gone).
func TestKnownRegistriesGrow(t *testing.T) {
	const ns = "mesh"
	se := model.KindServiceEntry
	known := newRegistrySet([]string{"dc1"})
	rules := planRules{namespace: ns, known: known.has}
	live := map[model.ConfigKey]liveState{
		planKey(se, ns, "kept"):   ownedLive("dc3", "h1"),
		planKey(se, ns, "orphan"): ownedLive("dc3", "h1"),
	}
	steps := []struct {
		name    string
		add     string
		desired []*model.Config
		want    []string
	}{
		{name: "dc3 not known: its objects are not ours", desired: []*model.Config{desiredObj(se, ns, "kept", "dc3", "h2")}},
		{name: "dc3 added: its objects are ours", add: "dc3", desired: []*model.Config{desiredObj(se, ns, "kept", "dc3", "h2")},
			want: []string{"update ServiceEntry/mesh/kept", "delete ServiceEntry/mesh/orphan uid=uid-h1"}},
		{name: "dc3 added again: no change", add: "dc3", desired: []*model.Config{desiredObj(se, ns, "kept", "dc3", "h2")},
			want: []string{"update ServiceEntry/mesh/kept", "delete ServiceEntry/mesh/orphan uid=uid-h1"}},
		{name: "dc3 removed from the configuration: its objects are deleted",
			want: []string{"delete ServiceEntry/mesh/kept uid=uid-h1", "delete ServiceEntry/mesh/orphan uid=uid-h1"}},
	}
	for _, s := range steps {
		if s.add != "" {
			known.add(s.add)
		}
		got := []string{}
		for _, a := range plan(rules, s.desired, live, nil) {
			got = append(got, a.String())
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: plan:\n got  %q\n want %q", s.name, got, s.want)
		}
	}
}

// TestRegistrySetConcurrent: adds race with reads (run under -race); every
// added name is known at the end, and add reports each as new once.
func TestRegistrySetConcurrent(t *testing.T) {
	s := newRegistrySet([]string{"dc1"})
	names := []string{"dc1", "dc2", "dc3", "dc4", "dc5", "dc6", "dc7", "dc8"}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		added = map[string]int{}
	)
	for range 4 {
		wg.Go(func() {
			for _, n := range names {
				if s.add(n) {
					mu.Lock()
					added[n]++
					mu.Unlock()
				}
				for _, m := range names {
					s.has(m)
				}
			}
		})
	}
	wg.Wait()
	for _, n := range names {
		if !s.has(n) {
			t.Errorf("%s not known", n)
		}
		want := 1
		if n == "dc1" {
			want = 0
		}
		if added[n] != want {
			t.Errorf("add(%s) reported new %d times, want %d", n, added[n], want)
		}
	}
}

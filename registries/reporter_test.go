package registries

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// callLog is a Sink that writes each call as a line: "listing <scope>
// [keys]", "snapshot <key> [ids]" (+ " relist"), "error <key>: <err>",
// "removed <key>" (+ " relist"), "synced". A Removed snapshot the Listing
// before it did not name, or a named removal that does not follow, is a
// line "BREACH ..." (Sink.Listing). serving is what it answers Serving.
type callLog struct {
	lines   []string
	serving []ServiceKey
	named   []ServiceKey // the removals the last Listing named, not yet sent
}

func (c *callLog) Snapshot(s Snapshot) {
	var line string
	switch {
	case s.Err != nil && s.Service.Name == "":
		line = "registry error: " + s.Err.Error()
	case s.Err != nil:
		line = "error " + s.Service.Key().String() + ": " + s.Err.Error()
	case s.Removed:
		line = "removed " + s.Service.Key().String()
		if len(c.named) == 0 || c.named[0] != s.Service.Key() {
			c.lines = append(c.lines, fmt.Sprintf("BREACH removed %s, the listing named %v", s.Service.Key(), c.named))
		} else {
			c.named = c.named[1:]
		}
	default:
		ids := []string{}
		for _, in := range s.Service.Instances {
			ids = append(ids, in.ID)
		}
		line = fmt.Sprintf("snapshot %s %v", s.Service.Key(), ids)
	}
	if s.Relist {
		line += " relist"
	}
	c.lines = append(c.lines, line)
}

func (c *callLog) Synced(string) { c.lines = append(c.lines, "synced") }

func (c *callLog) Listing(_ string, scope Scope, keys, removed []ServiceKey) {
	if len(c.named) > 0 {
		c.lines = append(c.lines, fmt.Sprintf("BREACH named removals %v never sent", c.named))
	}
	c.named = slices.Clone(removed)
	keys = slices.SortedFunc(slices.Values(keys), ServiceKey.Compare)
	c.lines = append(c.lines, fmt.Sprintf("listing %q %v", prefixOf(scope), keys))
}

func (c *callLog) Serving(string) []ServiceKey { return c.serving }

// key is the ServiceKey written "name" or "<namespace>/<group>/<datacenter>/<name>"
// (ServiceKey.String), for short tables.
func key(s string) ServiceKey {
	if p := strings.SplitN(s, "/", 4); len(p) == 4 {
		return ServiceKey{Namespace: p[0], Group: p[1], Datacenter: p[2], Name: p[3]}
	}
	return ServiceKey{Name: s}
}

// keys is key of each of ss.
func keys(ss ...string) []ServiceKey {
	out := make([]ServiceKey, len(ss))
	for i, s := range ss {
		out[i] = key(s)
	}
	return out
}

// scope is the Scope written "" (the whole registry) or "<namespace>/<group>/".
func scope(s string) Scope {
	if p := strings.Split(s, "/"); len(p) == 3 {
		return ScopeOf(p[0], p[1])
	}
	return Scope{}
}

// prefixOf writes sc as scope reads it.
func prefixOf(sc Scope) string {
	if sc == (Scope{}) {
		return ""
	}
	return sc.Namespace + "/" + sc.Group + "/"
}

// svc is service name with instances of the given IDs.
func svc(name string, ids ...string) Service {
	s := Service{Name: name, Instances: []Instance{}}
	for _, id := range ids {
		s.Instances = append(s.Instances, Instance{ID: id, Address: "10.0.0." + id, Port: 80})
	}
	return s
}

// nsSvc is svc in a Nacos-like namespace and group.
func nsSvc(ns, group, name string, ids ...string) Service {
	s := svc(name, ids...)
	s.Namespace, s.Group = ns, group
	return s
}

var errRead = errors.New("read failed")

// TestReporterRules: the Sink calls each sequence of observations makes,
// one case per rule of Reporter.
func TestReporterRules(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step func(r *Reporter)
	read := func(s Service, d time.Duration) step { return func(r *Reporter) { r.Read(s, at(d)) } }
	list := func(sc string, ks ...string) step {
		return func(r *Reporter) { r.Listing(scope(sc), keys(ks...), t0) }
	}
	listAt := func(d time.Duration, sc string, ks ...string) step {
		return func(r *Reporter) { r.Listing(scope(sc), keys(ks...), at(d)) }
	}
	fail := func(name string) step { return func(r *Reporter) { r.Fail(svc(name), errRead, t0) } }
	cases := map[string]struct {
		cfg     ReporterConfig
		serving []string // what the Sink holds as the run starts (rule 8)
		steps   []step
		want    []string
	}{
		"carried: a listing that omits what an earlier run listed removes it, without a re-list mark": {
			serving: []string{"a", "b"},
			steps:   []step{list("", "b"), read(svc("b", "2"), 0)},
			want:    []string{`listing "" [b]`, "removed a", "snapshot b [2]", "synced"},
		},
		"carried: a listed one is this run's: read first, Synced waits for it, later removed as any": {
			serving: []string{"a"},
			steps:   []step{list("", "a"), read(svc("a"), 0), list("")},
			want:    []string{`listing "" [a]`, "snapshot a []", "synced", `listing "" []`, "removed a"},
		},
		"carried: before a listing holds it, a read, a failure or Down sends nothing for it (Down marks the listing's removals)": {
			serving: []string{"a"},
			steps: []step{read(svc("a", "1"), 0), fail("a"),
				func(r *Reporter) { r.Down(Scope{}, errRead, t0) }, list("")},
			want: []string{"registry error: read failed", `listing "" []`, "removed a relist", "synced"},
		},
		"carried: one of a scope no longer read is removed just before Synced": {
			cfg:     ReporterConfig{Scopes: []Scope{scope("ns/G1/")}},
			serving: []string{"ns/G1//a", "ns/G2//b"},
			steps:   []step{list("ns/G1/", "ns/G1//a"), read(nsSvc("ns", "G1", "a", "1"), 0)},
			want: []string{`listing "ns/G1/" [ns/G1//a]`, "snapshot ns/G1//a [1]",
				`listing "ns/G2/" []`, "removed ns/G2//b", "synced"},
		},
		"a listing comes first; Synced follows the first read of each listed service": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b"), 0)},
			want:  []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b []", "synced"},
		},
		"an empty first listing syncs at once": {
			steps: []step{list("")},
			want:  []string{`listing "" []`, "synced"},
		},
		"an equal read sends nothing, in any order": {
			steps: []step{list("", "a"), read(svc("a", "1", "2"), 0), read(svc("a", "2", "1"), 0)},
			want:  []string{`listing "" [a]`, "snapshot a [1 2]", "synced"},
		},
		"a changed read is sent": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0), read(svc("a", "1", "2"), 0)},
			want:  []string{`listing "" [a]`, "snapshot a [1]", "synced", "snapshot a [1 2]"},
		},
		"a changed service field is a change": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0), func(r *Reporter) {
				s := svc("a", "1")
				s.Ports = []Port{{Number: 80}}
				r.Read(s, t0)
			}},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", "snapshot a [1]"},
		},
		"a failure is sent once per run; the read after it is sent even when equal, marked relist": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0), fail("a"), fail("a"), read(svc("a", "1"), 0)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", "error a: read failed",
				"snapshot a [1] relist"},
		},
		"a failed first read does not sync": {
			steps: []step{list("", "a"), fail("a")},
			want:  []string{`listing "" [a]`, "error a: read failed"},
		},
		"a listing sends the removals it brings after it": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b", "2"), 0), list("", "b")},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b [2]", "synced", `listing "" [b]`,
				"removed a"},
		},
		"a service never sent is removed silently": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), list("", "a"), read(svc("b", "3"), 0)},
			want:  []string{`listing "" [a b]`, "snapshot a [1]", `listing "" [a]`, "synced"},
		},
		"a read of a removed service is dropped until a listing holds it again": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0), list(""), read(svc("a", "1"), 0),
				list("", "a"), read(svc("a", "1"), 0)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", `listing "" []`, "removed a",
				`listing "" [a]`, "snapshot a [1]"},
		},
		"a read of a service never listed is dropped": {
			steps: []step{list("", "a"), read(svc("z", "1"), 0)},
			want:  []string{`listing "" [a]`},
		},
		"a partial listing adds and removes nothing, and the Sink does not get it": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0),
				func(r *Reporter) { r.PartialListing(Scope{}, keys("b"), t0) }, read(svc("b", "2"), 0)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", "snapshot b [2]"},
		},
		"a failed listing is sent once per run of the same error, again when it changes": {
			steps: []step{
				func(r *Reporter) { r.FailListing(Scope{}, errors.New("refused"), t0) },
				func(r *Reporter) { r.FailListing(Scope{}, errors.New("refused"), t0) },
				func(r *Reporter) { r.FailListing(Scope{}, errors.New("timeout"), t0) },
				list(""),
				func(r *Reporter) { r.FailListing(Scope{}, errors.New("timeout"), t0) },
			},
			want: []string{"registry error: refused", "registry error: timeout", `listing "" []`, "synced",
				"registry error: timeout"},
		},
		"the listing after a failed one marks its removals relist": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b", "2"), 0),
				func(r *Reporter) { r.FailListing(Scope{}, errRead, t0) }, list("", "b"), list("")},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b [2]", "synced", "registry error: read failed",
				`listing "" [b]`, "removed a relist", `listing "" []`, "removed b"},
		},
		"Down fails the scope and each of its services": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b", "2"), 0),
				func(r *Reporter) { r.Down(Scope{}, errRead, t0) }, read(svc("a", "1"), 0)},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b [2]", "synced", "registry error: read failed",
				"error a: read failed", "error b: read failed", "snapshot a [1] relist"},
		},
		"after Reconnected, each service's next read and the next removals are marked relist": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b", "2"), 0),
				func(r *Reporter) { r.Reconnected(Scope{}, t0) }, read(svc("a"), 0), read(svc("a", "3"), 0), list("", "a")},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b [2]", "synced", "snapshot a [] relist",
				"snapshot a [3]", `listing "" [a]`, "removed b relist"},
		},
		"an unchanged read clears the relist mark": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0), func(r *Reporter) { r.Reconnected(Scope{}, t0) },
				read(svc("a", "1"), 0), read(svc("a"), 0)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", "snapshot a []"},
		},
		"MarkRelist marks one service's next read": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b", "2"), 0),
				func(r *Reporter) { r.MarkRelist(key("a")) }, read(svc("a", "3"), 0), read(svc("b", "3"), 0)},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b [2]", "synced", "snapshot a [3] relist",
				"snapshot b [3]"},
		},
		"Remove lists the scope without the service, then removes it": {
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b", "2"), 0),
				func(r *Reporter) { r.Remove(key("a"), t0) }},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b [2]", "synced", `listing "" [b]`,
				"removed a"},
		},
		"Synced waits for every configured scope": {
			cfg: ReporterConfig{Scopes: []Scope{ScopeOf("ns", "G1"), ScopeOf("ns", "G2")}},
			steps: []step{list("ns/G1/", "ns/G1//a"), read(nsSvc("ns", "G1", "a", "1"), 0), list("ns/G2/"),
				list("ns/G2/")},
			want: []string{`listing "ns/G1/" [ns/G1//a]`, "snapshot ns/G1//a [1]", `listing "ns/G2/" []`, "synced",
				`listing "ns/G2/" []`},
		},
		"a listing removes within its scope only": {
			cfg: ReporterConfig{Scopes: []Scope{ScopeOf("ns", "G1"), ScopeOf("ns", "G2")}},
			steps: []step{list("ns/G1/", "ns/G1//a"), list("ns/G2/", "ns/G2//b"), read(nsSvc("ns", "G1", "a", "1"), 0),
				read(nsSvc("ns", "G2", "b", "2"), 0), list("ns/G2/")},
			want: []string{`listing "ns/G1/" [ns/G1//a]`, `listing "ns/G2/" [ns/G2//b]`, "snapshot ns/G1//a [1]",
				"snapshot ns/G2//b [2]", "synced", `listing "ns/G2/" []`, "removed ns/G2//b"},
		},
		"grace: an empty read right after trouble is held as an error, by whatever path it comes": {
			cfg: ReporterConfig{ReconnectGrace: 30 * time.Second},
			steps: []step{list("", "a"), read(svc("a", "1"), 0),
				func(r *Reporter) { r.Down(Scope{}, errRead, at(time.Second)) },
				read(svc("a"), 2*time.Second), read(svc("a"), 10*time.Second)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", "registry error: read failed",
				"error a: read failed"},
		},
		"grace: an empty read after a reconnection is held, one with instances is sent": {
			cfg: ReporterConfig{ReconnectGrace: 30 * time.Second},
			steps: []step{list("", "a"), read(svc("a", "1"), 0),
				func(r *Reporter) { r.Reconnected(Scope{}, at(time.Second)) },
				read(svc("a"), 2*time.Second), read(svc("a", "2"), 3*time.Second)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced",
				"error a: " + ErrEmptyAfterReconnect.Error(), "snapshot a [2] relist"},
		},
		"grace: an empty read after the grace is sent": {
			cfg: ReporterConfig{ReconnectGrace: 30 * time.Second},
			steps: []step{list("", "a"), read(svc("a", "1"), 0),
				func(r *Reporter) { r.Reconnected(Scope{}, at(time.Second)) },
				read(svc("a"), 2*time.Second), read(svc("a"), 40*time.Second)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced",
				"error a: " + ErrEmptyAfterReconnect.Error(), "snapshot a [] relist"},
		},
		"grace: a listing that omits a service with instances keeps it until the grace ends": {
			cfg: ReporterConfig{ReconnectGrace: 30 * time.Second},
			steps: []step{list("", "a", "b"), read(svc("a", "1"), 0), read(svc("b"), 0),
				func(r *Reporter) { r.Reconnected(Scope{}, at(time.Second)) },
				listAt(2*time.Second, ""), listAt(40*time.Second, "")},
			want: []string{`listing "" [a b]`, "snapshot a [1]", "snapshot b []", "synced",
				`listing "" [a]`, "removed b relist", `listing "" []`, "removed a relist"},
		},
		"grace off: an empty read after a reconnection is sent, marked relist": {
			steps: []step{list("", "a"), read(svc("a", "1"), 0),
				func(r *Reporter) { r.Reconnected(Scope{}, at(time.Second)) }, read(svc("a"), 2*time.Second)},
			want: []string{`listing "" [a]`, "snapshot a [1]", "synced", "snapshot a [] relist"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			log := callLog{serving: keys(tc.serving...)}
			cfg := tc.cfg
			cfg.Registry, cfg.Sink = "r", &log
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			r := NewReporter(cfg)
			for _, s := range tc.steps {
				s(r)
			}
			if diff := cmp.Diff(tc.want, log.lines); diff != "" {
				t.Errorf("Sink calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReporterReadOutcome: what Read returns, and Held and Counts.
func TestReporterReadOutcome(t *testing.T) {
	t0 := time.Now()
	var log callLog
	r := NewReporter(ReporterConfig{Registry: "r", Sink: &log, ReconnectGrace: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Listing(Scope{}, keys("a"), t0)
	steps := []struct {
		s    Service
		want ReadOutcome
	}{
		{svc("z", "1"), ReadDropped},
		{svc("a", "1", "2"), ReadSent},
		{svc("a", "2", "1"), ReadUnchanged},
		{svc("a", "1"), ReadChanged},
	}
	for _, st := range steps {
		if got := r.Read(st.s, t0); got != st.want {
			t.Errorf("Read(%v) = %v, want %v", st.s, got, st.want)
		}
	}
	if s, i := r.Counts(); s != 1 || i != 1 {
		t.Errorf("Counts = %d, %d; want 1 service, 1 instance", s, i)
	}
	r.Reconnected(Scope{}, t0)
	if got := r.Read(svc("a"), t0.Add(time.Second)); got != ReadHeld || !r.Held(key("a")) {
		t.Errorf("Read(empty) after Reconnected = %v, held %v; want ReadHeld, held", got, r.Held(key("a")))
	}
	if got := r.Read(svc("a", "3"), t0.Add(2*time.Second)); got != ReadSent || r.Held(key("a")) {
		t.Errorf("Read after a held read = %v, held %v; want ReadSent, not held", got, r.Held(key("a")))
	}
	if !strings.Contains(log.lines[len(log.lines)-2], ErrEmptyAfterReconnect.Error()) {
		t.Errorf("calls = %v; want the held read sent as ErrEmptyAfterReconnect", log.lines)
	}
}

func TestSameInstances(t *testing.T) {
	labels := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	a := Instance{ID: "a", Address: "10.0.0.1", Port: 80, Labels: labels("v", "1")}
	b := Instance{ID: "b", Address: "10.0.0.2", Port: 80}
	cases := map[string]struct {
		x, y []Instance
		want bool
	}{
		"same order":                   {[]Instance{a, b}, []Instance{a, b}, true},
		"other order":                  {[]Instance{a, b}, []Instance{b, a}, true},
		"duplicates counted":           {[]Instance{a, a, b}, []Instance{a, b, b}, false},
		"a label differs":              {[]Instance{a}, []Instance{{ID: "a", Address: "10.0.0.1", Port: 80, Labels: labels("v", "2")}}, false},
		"extra ports differ":           {[]Instance{b}, []Instance{{ID: "b", Address: "10.0.0.2", Port: 80, Extra: &InstanceExtra{Ports: []Port{{Number: 80}}}}}, false},
		"nil and empty lists are one":  {nil, []Instance{}, true},
		"a missing instance":           {[]Instance{a, b}, []Instance{a}, false},
		"nil and empty labels are one": {[]Instance{b}, []Instance{{ID: "b", Address: "10.0.0.2", Port: 80, Labels: map[string]string{}}}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameInstances(tc.x, tc.y); got != tc.want {
				t.Errorf("SameInstances = %v, want %v", got, tc.want)
			}
		})
	}
}

// scopeSink keeps the Scope of every failed listing it gets.
type scopeSink struct{ scopes []Scope }

func (s *scopeSink) Snapshot(snap Snapshot) {
	if snap.Err != nil && snap.Service.Name == "" {
		s.scopes = append(s.scopes, snap.Scope)
	}
}
func (s *scopeSink) Listing(string, Scope, []ServiceKey, []ServiceKey) {}
func (s *scopeSink) Synced(string)                                     {}
func (s *scopeSink) Serving(string) []ServiceKey                       { return nil }

// TestFailedListingNamesItsScope: a failed listing (FailListing, Down)
// reaches the Sink with the scope that failed, so that the scope's next
// listing can end it.
func TestFailedListingNamesItsScope(t *testing.T) {
	a, b := ScopeOf("public", "DEFAULT_GROUP"), ScopeOf("dev", "DEFAULT_GROUP")
	sink := &scopeSink{}
	r := NewReporter(ReporterConfig{Registry: "r", Sink: sink, Scopes: []Scope{a, b},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	now := time.Now()
	r.FailListing(a, errors.New("list: 500"), now)
	r.Down(b, errors.New("connection lost"), now)
	if want := []Scope{a, b}; !slices.Equal(sink.scopes, want) {
		t.Errorf("failed listings' scopes %v, want %v", sink.scopes, want)
	}
}

package nacos

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
	"github.com/meshbridge/meshbridge/registries/registrytest"
)

// newTestWatcher is a namespace watcher without a connection, its Sink a
// registrytest.Recorder, for the listing rules alone.
func newTestWatcher(t *testing.T, cfg Config) (*nsWatcher, *registrytest.Recorder) {
	t.Helper()
	cfg.Name = "unit"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := registrytest.NewRecorder(t)
	session := registries.NewSession(reg.health, registries.ReporterConfig{Registry: reg.cfg.Name, Sink: rec,
		Scopes: []registries.Scope{registries.ScopeOf("public", DefaultGroup)}, ReconnectGrace: reconnectGrace(reg.cfg), Logger: reg.logger})
	reg.session = session
	return newNSWatcher(reg, session, "public"), rec
}

// drain runs the emitter's work queue to the end.
func (w *nsWatcher) drain() {
	for s, ops := w.next(); s != nil; s, ops = w.next() {
		for _, o := range ops {
			w.process(s, o)
		}
	}
}

// emitRead hands the watcher a read of service name with one instance.
func (w *nsWatcher) emitRead(t *testing.T, group, name string, now time.Time) {
	t.Helper()
	w.mu.Lock()
	s := w.services[svcKey(group, name)]
	w.mu.Unlock()
	if s == nil {
		t.Fatalf("no service %s/%s", group, name)
	}
	w.enqueue(s, op{kind: opRead, from: fromSubscribe, observed: now, info: nacosmodel.Service{
		Hosts: []nacosmodel.Instance{{Ip: "10.0.0.1", Port: 80, Weight: 1, Healthy: true, Enable: true}},
	}})
	w.drain()
}

// TestApplyListing: what a listing adds, keeps and removes (doc.go rules 3,
// 7 and 8).
func TestApplyListing(t *testing.T) {
	now := time.Now()
	enabled := true
	for _, tc := range []struct {
		name        string
		cfg         Config
		listed      []string // first listing: each service is read once
		next        []string // second listing
		partial     bool
		reconnected bool // a reconnection between the two listings
		wantRemoved []string
		wantKept    []string
		wantSkipped int
	}{
		{
			name: "a service missing from a complete listing is removed", listed: []string{"a", "b"}, next: []string{"a"},
			wantRemoved: []string{"b"}, wantKept: []string{"a"},
		},
		{
			name: "a partial listing removes nothing", listed: []string{"a", "b"}, next: []string{"a"}, partial: true,
			wantKept: []string{"a", "b"},
		},
		{
			name: "within a reconnection's grace a missing service stays", listed: []string{"a", "b"}, next: []string{},
			reconnected: true, wantKept: []string{"a", "b"},
		},
		{
			name: "Dubbo names and services outside the allow-list are never services",
			cfg:  Config{Services: []string{"a*", "providers:*"}}, listed: []string{"a1", "providers:com.x.Y:1.0.0:", "b"},
			next: []string{"a1", "providers:com.x.Y:1.0.0:", "b"}, wantKept: []string{"a1"}, wantSkipped: 1,
		},
		{
			name: "with dubbo enabled, providers: names are services; the other categories are not, uncounted",
			cfg:  Config{Dubbo: dubbo.Config{Enabled: &enabled}},
			listed: []string{"a", "providers:com.x.Y:1.0.0:", "consumers:com.x.Y:1.0.0:", "routers:com.x.Y::",
				"configurators:com.x.Y::"},
			next:     []string{"a", "providers:com.x.Y:1.0.0:", "consumers:com.x.Y:1.0.0:"},
			wantKept: []string{"a", "providers:com.x.Y:1.0.0:"},
		},
		{
			name:   "with dubbo enabled the allow-list applies to providers: names",
			cfg:    Config{Dubbo: dubbo.Config{Enabled: &enabled}, Services: []string{"providers:com.x.*"}},
			listed: []string{"a", "providers:com.x.Y::", "providers:com.z.Y::"}, next: []string{"a", "providers:com.x.Y::", "providers:com.z.Y::"},
			wantKept: []string{"providers:com.x.Y::"},
		},
		{
			name:   "dubbo.mode application leaves out providers: names, uncounted",
			cfg:    Config{Dubbo: dubbo.Config{Enabled: &enabled, Mode: dubbo.ModeApplication}},
			listed: []string{"a", "providers:com.x.Y:1.0.0:"}, next: []string{"a", "providers:com.x.Y:1.0.0:"},
			wantKept: []string{"a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, rec := newTestWatcher(t, tc.cfg)
			w.applyListing(nil, DefaultGroup, tc.listed, false, now)
			w.drain()
			w.mu.Lock()
			names := []string{}
			for _, s := range w.services {
				names = append(names, s.name)
			}
			w.mu.Unlock()
			for _, n := range names {
				w.emitRead(t, DefaultGroup, n, now)
			}
			if tc.reconnected {
				w.afterReconnect(now)
			}
			w.applyListing(nil, DefaultGroup, tc.next, tc.partial, now.Add(time.Second))
			w.drain()
			var removed, kept []string
			for _, s := range rec.Snapshots() {
				if s.Removed {
					removed = append(removed, s.Service.Name)
				}
			}
			for k := range rec.State().Good {
				kept = append(kept, k[len(key("public", DefaultGroup, "")):])
			}
			slices.Sort(kept)
			if diff := cmp.Diff(tc.wantRemoved, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantKept, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if st := w.reg.Status(); st.Skipped != tc.wantSkipped {
				t.Errorf("Status.Skipped = %d, want %d", st.Skipped, tc.wantSkipped)
			}
		})
	}
}

// TestDropAliases: Polaris's "<group>__<service>" names in another group's
// listing are dropped when that group lists the service (doc.go rule 3).
func TestDropAliases(t *testing.T) {
	w, _ := newTestWatcher(t, Config{Groups: []string{"DEFAULT_GROUP", "G2"}})
	listings := map[string][]string{
		"DEFAULT_GROUP": {"svc", "G2__svc", "G2__other", "plain__name"},
		"G2":            {"svc"},
	}
	held := w.dropAliases(nil, listings)
	want := map[string][]string{
		"DEFAULT_GROUP": {"svc", "G2__other"}, // G2 lists no "other": a real name
		"G2":            {"svc"},
	}
	// "plain__name": group "plain" is not configured; without a connection
	// its listing fails, so the name is undecided and the listing partial.
	if !held["DEFAULT_GROUP"] {
		t.Errorf("held = %v, want DEFAULT_GROUP held for plain__name", held)
	}
	if diff := cmp.Diff(want, listings); diff != "" {
		t.Errorf("listings (-want +got):\n%s", diff)
	}
}

// TestEmptyReadAfterReconnect: right after a reconnection an empty answer
// for a service that had instances is held as an error (clients re-register
// after their own reconnect); once the grace has passed it is the
// authoritative empty list (doc.go rule 7).
func TestEmptyReadAfterReconnect(t *testing.T) {
	now := time.Now()
	w, rec := newTestWatcher(t, Config{})
	w.applyListing(nil, DefaultGroup, []string{"web"}, false, now)
	w.emitRead(t, DefaultGroup, "web", now)
	w.afterReconnect(now)
	w.mu.Lock()
	s := w.services[svcKey(DefaultGroup, "web")]
	w.mu.Unlock()
	k := key("public", DefaultGroup, "web")

	w.enqueue(s, op{kind: opRead, from: fromSubscribe, observed: now.Add(time.Second)})
	w.drain()
	st := rec.State()
	if last := st.Last[k]; last.Err == nil || len(st.Good[k]) != 1 {
		t.Errorf("after an empty read within the grace: last = %+v, good = %v; want an error, the instance kept", last, st.Good[k])
	}

	w.enqueue(s, op{kind: opRead, from: fromSubscribe, observed: now.Add(minReconnectGrace + time.Second)})
	w.drain()
	if last := rec.State().Last[k]; last.Err != nil || last.Removed || len(last.Service.Instances) != 0 {
		t.Errorf("after the grace: last = %+v, want the authoritative empty list", last)
	}
}

// emitHosts hands the watcher a read of service name with hosts.
func (w *nsWatcher) emitHosts(t *testing.T, group, name string, now time.Time, hosts []nacosmodel.Instance) {
	t.Helper()
	w.mu.Lock()
	s := w.services[svcKey(group, name)]
	w.mu.Unlock()
	if s == nil {
		t.Fatalf("no service %s/%s", group, name)
	}
	w.enqueue(s, op{kind: opRead, from: fromSubscribe, observed: now, info: nacosmodel.Service{Hosts: hosts}})
	w.drain()
}

// TestApplicationLevelReads: a service whose instances turn out to be Dubbo
// 3 application-level instances is skipped and counted (dubbo.enabled
// false), emitted as the application's Dubbo service, or left out uncounted
// (dubbo.mode interface); once application-level it stays so (doc.go rule
// 8).
func TestApplicationLevelReads(t *testing.T) {
	enabled := true
	now := time.Now()
	plain := []nacosmodel.Instance{{Ip: "10.0.0.1", Port: 20880, Weight: 1, Healthy: true, Enable: true}}
	app := []nacosmodel.Instance{{Ip: "10.0.0.1", Port: 20880, Weight: 1, Healthy: true, Enable: true,
		Metadata: map[string]string{"dubbo.endpoints": `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`,
			"dubbo.metadata.revision": "r1"}}}
	shopHost := dubbotest.IdentityHost(dubbo.Identity{Application: "shop"}, "public")
	appInstance := registries.Instance{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Protocol: "dubbo", Weight: 100,
		Extra: &registries.InstanceExtra{Ports: []registries.Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}}}
	for _, tc := range []struct {
		name        string
		dubbo       dubbo.Config
		reads       [][]nacosmodel.Instance
		wantLast    *registries.Service // nil: no service recorded (never emitted, or removed)
		wantRemoved bool
		wantSkipped int
		wantIgnored bool
	}{
		{
			name:  "dubbo disabled: a plain service turning application-level is removed and counted",
			reads: [][]nacosmodel.Instance{plain, app}, wantRemoved: true, wantSkipped: 1,
		},
		{
			name:  "dubbo enabled: the application's Dubbo service, under the Nacos name, namespace and group",
			dubbo: dubbo.Config{Enabled: &enabled}, reads: [][]nacosmodel.Instance{app},
			wantLast: &registries.Service{Name: "shop", Namespace: "public", Group: DefaultGroup, Host: shopHost, PortPerProtocol: true,
				Instances: []registries.Instance{appInstance}},
		},
		{
			name:  "dubbo enabled: a plain service turning application-level becomes the Dubbo service",
			dubbo: dubbo.Config{Enabled: &enabled}, reads: [][]nacosmodel.Instance{plain, app},
			wantLast: &registries.Service{Name: "shop", Namespace: "public", Group: DefaultGroup, Host: shopHost, PortPerProtocol: true,
				Instances: []registries.Instance{appInstance}},
		},
		{
			name:  "dubbo enabled: an application-level service stays one when its instances go, or lose their metadata",
			dubbo: dubbo.Config{Enabled: &enabled}, reads: [][]nacosmodel.Instance{app, nil, plain},
			wantLast: &registries.Service{Name: "shop", Namespace: "public", Group: DefaultGroup, Host: shopHost, PortPerProtocol: true,
				Instances: []registries.Instance{{ID: "10.0.0.1:20880", Address: "10.0.0.1", Port: 20880, Weight: 100}}},
		},
		{
			name:  "dubbo.mode interface: left out, uncounted",
			dubbo: dubbo.Config{Enabled: &enabled, Mode: dubbo.ModeInterface}, reads: [][]nacosmodel.Instance{app},
			wantIgnored: true,
		},
		{
			name:  "dubbo.mode interface: a plain service turning application-level is removed, uncounted",
			dubbo: dubbo.Config{Enabled: &enabled, Mode: dubbo.ModeInterface}, reads: [][]nacosmodel.Instance{plain, app},
			wantRemoved: true, wantIgnored: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, rec := newTestWatcher(t, Config{Dubbo: dubbotest.IdentityTemplates(tc.dubbo)})
			w.applyListing(nil, DefaultGroup, []string{"shop"}, false, now)
			for _, hosts := range tc.reads {
				w.emitHosts(t, DefaultGroup, "shop", now, hosts)
				w.mu.Lock()
				gone := w.services[svcKey(DefaultGroup, "shop")] == nil
				w.mu.Unlock()
				if gone {
					break
				}
			}
			k := key("public", DefaultGroup, "shop")
			last, ok := rec.State().Last[k]
			switch {
			case tc.wantLast == nil && ok:
				t.Errorf("last snapshot = %+v, want none", last)
			case tc.wantLast != nil:
				if diff := cmp.Diff(*tc.wantLast, last.Service); diff != "" || last.Err != nil {
					t.Errorf("last snapshot (-want +got):\n%s (err %v)", diff, last.Err)
				}
			}
			removed := slices.ContainsFunc(rec.Snapshots(), func(s registries.Snapshot) bool { return s.Removed })
			if removed != tc.wantRemoved {
				t.Errorf("removed = %v, want %v", removed, tc.wantRemoved)
			}
			if st := w.reg.Status(); st.Skipped != tc.wantSkipped {
				t.Errorf("Status.Skipped = %d, want %d", st.Skipped, tc.wantSkipped)
			}
			w.mu.Lock()
			ignored := w.ignored[svcKey(DefaultGroup, "shop")]
			w.mu.Unlock()
			if ignored != tc.wantIgnored {
				t.Errorf("ignored = %v, want %v", ignored, tc.wantIgnored)
			}
			// A service left out is not created again by the next listing.
			w.applyListing(nil, DefaultGroup, []string{"shop"}, false, now.Add(time.Second))
			w.mu.Lock()
			recreated := w.services[svcKey(DefaultGroup, "shop")] != nil
			w.mu.Unlock()
			if leftOut := tc.wantSkipped > 0 || tc.wantIgnored; recreated == leftOut {
				t.Errorf("after the next listing: service present = %v, want %v", recreated, !leftOut)
			}
		})
	}
}

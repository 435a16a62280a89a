package policy

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1"
)

func dr(name, host, policy string) string {
	return "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: " + name +
		"\nspec:\n  host: " + host + "\n" + policy
}

const ejection = "  trafficPolicy:\n    outlierDetection:\n      consecutive5xxErrors: 3\n      interval: 1s\n      baseEjectionTime: 5m\n"

// TestParse: documents are read as istiod reads them (Go durations, lower-
// case hosts), validated (rule 2), and other kinds are set aside (rule 1).
func TestParse(t *testing.T) {
	cases := map[string]struct {
		doc     string
		wantErr string // a substring of Object.Err; "" for a valid rule
		ignored bool
	}{
		"outlier detection with Go durations": {doc: dr("a", "Web.Service.Consul", ejection)},
		"a wildcard host":                     {doc: dr("a", `"*.service.consul"`, "")},
		"every host":                          {doc: dr("a", `"*"`, "")},
		"v1beta1":                             {doc: strings.Replace(dr("a", "web", ""), "/v1\n", "/v1beta1\n", 1)},
		"no host":                             {doc: dr("a", `""`, ""), wantErr: "spec.host is empty"},
		"a host that is no DNS name":          {doc: dr("a", "web_1", ""), wantErr: "not a DNS name"},
		"no name": {doc: strings.Replace(dr("a", "web", ""), "name: a", "name: ''", 1),
			wantErr: "metadata.name is empty"},
		"an unknown field": {doc: dr("a", "web", "  trafficPolicy:\n    outlierDetecton: {}\n"), wantErr: "spec:"},
		"a duration below 1ms": {doc: dr("a", "web", "  trafficPolicy:\n    outlierDetection:\n      interval: 10us\n"),
			wantErr: "outlierDetection.interval"},
		"a negative duration": {doc: dr("a", "web", "  trafficPolicy:\n    outlierDetection:\n      baseEjectionTime: -1s\n"),
			wantErr: "baseEjectionTime"},
		"a percentage past 100": {doc: dr("a", "web", "  trafficPolicy:\n    outlierDetection:\n      maxEjectionPercent: 101\n"),
			wantErr: "maxEjectionPercent 101"},
		"negative http2MaxRequests": {doc: dr("a", "web", "  trafficPolicy:\n    connectionPool:\n      http:\n        http2MaxRequests: -1\n"),
			wantErr: "http2MaxRequests -1"},
		"two settings for one port": {doc: dr("a", "web", "  trafficPolicy:\n    portLevelSettings:\n"+
			"    - port: {number: 80}\n    - port: {number: 80}\n"), wantErr: "portLevelSettings[1].port.number 80"},
		"a port-level setting without a port": {doc: dr("a", "web", "  trafficPolicy:\n    portLevelSettings:\n    - {}\n"),
			wantErr: "not a port"},
		"duplicate subsets": {doc: dr("a", "web", "  subsets:\n  - name: v1\n  - name: v1\n"), wantErr: "subsets[1].name"},
		"a subset without a name": {doc: dr("a", "web", "  subsets:\n  - labels: {version: v1}\n"),
			wantErr: "subsets[0].name is empty"},
		"a VirtualService is set aside": {doc: "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec: {}\n",
			ignored: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, ignored, err := Parse("f.yaml", []byte("# a comment\n---\n"+tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ignored {
				if len(ignored) != 1 || len(objs) != 0 {
					t.Fatalf("objects %+v, ignored %+v; want it ignored", objs, ignored)
				}
				return
			}
			if len(objs) != 1 {
				t.Fatalf("objects %+v, want one", objs)
			}
			o := objs[0]
			if o.Source != "f.yaml#1" || o.ID() != "default/a" && o.Err == nil {
				t.Errorf("source %q, id %q", o.Source, o.ID())
			}
			switch {
			case tc.wantErr == "" && o.Err != nil:
				t.Fatalf("error %v", o.Err)
			case tc.wantErr != "" && (o.Err == nil || !strings.Contains(o.Err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", o.Err, tc.wantErr)
			case tc.wantErr == "" && o.Rule.GetHost() != strings.ToLower(o.Rule.GetHost()):
				t.Errorf("host %q not lower-cased", o.Rule.GetHost())
			}
		})
	}
	t.Run("durations", func(t *testing.T) {
		objs, _, _ := Parse("f.yaml", []byte(dr("a", "web", ejection)))
		od := objs[0].Rule.GetTrafficPolicy().GetOutlierDetection()
		if od.GetInterval().AsDuration() != time.Second || od.GetBaseEjectionTime().AsDuration() != 5*time.Minute {
			t.Errorf("interval %v, baseEjectionTime %v", od.GetInterval().AsDuration(), od.GetBaseEjectionTime().AsDuration())
		}
	})
	t.Run("not YAML", func(t *testing.T) {
		if _, _, err := Parse("f.yaml", []byte("a: [")); err == nil {
			t.Error("no error")
		}
	})
}

// TestRulesFor: the host's own rule, else the longest wildcard (rule 4).
func TestRulesFor(t *testing.T) {
	rule := func(host string) *networking.DestinationRule { return &networking.DestinationRule{Host: host} }
	rules := newRules([]*networking.DestinationRule{rule("*"), rule("*.consul"), rule("*.service.consul"),
		rule("web.service.consul")})
	for host, want := range map[string]string{
		"web.service.consul": "web.service.consul",
		"Web.Service.Consul": "web.service.consul",
		"api.service.consul": "*.service.consul",
		"api.node.consul":    "*.consul",
		"consul":             "*",
		"api.nacos":          "*",
	} {
		if got := rules.For(host).GetHost(); got != want {
			t.Errorf("For(%q) = %q, want %q", host, got, want)
		}
	}
	if (*Rules)(nil).For("web") != nil || newRules(nil).For("web") != nil {
		t.Error("no rules matched a host")
	}
}

// TestFiles: the rules a sequence of edits serves: one per host, the first
// winning (rule 3); an invalid edit or an unreadable file keeps the last
// valid version (rule 2); an unchanged rule is the same object (rule 5).
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got *Rules
	changes := 0
	f, err := NewFiles(FilesConfig{Globs: []string{filepath.Join(dir, "*.yaml")},
		OnChange: func(r *Rules) { got, changes = r, changes+1 },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	write("a.yaml", dr("web", "web", ejection)+"---\n"+dr("web-again", "web", ""))
	write("b.yaml", dr("api", "api", ejection))
	f.Read()
	web, api := got.For("web"), got.For("api")
	if got.Len() != 2 || web == nil || api == nil || web.GetTrafficPolicy() == nil {
		t.Fatalf("rules %d, web %v, api %v", got.Len(), web, api)
	}
	if st := f.Status(); len(st.Rejected) != 1 || !strings.Contains(st.Rejected[0].Reason, "default/web, which comes before") {
		t.Errorf("rejected %+v, want web-again for its host", st.Rejected)
	}

	// b.yaml rewritten with the same content, a.yaml with an invalid web.
	write("b.yaml", dr("api", "api", ejection))
	write("a.yaml", dr("web", "web", "  trafficPolicy:\n    outlierDetection:\n      maxEjectionPercent: 200\n"))
	f.Read()
	if got.For("web") != web || got.For("api") != api {
		t.Errorf("an invalid edit or an unchanged rule changed the objects served")
	}
	if changes != 1 {
		t.Errorf("%d changes, want 1: nothing served changed", changes)
	}

	// a.yaml unparseable: its rules stay; then a valid edit replaces web.
	write("a.yaml", "a: [")
	f.Read()
	if got.For("web") != web || len(f.Status().FileErrors) != 1 {
		t.Errorf("an unreadable file dropped its rules (%v) or was not reported (%v)", got.For("web"), f.Status().FileErrors)
	}
	write("a.yaml", dr("web", "web", ""))
	f.Read()
	if w := got.For("web"); w == web || w.GetTrafficPolicy() != nil || got.For("api") != api {
		t.Errorf("after a valid edit: web %v (was %p), api kept %v", w, web, got.For("api") == api)
	}

	// a.yaml removed: web goes.
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	f.Read()
	if got.For("web") != nil || got.For("api") != api {
		t.Errorf("after a.yaml was removed: web %v, api kept %v", got.For("web"), got.For("api") == api)
	}
}

func TestValidateGlob(t *testing.T) {
	for glob, ok := range map[string]bool{"/etc/p/*.yaml": true, "p.yaml": true, "": false, "/etc/*/p.yaml": false, "/etc/[": false} {
		if err := ValidateGlob(glob); (err == nil) != ok {
			t.Errorf("ValidateGlob(%q) = %v, want ok %v", glob, err, ok)
		}
	}
}

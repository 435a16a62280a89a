package policy

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
		"locality failover and distribute": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        distribute: [{from: r1, to: {r2: 100}}]\n        failoverPriority: [tier]\n")},
		"distribute weights not summing to 100": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        distribute: [{from: 'r1/*', to: {r1: 60, r2: 30}}]\n"),
			wantErr: "localityLbSetting.distribute[0].to: the weights sum to 90"},
		"a distribute weight of 0": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        distribute: [{from: r1, to: {r1: 100, r2: 0}}]\n"),
			wantErr: "to[r2]: weight 0 is not in 1-100"},
		"a wildcard in the middle": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        distribute: [{from: '*/z1', to: {r1: 100}}]\n"),
			wantErr: "a wildcard '*' may only be its last part"},
		"distribute and failover": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        distribute: [{from: r1, to: {r1: 100}}]\n        failover: [{from: r1, to: r2}]\n"),
			wantErr: "distribute and failover cannot both be set"},
		"failover to the same region": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        failover: [{from: r1, to: r1}]\n"),
			wantErr: "failover[0]: from and to are the same region"},
		"failover to a zone": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        failover: [{from: r1, to: r2/z1}]\n"),
			wantErr: "failover[0]: from and to are regions"},
		"failover with a topology failoverPriority": {doc: dr("a", "web", "  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n        failover: [{from: r1, to: r2}]\n        failoverPriority: [topology.kubernetes.io/zone]\n"),
			wantErr: "a topology label cannot be set with failover"},
		"negative http2MaxRequests": {doc: dr("a", "web", "  trafficPolicy:\n    connectionPool:\n      http:\n        http2MaxRequests: -1\n"),
			wantErr: "http2MaxRequests -1"},
		"two settings for one port": {doc: dr("a", "web", "  trafficPolicy:\n    portLevelSettings:\n"+
			"    - port: {number: 80}\n    - port: {number: 80}\n"), wantErr: "portLevelSettings[1].port.number 80"},
		"a port-level setting without a port": {doc: dr("a", "web", "  trafficPolicy:\n    portLevelSettings:\n    - {}\n"),
			wantErr: "not a port"},
		"duplicate subsets": {doc: dr("a", "web", "  subsets:\n  - name: v1\n  - name: v1\n"), wantErr: "subsets[1].name"},
		"a subset without a name": {doc: dr("a", "web", "  subsets:\n  - labels: {version: v1}\n"),
			wantErr: "subsets[0].name is empty"},
		"a subset name that is no DNS label": {doc: dr("a", "web", "  subsets:\n  - name: V1\n"),
			wantErr: `subsets[0].name "V1": not a DNS-1123 label`},
		"a subset label that is no label": {doc: dr("a", "web", "  subsets:\n  - name: v1\n    labels: {version: 'v 1'}\n"),
			wantErr: `subsets[0].labels[version]: value "v 1"`},
		"subsets with traffic policies": {doc: dr("a", "web", "  subsets:\n  - name: v1\n    labels: {version: v1}\n"+
			"    trafficPolicy:\n      loadBalancer: {simple: LEAST_REQUEST}\n")},
		"a Gateway is set aside": {doc: "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: {}\n",
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
	byHost := map[string]*networking.DestinationRule{}
	for _, h := range []string{"*", "*.consul", "*.service.consul", "web.service.consul"} {
		byHost[h] = &networking.DestinationRule{Host: h}
	}
	rules := &Rules{destinations: newHostIndex(byHost)}
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
	if (*Rules)(nil).For("web") != nil || (&Rules{}).For("web") != nil {
		t.Error("no rules matched a host")
	}
}

// TestFiles: the rules a sequence of edits serves: one per host, the first
// winning (rule 3); an invalid edit or an unreadable file keeps the last
// valid version (rule 2); an unchanged rule is the same object (rule 5).
func TestFiles(t *testing.T) {
	var got *Rules
	changes := 0
	f, dir, write := testFiles(t, func(r *Rules) { got, changes = r, changes+1 })
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

func vs(name, spec string) string {
	return "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: " + name + "\nspec:\n" + spec
}

const split = "  hosts: [Web.Service.Consul]\n  http:\n  - route:\n    - destination: {host: Web.Service.Consul}\n      weight: 90\n" +
	"    - destination: {host: canary.service.consul, port: {number: 8080}}\n      weight: 10\n    timeout: 200ms\n" +
	"    retries: {attempts: 2, retryOn: unavailable}\n"

// TestParseVirtualService: VirtualServices are read (Go durations, lower-
// case hosts) and validated as istiod does for the fields served and
// their neighbours (rule 2).
func TestParseVirtualService(t *testing.T) {
	route := func(extra string) string {
		return vs("v", "  hosts: [web]\n  http:\n  - route:\n    - destination: {host: web}\n"+extra)
	}
	cases := map[string]struct {
		doc     string
		wantErr string
	}{
		"a split with timeout and retries": {doc: vs("v", split)},
		"a wildcard host":                  {doc: vs("v", "  hosts: [\"*.service.consul\"]\n  http:\n  - route:\n    - destination: {host: web}\n")},
		"no host":                          {doc: vs("v", "  http:\n  - route:\n    - destination: {host: web}\n"), wantErr: "spec.hosts is empty"},
		"\"*\" as a host":                  {doc: vs("v", "  hosts: [\"*\"]\n  http:\n  - route:\n    - destination: {host: web}\n"), wantErr: "not a host for the mesh"},
		"a host twice":                     {doc: vs("v", "  hosts: [web, web]\n  http:\n  - route:\n    - destination: {host: web}\n"), wantErr: "listed before"},
		"no route":                         {doc: vs("v", "  hosts: [web]\n"), wantErr: "no http, tcp or tls route"},
		"an http route routing nowhere":    {doc: vs("v", "  hosts: [web]\n  http:\n  - timeout: 1s\n"), wantErr: "no route, redirect"},
		"weights that do not sum to 100": {doc: vs("v", "  hosts: [web]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: 60\n"+
			"    - destination: {host: b}\n      weight: 30\n"), wantErr: "sum to 90, not 100"},
		"a negative weight":          {doc: route("      weight: -1\n"), wantErr: "weight -1"},
		"a wildcard destination":     {doc: vs("v", "  hosts: [web]\n  http:\n  - route:\n    - destination: {host: \"*.consul\"}\n"), wantErr: "not a wildcard"},
		"a negative timeout":         {doc: route("    timeout: -1s\n"), wantErr: "timeout -1s"},
		"negative attempts":          {doc: route("    retries: {attempts: -1}\n"), wantErr: "attempts -1"},
		"an unknown retry condition": {doc: route("    retries: {attempts: 1, retryOn: \"unavailable,sometimes\"}\n"), wantErr: `retryOn "sometimes"`},
		"a retriable status code":    {doc: route("    retries: {attempts: 1, retryOn: \"503,unavailable\"}\n")},
		"an unknown gRPC status":     {doc: route("    fault: {abort: {grpcStatus: SOMETIMES}}\n"), wantErr: `grpcStatus "SOMETIMES"`},
		"an HTTP status past 599":    {doc: route("    fault: {abort: {httpStatus: 600}}\n"), wantErr: "httpStatus 600"},
		"a fault percentage past 100": {doc: route("    fault: {delay: {fixedDelay: 1s, percentage: {value: 101}}}\n"),
			wantErr: "percentage 101"},
		"a bad regex":          {doc: vs("v", "  hosts: [web]\n  http:\n  - match: [{uri: {regex: \"(\"}}]\n    route:\n    - destination: {host: web}\n"), wantErr: "uri.regex"},
		"an upper-case header": {doc: vs("v", "  hosts: [web]\n  http:\n  - match: [{headers: {X-User: {exact: a}}}]\n    route:\n    - destination: {host: web}\n"), wantErr: "lower case"},
		"an unknown field":     {doc: route("    timeot: 1s\n"), wantErr: "spec:"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, ignored, err := Parse("f.yaml", []byte(tc.doc))
			if err != nil || len(objs) != 1 || len(ignored) != 0 {
				t.Fatalf("objects %+v, ignored %+v, err %v", objs, ignored, err)
			}
			o := objs[0]
			if o.Kind != KindVirtualService {
				t.Fatalf("kind %q", o.Kind)
			}
			switch {
			case tc.wantErr == "" && o.Err != nil:
				t.Fatalf("error %v", o.Err)
			case tc.wantErr != "" && (o.Err == nil || !strings.Contains(o.Err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", o.Err, tc.wantErr)
			}
		})
	}
	objs, _, _ := Parse("f.yaml", []byte(vs("v", split)))
	v := objs[0].Routing
	if v.GetHosts()[0] != "web.service.consul" || v.GetHttp()[0].GetRoute()[0].GetDestination().GetHost() != "web.service.consul" {
		t.Errorf("hosts not lower-cased: %v", v)
	}
	if v.GetHttp()[0].GetTimeout().AsDuration() != 200*time.Millisecond {
		t.Errorf("timeout %v", v.GetHttp()[0].GetTimeout().AsDuration())
	}
}

// TestFilesVirtualServices: a VirtualService is served for each of its
// hosts no earlier one has (rule 8), beside the DestinationRules of the
// same hosts; one bound to gateways only is not served; an invalid edit
// keeps the last valid version; an unchanged one is the same object.
func TestFilesVirtualServices(t *testing.T) {
	var got *Rules
	f, _, write := testFiles(t, func(r *Rules) { got = r })
	two := vs("two", "  hosts: [api, web]\n  http:\n  - route:\n    - destination: {host: api}\n")
	write("a.yaml", vs("web", split)+"---\n"+two+"---\n"+dr("web", "web.service.consul", ejection)+"---\n"+
		vs("gw", "  hosts: [gw]\n  gateways: [ingress]\n  http:\n  - route:\n    - destination: {host: gw}\n"))
	f.Read()
	web, api := got.RoutingFor("Web.Service.Consul"), got.RoutingFor("api")
	if web == nil || api == nil || got.RoutingFor("web") != api || got.RoutingFor("gw") != nil || got.For("web.service.consul") == nil {
		t.Fatalf("web %v, api %v, web %v, gw %v, rule %v", web, api, got.RoutingFor("web"), got.RoutingFor("gw"), got.For("web.service.consul"))
	}
	st := f.Status()
	if len(st.Rules) != 3 || len(st.Rejected) != 1 || !strings.Contains(st.Rejected[0].Reason, "gateways only") {
		t.Errorf("status %+v", st)
	}

	write("a.yaml", vs("web", "  hosts: [web.service.consul]\n  http:\n  - route:\n    - destination: {host: x}\n      weight: 5\n"+
		"    - destination: {host: y}\n      weight: 5\n")+"---\n"+two)
	f.Read()
	if got.RoutingFor("web.service.consul") != web || got.RoutingFor("api") != api {
		t.Errorf("an invalid edit or an unchanged VirtualService changed the objects served")
	}
	if got.For("web.service.consul") != nil {
		t.Errorf("the removed DestinationRule still serves")
	}
}

// TestFilesSubsets: subsets are served, fields of a subset's traffic
// policy no client is served are named with the subset, and a
// VirtualService routing to a subset no DestinationRule defines is named
// in its status, as it is served (a cluster no client finds).
func TestFilesSubsets(t *testing.T) {
	var got *Rules
	f, _, write := testFiles(t, func(r *Rules) { got = r })
	write("a.yaml", dr("web", "web.service.consul", "  subsets:\n  - name: v1\n    labels: {version: v1}\n"+
		"  - name: v2\n    labels: {version: v2}\n    trafficPolicy:\n      tls: {mode: SIMPLE, sni: web.example}\n")+"---\n"+
		vs("web", "  hosts: [web.service.consul]\n  http:\n  - route:\n    - destination: {host: web.service.consul, subset: v1}\n"+
			"      weight: 90\n    - destination: {host: web.service.consul, subset: v3}\n      weight: 10\n"))
	f.Read()
	if len(got.For("web.service.consul").GetSubsets()) != 2 {
		t.Fatalf("rule %v", got.For("web.service.consul"))
	}
	st := f.Status()
	if len(st.Rules) != 2 {
		t.Fatalf("status %+v", st)
	}
	wantDR := []string{"subsets[1].trafficPolicy.tls.sni (gRPC sets no SNI from xDS)"}
	wantVS := []string{"http[0].route[1].destination.subset: v3 (not a subset of web.service.consul's DestinationRule: calls routed to it fail)"}
	if !slices.Equal(st.Rules[0].Unserved, wantDR) || !slices.Equal(st.Rules[1].Unserved, wantVS) {
		t.Errorf("unserved %q and %q, want %q and %q", st.Rules[0].Unserved, st.Rules[1].Unserved, wantDR, wantVS)
	}
}

// TestFilesUnenforced: a DestinationRule's http2MaxRequests, at the top,
// per port and in a subset, is served and named in the rule's status as
// what grpc-java accepts without applying; a rule without it names
// nothing.
func TestFilesUnenforced(t *testing.T) {
	f, _, write := testFiles(t, func(*Rules) {})
	write("a.yaml", dr("web", "web.service.consul", "  trafficPolicy:\n    connectionPool: {http: {http2MaxRequests: 10}}\n"+
		"    portLevelSettings:\n    - port: {number: 80}\n      connectionPool: {http: {http2MaxRequests: 5}}\n"+
		"  subsets:\n  - name: v1\n    labels: {version: v1}\n    trafficPolicy:\n      connectionPool: {http: {http2MaxRequests: 2}}\n")+
		"---\n"+dr("api", "api.service.consul", "  trafficPolicy:\n    outlierDetection: {consecutive5xxErrors: 3}\n"))
	f.Read()
	st := f.Status()
	if len(st.Rules) != 2 {
		t.Fatalf("status %+v", st)
	}
	const grpcJava = " (not enforced by grpc-java, which counts calls in flight only with load reporting)"
	want := []string{"connectionPool.http.http2MaxRequests" + grpcJava,
		"portLevelSettings[0].connectionPool.http.http2MaxRequests" + grpcJava,
		"subsets[0].trafficPolicy.connectionPool.http.http2MaxRequests" + grpcJava}
	for _, r := range st.Rules {
		switch r.Host {
		case "web.service.consul":
			if !slices.Equal(r.Unenforced, want) || len(r.Unserved) != 0 {
				t.Errorf("web: unenforced %q, unserved %q; want %q and none", r.Unenforced, r.Unserved, want)
			}
		default:
			if len(r.Unenforced) != 0 {
				t.Errorf("%s: unenforced %q, want none", r.Host, r.Unenforced)
			}
		}
	}
}

// testFiles returns a Source following *.yaml in a new directory, calling
// onChange, the directory, and a function writing a file there.
func testFiles(t *testing.T, onChange func(*Rules)) (f *Source, dir string, write func(name, content string)) {
	t.Helper()
	dir = t.TempDir()
	f, err := New(Config{Globs: []string{filepath.Join(dir, "*.yaml")}, OnChange: onChange,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return f, dir, func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

package translate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// Fuzz input flags: the endpoint mode, the resolution, the allow-list, the
// revision and instance, and the host templates of the Translator.
const (
	fuzzInline      = 1 << 0
	fuzzDNS         = 1 << 1
	fuzzAllowLabels = 1 << 2
	fuzzRevision    = 1 << 3 // and an instance
	fuzzTemplates   = 3 << 4 // consul's, the default, a Nacos-style one, or custom ones
)

// fuzzOptions are the Options that flags and servicePort select.
func fuzzOptions(flags uint8, servicePort uint32) Options {
	o := Options{Registry: "fuzz", Namespace: "mesh", ServicePort: servicePort,
		Resolution: model.ResolutionStatic, Endpoints: EndpointsWorkloadEntry}
	if flags&fuzzInline != 0 {
		o.Endpoints = EndpointsInline
	}
	if flags&fuzzDNS != 0 {
		o.Resolution = model.ResolutionDNS
	}
	if flags&fuzzAllowLabels != 0 {
		o.AllowLabels = []string{"topology.istio.io/network", "topology.kubernetes.io/"}
	}
	if flags&fuzzRevision != 0 {
		o.Revision = "canary"
		o.Instance = "blue"
	}
	switch (flags & fuzzTemplates) >> 4 {
	case 0:
		o.HostTemplate = consul.HostTemplate
	case 1:
		o.HostTemplate = DefaultHostTemplate
	case 2:
		o.HostTemplate = "{{.Service}}.{{.Group}}.{{.Namespace}}.nacos"
	case 3:
		o.HostTemplate = "{{.Namespace}}.{{.Group}}.{{.Service}}.{{.Datacenter}}"
	}
	return o
}

// fuzzDubbo is the Builder that names the Dubbo services of the options
// flags select (package registries/dubbo): its default host templates, or
// custom ones with the custom host template.
func fuzzDubbo(t *testing.T, flags uint8) *dubbo.Builder {
	var c dubbo.Config
	if (flags&fuzzTemplates)>>4 == 3 {
		c.InterfaceHostTemplate = "{{.Interface}}.{{.Version}}.{{.Application}}"
		c.ApplicationHostTemplate = "{{.Application}}.{{.Namespace}}.svc"
	}
	b, err := dubbo.NewBuilder(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitEscaped splits s on sep; a backslash makes the byte after it
// literal (kept escaped: unescape the leaves).
func splitEscaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unescape drops the backslash before each escaped byte.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// fuzzFields splits s on sep into exactly n unescaped fields, missing ones
// "".
func fuzzFields(s string, sep byte, n int) []string {
	parts := splitEscaped(s, sep)
	out := make([]string, n)
	for i := range min(n, len(parts)) {
		out[i] = unescape(parts[i])
	}
	return out
}

// fuzzNumber parses a decimal uint32; anything else is 0.
func fuzzNumber(s string) uint32 {
	n, _ := strconv.ParseUint(s, 10, 32)
	return uint32(n)
}

// fuzzPorts decodes "number/protocol,number/protocol".
func fuzzPorts(s string) []registries.Port {
	if s == "" {
		return nil
	}
	var out []registries.Port
	for _, p := range splitEscaped(s, ',') {
		f := fuzzFields(p, '/', 2)
		out = append(out, registries.Port{Number: fuzzNumber(f[0]), Protocol: f[1]})
	}
	return out
}

// fuzzList decodes "a,b,c"; "" is nil.
func fuzzList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range splitEscaped(s, ',') {
		out = append(out, unescape(p))
	}
	return out
}

// fuzzLabels decodes "key=value;key=value" (the value runs from the first
// '=' on; a key without one has the value ""); "" is nil.
func fuzzLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	for _, kv := range splitEscaped(s, ';') {
		key := splitEscaped(kv, '=')[0]
		out[unescape(key)] = unescape(strings.TrimPrefix(kv[len(key):], "="))
	}
	return out
}

// fuzzService decodes a service: its first line is
// "name|host|datacenter|namespace|group|ports|dubbo", dubbo being
// "interface,group,version,application" and present (even empty) on a Dubbo
// service, which b names as package registries/dubbo does (a host set
// wins); each further non-empty line is an instance,
// "id|address|port|protocol|weight|locality|labels|ports|methods|invalid".
// A backslash makes the byte after it literal.
func fuzzService(input string, b *dubbo.Builder) registries.Service {
	lines := splitEscaped(input, '\n')
	raw := splitEscaped(lines[0], '|')
	f := fuzzFields(lines[0], '|', 7)
	svc := registries.Service{Name: f[0], Host: f[1], Datacenter: f[2], Namespace: f[3], Group: f[4],
		Ports: fuzzPorts(f[5])}
	isDubbo := len(raw) >= 7
	for _, line := range lines[1:] {
		if line == "" {
			continue
		}
		raw := splitEscaped(line, '|')
		f := fuzzFields(line, '|', 10)
		inst := registries.Instance{ID: f[0], Address: f[1], Port: fuzzNumber(f[2]), Protocol: f[3],
			Weight: fuzzNumber(f[4]), Locality: f[5]}
		if len(raw) > 6 {
			inst.Labels = fuzzLabels(raw[6])
		}
		extra := registries.InstanceExtra{Invalid: f[9]}
		if len(raw) > 7 {
			extra.Ports = fuzzPorts(raw[7])
		}
		if len(raw) > 8 {
			extra.Methods = fuzzList(raw[8])
		}
		if extra.Ports != nil || extra.Methods != nil || extra.Invalid != "" {
			inst.Extra = &extra
		}
		svc.Instances = append(svc.Instances, inst)
	}
	if isDubbo {
		d := fuzzFields(raw[6], ',', 4)
		named := b.Named(dubbo.Identity{Interface: d[0], Group: d[1], Version: d[2], Application: d[3]},
			svc.Name, svc.Namespace, svc.Instances)
		named.Datacenter, named.Group, named.Ports = svc.Datacenter, svc.Group, svc.Ports
		if svc.Host != "" {
			named.Host, named.HostError = svc.Host, ""
		}
		svc = named
	}
	return svc
}

// FuzzTranslate translates services decoded from the fuzz input (see
// fuzzService) under the options flags select, and checks that Translate
// never panics and either fails at the service level or returns objects
// that pass ValidateServiceEntry or ValidateWorkloadEntry, the golden
// test's metadata rules, the API server's metadata validation and their
// content hash, also once rendered as YAML and parsed back; that it is
// deterministic; that TranslateReusing gives what Translate gives; and that
// translating again with the returned Sticky gives the same objects.
func FuzzTranslate(f *testing.F) {
	f.Add(uint8(0), uint32(0), uint32(0), "",
		"web|||||\n"+
			"n1/web-1|10.0.0.1|8080|http|100|dc1/z1/r1|version=v1;primary||||\n"+
			"n2/web-2|10.0.0.2|8080|http|200|dc1/z2|version=v2|||")
	f.Add(uint8(fuzzInline|fuzzDNS|1<<4), uint32(0), uint32(0), "",
		"db.example.com|DB.Example.com||||5432/tcp,8080/http\n"+
			"a|db-1.example.com|5432||||||\n"+
			"b|::ffff:10.0.0.1|5432|tcp|0|||||\n"+
			"c|fe80::1%eth0|5432||||||\n"+
			"d|not an address|5432||||||")
	f.Add(uint8(fuzzAllowLabels|fuzzRevision|2<<4), uint32(9090), uint32(80), "grpc",
		"svc|||ns1|DEFAULT_GROUP|\n"+
			"i1|10.1.0.1|80|grpc||eu/eu-1/rack-1|topology.istio.io/network=n1;meshbridge.io/service=evil;Bad Key!=v;k=\xff\xfe;long="+
			strings.Repeat("x", 70)+"||||\n"+
			"i1|10.1.0.2|80||||||\n"+
			"i2|10.1.0.1|80||||||\n"+
			"i3|10.1.0.3|0||||||\n"+
			"i4|10.1.0.4|70000||||||\n"+
			"i5|||||||||registry entry unreadable")
	f.Add(uint8(0), uint32(0), uint32(20880), "dubbo",
		"providers:com.foo.DemoService:1.0.0:g1||||||com.foo.DemoService,g1,1.0.0,demo-app\n"+
			"10.0.0.1:20880|10.0.0.1|20880|dubbo|||application=demo-app;side=provider|20880/dubbo,50051/tri|sayHello,greet||\n"+
			"10.0.0.2:20880|10.0.0.2|20880|dubbo|||application=demo-app||sayHello,greet,$invoke||\n"+
			"bad|||||||||malformed provider URL")
	f.Add(uint8(fuzzInline|3<<4), uint32(0), uint32(0), "",
		"demo-app|||ns1|||,,,demo-app\n"+
			"10.0.0.1:20880|10.0.0.1|20880|tri||||20880/tri,20881/dubbo|a,b||\n"+
			"10.0.0.1:20881|10.0.0.1|20881|dubbo||||||")
	f.Add(uint8(1<<4), uint32(0), uint32(0), "", // a 242-character host: the longest WorkloadEntries can name
		strings.Repeat(strings.Repeat("a", 63)+".", 3)+strings.Repeat("b", 46)+".svc|||||\ni|10.0.0.1|80||||||")

	f.Fuzz(func(t *testing.T, flags uint8, servicePort, prevPort uint32, prevProtocol, input string) {
		opts := fuzzOptions(flags, servicePort)
		tr, err := New(opts)
		if err != nil {
			if servicePort <= 65535 {
				t.Fatalf("New(%+v): %v", opts, err)
			}
			return
		}
		svc := fuzzService(input, fuzzDubbo(t, flags))
		var prev Sticky
		if prevPort != 0 {
			prev.Port = prevPort
			if prevProtocol != "" {
				prev.Protocol = ParseProtocol(prevProtocol)
			}
		}
		res, err := tr.Translate(svc, prev)
		again, errAgain := tr.Translate(svc, prev)
		if fmt.Sprint(err) != fmt.Sprint(errAgain) {
			t.Fatalf("Translate is not deterministic: error %v, then %v", err, errAgain)
		}
		if err != nil {
			if res.ServiceEntry != nil || len(res.WorkloadEntries) > 0 {
				t.Fatalf("Translate failed (%v) but returned objects", err)
			}
			return
		}
		checkFuzzResult(t, tr.Options(), res)
		want := fuzzSummary(t, res, true)
		if got := fuzzSummary(t, again, true); got != want {
			t.Fatalf("Translate is not deterministic:\n%s\nthen\n%s", want, got)
		}
		reused, err := tr.TranslateReusing(svc, prev, res)
		if err != nil {
			t.Fatalf("TranslateReusing failed where Translate did not: %v", err)
		}
		if got := fuzzSummary(t, reused, true); got != want {
			t.Fatalf("TranslateReusing differs from Translate:\n%s\nthen\n%s", want, got)
		}
		next, err := tr.Translate(svc, res.Sticky)
		if err != nil {
			t.Fatalf("Translate with the returned Sticky failed: %v", err)
		}
		checkFuzzResult(t, tr.Options(), next)
		if got, want := fuzzSummary(t, next, false), fuzzSummary(t, res, false); got != want {
			t.Fatalf("Translate with the returned Sticky changed the objects:\n%s\nthen\n%s", want, got)
		}
	})
}

// fuzzSummary renders what a Result says: its objects as YAML and, with
// all, its other fields; without, only the ports Sticky keeps.
func fuzzSummary(t *testing.T, res Result, all bool) string {
	t.Helper()
	y, err := ToYAML(fuzzConfigs(res))
	if err != nil {
		t.Fatalf("ToYAML: %v", err)
	}
	s := res.Sticky
	out := fmt.Sprintf("%s\nhost %s, sticky %d %s %v", y, res.Host, s.Port, s.Protocol, s.ProtocolPorts)
	if all {
		out += fmt.Sprintf("\nfallback %q\nrejected %q\nlabel changes %q (changed %v)\nsticky changes %q",
			res.Fallback, res.Rejected, res.LabelChanges, res.LabelSetChanged, s.LabelChanges)
	}
	return out
}

func fuzzConfigs(res Result) []*model.Config {
	var cfgs []*model.Config
	if res.ServiceEntry != nil {
		cfgs = append(cfgs, res.ServiceEntry)
	}
	return append(cfgs, model.AsConfigs(res.WorkloadEntries)...)
}

// checkFuzzResult checks every object of res: its spec is valid, its
// metadata passes the golden test's rules and the API server's validation
// (name, namespace, labels, annotations), its content hash is ContentHash
// recomputed, and its YAML passes validateGolden (parsed back, the same
// checks hold).
func checkFuzzResult(t *testing.T, opts Options, res Result) {
	t.Helper()
	if se := res.ServiceEntry; se != nil && (se.Name != res.Host || se.Kind != model.KindServiceEntry) {
		t.Fatalf("ServiceEntry %s %q for host %q", se.Kind, se.Name, res.Host)
	}
	if res.ServiceEntry == nil && len(res.WorkloadEntries) > 0 {
		t.Fatalf("%d WorkloadEntries without a ServiceEntry", len(res.WorkloadEntries))
	}
	if len(res.WorkloadEntries) > 0 && opts.Endpoints == EndpointsInline && res.Fallback == "" {
		t.Fatalf("inline mode emitted %d WorkloadEntries without a Fallback", len(res.WorkloadEntries))
	}
	names := map[string]bool{}
	for _, c := range fuzzConfigs(res) {
		if names[c.Name] {
			t.Fatalf("two objects named %q", c.Name)
		}
		names[c.Name] = true
		var err error
		switch c.Kind {
		case model.KindServiceEntry:
			err = ValidateServiceEntry(c.ServiceEntry())
		case model.KindWorkloadEntry:
			err = ValidateWorkloadEntry(c.WorkloadEntry())
			if err == nil {
				err = k8sLabels(c.WorkloadEntry().GetLabels(), field.NewPath("spec", "labels"))
			}
		default:
			t.Fatalf("%s %q: unexpected kind", c.Kind, c.Name)
		}
		if err != nil {
			t.Fatalf("%s %q fails validation: %v", c.Kind, c.Name, err)
		}
		for _, ep := range c.ServiceEntry().GetEndpoints() {
			if err := k8sLabels(ep.GetLabels(), field.NewPath("spec", "endpoints", "labels")); err != nil {
				t.Fatalf("%s %q: %v", c.Kind, c.Name, err)
			}
		}
		if err := validateMeta(model.APIVersion, objectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels,
			Annotations: c.Annotations}); err != nil {
			t.Fatalf("%s %q: %v", c.Kind, c.Name, err)
		}
		meta := &metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations}
		if errs := apivalidation.ValidateObjectMeta(meta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")); len(errs) > 0 {
			t.Fatalf("%s %q: the API server would refuse its metadata: %v", c.Kind, c.Name, errs.ToAggregate())
		}
		for k, v := range c.Annotations {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Fatalf("%s %q: annotation %q: %q is not UTF-8 (JSON would replace bytes, proto3 cannot marshal it)",
					c.Kind, c.Name, k, v)
			}
		}
		if got, want := c.ContentHash(), ContentHash(c.Labels, ownAnnotations(c.Annotations), c.Spec); got != want {
			t.Fatalf("%s %q: content hash %s, recomputed %s", c.Kind, c.Name, got, want)
		}
		if opts.Revision != "" && c.Labels[model.LabelRevision] != opts.Revision {
			t.Fatalf("%s %q: labels %v without %s=%s", c.Kind, c.Name, c.Labels, model.LabelRevision, opts.Revision)
		}
		if c.Labels[model.LabelInstance] != opts.Instance {
			t.Fatalf("%s %q: labels %v, want %s=%q", c.Kind, c.Name, c.Labels, model.LabelInstance, opts.Instance)
		}
	}
	y, err := ToYAML(fuzzConfigs(res))
	if err != nil {
		t.Fatalf("ToYAML: %v", err)
	}
	validateGolden(t, y)
}

// k8sLabels applies the API server's label rules (Istio validates
// WorkloadEntry labels with the same ones).
func k8sLabels(labels map[string]string, path *field.Path) error {
	return metav1validation.ValidateLabels(labels, path).ToAggregate()
}

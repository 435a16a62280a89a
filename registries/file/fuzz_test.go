package file

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate/translatetest"
)

// parseWhole decodes the whole document and converts every service: the
// reference that Parse, which decodes each service's document apart, must
// agree with, errors included.
func parseWhole(data []byte) ([]registries.Service, error) {
	var doc Document
	if err := strict.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	seen := make(map[string]int, len(doc.Services))
	out := make([]registries.Service, 0, len(doc.Services))
	for i, s := range doc.Services {
		svc, err := s.toService(fmt.Sprintf("services[%d]", i))
		if err != nil {
			return nil, err
		}
		if j, dup := seen[s.Host]; dup {
			return nil, fmt.Errorf("services[%d].host: %q is already declared by services[%d]", i, s.Host, j)
		}
		seen[s.Host] = i
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sameParse fails t unless two parses found the same services or failed
// with the same error.
func sameParse(t *testing.T, what string, got []registries.Service, gotErr error, want []registries.Service, wantErr error) {
	t.Helper()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: err = %v, want %v", what, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: services = %+v, want %+v", what, got, want)
	}
}

// FuzzParse parses arbitrary bytes as a registry file. It checks that Parse
// never panics and agrees with parseWhole; that the services it accepts are sorted by host, one per
// host, each instance with its file weight on the common scale (× the
// default weight); and that each service passes translatetest.Check.
func FuzzParse(f *testing.F) {
	f.Add([]byte("services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}, {number: 9090, protocol: http}]\n" +
		"  instances:\n  - {address: 10.0.0.1, weight: 2, locality: r/z/s, labels: {version: v1}}\n" +
		"  - {address: 10.0.0.2, port: 9091, weight: 0}\n"))
	f.Add([]byte("services:\n- {host: b.local, ports: [{number: 1}]}\n- {host: A.LOCAL, instances: [{address: a.b.c, port: 70000}]}\n"))
	f.Add([]byte("services:\n- host: x\n  instances: [{address: '::1', port: 1, labels: {'Bad Key': \"v\", k: \"\"}, locality: a/b/c/d}]\n"))
	f.Add([]byte("services: []\n"))
	f.Add([]byte("services:\n- {host: a, ports: [{number: 99999999999}]}\n- {host: b, bogus: 1}\n"))
	f.Add([]byte("services:\n- {host: a, ports: [{number: 0}]}\n- {host: b, bogus: 1}\n"))
	f.Add([]byte("services: [{host: a, bogus: 1}]\nzzz: 1\n"))
	f.Add([]byte("services:\n- &x {host: a, ports: [{number: 1}]}\n- *x\n"))
	f.Add([]byte("services:\n- ~\n"))
	trs := translatetest.Translators(f, HostTemplate)
	f.Fuzz(func(t *testing.T, data []byte) {
		svcs, err := Parse(data)
		whole, wholeErr := parseWhole(data)
		sameParse(t, "Parse and parseWhole", svcs, err, whole, wholeErr)
		if err != nil {
			return
		}
		if !slices.IsSortedFunc(svcs, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("services are not sorted by host")
		}
		var doc Document
		if err := strict.Unmarshal(data, &doc); err != nil {
			t.Fatalf("Parse accepted a file that does not decode: %v", err)
		}
		specs := make(map[string]ServiceSpec, len(doc.Services))
		for _, s := range doc.Services {
			specs[s.Host] = s
		}
		if len(specs) != len(svcs) {
			t.Fatalf("%d services for %d hosts", len(svcs), len(specs))
		}
		for _, svc := range svcs {
			spec := specs[svc.Name]
			if svc.Host != spec.Host || len(svc.Instances) != len(spec.Instances) {
				t.Fatalf("service %q: host %q, %d instances; the file has %d", svc.Name, svc.Host, len(svc.Instances), len(spec.Instances))
			}
			for i, in := range spec.Instances {
				if got, want := uint64(svc.Instances[i].Weight), uint64(in.Weight)*model.DefaultWeight; got != want {
					t.Fatalf("service %q: instance %d: file weight %d became weight %d, want %d", svc.Name, i, in.Weight, got, want)
				}
			}
			translatetest.Check(t, trs, svc)
		}
	})
}

// FuzzParseKnown parses a file, then a second one with the first one's
// services known (as a reload does). It checks that the second parse finds
// what a parse of the second file alone finds, errors included: a known
// service is taken as it is only where its document is unchanged.
func FuzzParseKnown(f *testing.F) {
	const (
		a = "- host: a.local\n  ports: [{number: 80}]\n  instances: [{address: 10.0.0.1, labels: {version: v1}}]\n"
		b = "- {host: b.local, ports: [{number: 81, protocol: http}], instances: [{address: 10.0.1.1}, {address: 10.0.1.2}]}\n"
	)
	for _, after := range []string{
		"services:\n" + a + b,
		"services:\n" + b + a,
		"services:\n" + a,
		"services:\n" + a + b + a,
		"services:\n" + strings.Replace(a, "v1", "v2", 1) + b,
		"services:\n" + strings.Replace(a, "10.0.0.1,", "10.0.0.1, port: 80,", 1) + b,
		"services:\n" + b + strings.Replace(a, "80", "0", 1),
		"services:\n" + strings.Replace(a, "labels:", "bogus: 1, labels:", 1) + b,
		"services:\n" + a + b + "zzz: 1\n",
	} {
		f.Add([]byte("services:\n"+a+b), []byte(after))
	}
	f.Fuzz(func(t *testing.T, before, after []byte) {
		first, err := parse(before, nil)
		if err != nil {
			return
		}
		known := make(map[docSum]registries.Service, len(first))
		for _, p := range first {
			known[p.Sum] = p.Service
		}
		next, err := parse(after, known)
		got := make([]registries.Service, len(next))
		for i, p := range next {
			got[i] = p.Service
		}
		want, wantErr := Parse(after)
		sameParse(t, "parse with known services and Parse", got, err, want, wantErr)
	})
}

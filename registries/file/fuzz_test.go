package file

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate/translatetest"
)

// FuzzParse parses arbitrary bytes as a registry file. It checks that Parse
// never panics; that the services it accepts are sorted by host, one per
// host, each instance with its file weight on the common scale (× the
// default weight); and that each service passes translatetest.Check.
func FuzzParse(f *testing.F) {
	f.Add([]byte("services:\n- host: web.static.local\n  ports: [{number: 8080, protocol: grpc}, {number: 9090, protocol: http}]\n" +
		"  instances:\n  - {address: 10.0.0.1, weight: 2, locality: r/z/s, labels: {version: v1}}\n" +
		"  - {address: 10.0.0.2, port: 9091, weight: 0}\n"))
	f.Add([]byte("services:\n- {host: b.local, ports: [{number: 1}]}\n- {host: A.LOCAL, instances: [{address: a.b.c, port: 70000}]}\n"))
	f.Add([]byte("services:\n- host: x\n  instances: [{address: '::1', port: 1, labels: {'Bad Key': \"v\", k: \"\"}, locality: a/b/c/d}]\n"))
	f.Add([]byte("services: []\n"))
	trs := translatetest.Translators(f, HostTemplate)
	f.Fuzz(func(t *testing.T, data []byte) {
		svcs, skipped, err := Parse(data)
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
		if len(svcs)+len(skipped) != len(doc.Services) {
			t.Fatalf("%d services and %d skipped of %d", len(svcs), len(skipped), len(doc.Services))
		}
		specs := make(map[string]ServiceSpec, len(doc.Services))
		for i, s := range doc.Services {
			if !slices.ContainsFunc(skipped, func(k Skipped) bool { return k.Index == i }) {
				specs[s.Host] = s
			}
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
				if svc.Instances[i].Invalid() != "" {
					continue
				}
				if got, want := uint64(svc.Instances[i].Weight), uint64(in.Weight)*model.DefaultWeight; got != want {
					t.Fatalf("service %q: instance %d: file weight %d became weight %d, want %d", svc.Name, i, in.Weight, got, want)
				}
			}
			translatetest.Check(t, trs, svc)
		}
	})
}

// FuzzItemParser checks that the item-by-item parse of a reload equals
// Parse, services and error: on a first read of a file (nothing known) and
// on a read of that file edited (cut bytes at an offset, inserted others)
// with the first read's items known.
func FuzzItemParser(f *testing.F) {
	seeds := []string{
		string(benchFile(3, -1)),
		"services:\n" + svcA + svcB + svcC,
		"# head\n\nservices: # list\n" + indented(svcA+"  # between\n"+svcB, 2) + "  # end\n",
		"services:\n- host: |-\n    a.local\n  ports: [{number: 1}]\n-\n  host: \"b.\n    local\"\n  ports: [{number: 2}]\n",
	}
	seeds = append(seeds, corpus(f, "testdata/fuzz/FuzzParse")...)
	edits := []struct {
		at     uint16
		cut    uint8
		insert string
	}{
		{at: 0, cut: 0, insert: ""},
		{at: 20, cut: 1, insert: "b"},
		{at: 10, cut: 0, insert: "- host: d.local\n  ports: [{number: 1}]\n"},
		{at: 30, cut: 2, insert: "\n- "},
		{at: 60, cut: 40, insert: "\"\n"},
		{at: 11, cut: 0, insert: svcA},
		{at: 11, cut: 0, insert: "- host: x\n  ports: [{number: 1, protocol: udp}]\n"},
	}
	for _, s := range seeds {
		for _, e := range edits {
			f.Add([]byte(s), e.at, e.cut, []byte(e.insert))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, at uint16, cut uint8, insert []byte) {
		var p itemParser
		sameAsParse(t, &p, data)
		i := min(int(at), len(data))
		j := min(i+int(cut), len(data))
		edited := append(append(append([]byte(nil), data[:i]...), insert...), data[j:]...)
		sameAsParse(t, &p, edited)
	})
}

// corpus returns the files of a fuzz corpus directory of one []byte
// argument each.
func corpus(f *testing.F, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		_, arg, _ := strings.Cut(strings.TrimSpace(string(text)), "\n")
		data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, data)
	}
	return out
}

package file

import (
	"reflect"
	"strings"
	"testing"
)

// sameAsParse parses data with p and fails t unless the services, the
// skipped services and the error are Parse's.
func sameAsParse(t testing.TB, p *itemParser, data []byte) {
	t.Helper()
	want, wantSkipped, wantErr := Parse(data)
	got, gotSkipped, gotErr := p.parse(data)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("error = %v, Parse's = %v\nfile:\n%s", gotErr, wantErr, data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("services = %+v\nParse's = %+v\nfile:\n%s", got, want, data)
	}
	if !reflect.DeepEqual(gotSkipped, wantSkipped) {
		t.Fatalf("skipped = %+v\nParse's = %+v\nfile:\n%s", gotSkipped, wantSkipped, data)
	}
}

const (
	svcA = "- host: a.local\n  ports: [{number: 80, protocol: http}]\n  instances:\n  - {address: 10.0.0.1, labels: {version: v1}}\n"
	svcB = "- host: b.local\n  ports:\n  - number: 81\n  instances:\n  - address: 10.0.0.2\n    weight: 2\n"
	svcC = "- {host: c.local, ports: [{number: 82}], instances: [{address: 10.0.0.3}]}\n"
)

// indented returns the items of s indented by n more spaces.
func indented(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+pad) + "\n"
}

func TestItemParserLayouts(t *testing.T) {
	cases := map[string]struct {
		in       string
		split    bool // whether the file has the simple block layout
		itemwise bool // whether it is parsed item by item (the cache fills)
	}{
		"items at column 0":                       {in: "services:\n" + svcB + svcA + svcC, split: true, itemwise: true},
		"items indented by two spaces":            {in: "services:\n" + indented(svcB+svcA+svcC, 2), split: true, itemwise: true},
		"comments and blank lines anywhere":       {in: "# head\n\nservices: # the list\n\n# first\n" + svcA + "\n  # inside\n# between\n" + svcB + "# end\n\n", split: true, itemwise: true},
		"an item whose mapping starts below":      {in: "services:\n-\n  host: a.local\n  ports: [{number: 1}]\n" + svcB, split: true, itemwise: true},
		"no final line break":                     {in: "services:\n" + svcA + strings.TrimSuffix(svcC, "\n"), split: true, itemwise: true},
		"a block scalar and a quoted line":        {in: "services:\n- host: |-\n    a.local\n  ports: [{number: 1}]\n- host: \"b.\n    local\"\n  ports: [{number: 2}]\n", split: true, itemwise: true},
		"a comment in a block scalar's text":      {in: "services:\n- host: >-\n    a.local\n    # not a comment\n  ports: [{number: 1}]\n" + svcB, split: true, itemwise: true},
		"an unknown field in the second item":     {in: "services:\n" + svcA + "- host: b.local\n  ports: [{number: 1, protocl: http}]\n", split: true},
		"an invalid protocol skips its service":   {in: "services:\n" + svcA + svcB + "- host: c.local\n  ports: [{number: 1, protocol: udp}]\n", split: true, itemwise: true},
		"a duplicate host":                        {in: "services:\n" + svcA + svcB + svcA, split: true},
		"a duplicate key inside an item":          {in: "services:\n" + svcA + "- host: b.local\n  host: c.local\n", split: true},
		"invalid YAML in an item":                 {in: "services:\n" + svcA + "- host: [b\n", split: true},
		"a quoted scalar over an item's line":     {in: "services:\n- host: \"a.local\n- b\"\n  ports: [{number: 1}]\n", split: true},
		"a flow list over an item's line":         {in: "services:\n- ports: [{number: 1},\n- {number: 2}]\n  host: a.local\n", split: true},
		"an item that is not a mapping":           {in: "services:\n" + svcA + "- b.local\n", split: true},
		"an empty item is a service without host": {in: "services:\n" + svcA + "-\n", split: true, itemwise: true},
		"invalid UTF-8 in the head":               {in: "# \xff\nservices:\n" + svcA, split: true},
		"a flow list":                             {in: "services: [{host: a.local, ports: [{number: 1}]}]\n"},
		"JSON":                                    {in: `{"services": [{"host": "a.local", "ports": [{"number": 1}]}]}`},
		"a document start marker":                 {in: "---\nservices:\n" + svcA},
		"a document end marker":                   {in: "services:\n" + svcA + "...\n"},
		"a second document":                       {in: "services:\n" + svcA + "---\nservices:\n" + svcB},
		"a directive":                             {in: "%YAML 1.1\n---\nservices:\n" + svcA},
		"an anchor and an alias across items":     {in: "services:\n- host: a.local\n  ports: &p [{number: 1}]\n- host: b.local\n  ports: *p\n"},
		"a tag":                                   {in: "services:\n- host: !!str a.local\n  ports: [{number: 1}]\n"},
		"a tab in the indentation":                {in: "services:\n- host: a.local\n\tports: [{number: 1}]\n"},
		"CRLF line breaks":                        {in: strings.ReplaceAll("services:\n"+svcA+svcB, "\n", "\r\n")},
		"a line separator":                        {in: "services:\n- host: a.local\u2028  ports: [{number: 1}]\n"},
		"another top-level key":                   {in: "services:\n" + svcA + "extra: 1\n"},
		"services given twice":                    {in: "services:\n" + svcA + "services:\n" + svcB},
		"an indented services key":                {in: " services:\n" + indented(svcA, 1)},
		"a quoted services key":                   {in: "\"services\":\n" + svcA},
		"a value on the services line":            {in: "services: ~\n"},
		"no items":                                {in: "services:\n# none yet\n"},
		"an empty file":                           {in: ""},
		"items at two indentations":               {in: "services:\n" + indented(svcA, 2) + svcB},
		"a line of an item not indented deeper":   {in: "services:\n" + indented(svcA, 2) + " ports: []\n"},
		"an item before the services key":         {in: svcA + "services:\n" + svcB},
		"a dash not followed by a space":          {in: "services:\n" + svcA + "-host: b.local\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := []byte(tc.in)
			head, items, split := splitItems(data)
			if split != tc.split {
				t.Fatalf("splitItems = %v, want %v", split, tc.split)
			}
			if split && string(head)+string(joined(items)) != tc.in {
				t.Fatalf("head and items are not the file: %q + %q", head, items)
			}
			var p itemParser
			sameAsParse(t, &p, data)
			if got := len(p.items) > 0; got != tc.itemwise || got && len(p.items) != len(items) {
				t.Fatalf("the cache holds %d items of %d, want it filled: %v", len(p.items), len(items), tc.itemwise)
			}
			// Again with every item known, and after an edit of the first
			// service's host (one item parsed, the others known).
			sameAsParse(t, &p, data)
			sameAsParse(t, &p, []byte(strings.Replace(tc.in, "a.local", "z.local", 1)))
		})
	}
}

func joined(items [][]byte) []byte {
	var out []byte
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

// TestItemParserReusesUnchangedServices: a reload after a one-service edit
// parses that service only; the others are the last parse's values. A
// failed parse keeps the last good parse's services; a skipped service is
// known by its text too, and reported at its place.
func TestItemParserReusesUnchangedServices(t *testing.T) {
	var p itemParser
	first, _, err := p.parse(benchFile(5, -1))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(benchFile(5, 2)), "protocol: grpc", "protocl: grpc", 1)
	if _, _, err := p.parse([]byte(broken)); err == nil || !strings.Contains(err.Error(), "services[0].ports[0].protocl: unknown field") {
		t.Fatalf("err = %v, want Parse's error at services[0].ports[0].protocl", err)
	}
	invalid := strings.Replace(string(benchFile(5, 2)), "protocol: grpc", "protocol: udp", 1)
	svcs, skipped, err := p.parse([]byte(invalid))
	if err != nil || len(svcs) != 4 || len(skipped) != 1 || skipped[0].String() != `services[0].ports[0].protocol: "udp" is not one of http, http2, grpc, tcp` {
		t.Fatalf("a file with one invalid service: %d services, skipped %+v, err %v", len(svcs), skipped, err)
	}
	second, _, err := p.parse(benchFile(5, 2))
	if err != nil {
		t.Fatal(err)
	}
	// Service 0 was skipped by the last read and is parsed again; 2 changed.
	for i := range first {
		reused := &first[i].Instances[0] == &second[i].Instances[0]
		if want := i != 0 && i != 2; reused != want {
			t.Errorf("service %s: reused = %v, want %v", first[i].Name, reused, want)
		}
	}
	if len(p.items) != 5 {
		t.Errorf("the cache holds %d services, want the file's 5", len(p.items))
	}
}

package translate

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

func validSE() *networking.ServiceEntry {
	return &networking.ServiceEntry{
		Hosts:            []string{"web.service.consul"},
		Ports:            []*networking.ServicePort{{Number: 8080, Name: "grpc-8080", Protocol: "GRPC"}},
		Location:         networking.ServiceEntry_MESH_INTERNAL,
		Resolution:       networking.ServiceEntry_STATIC,
		WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"meshbridge.io/service": "web.service.consul"}},
	}
}

func TestValidateServiceEntry(t *testing.T) {
	cases := map[string]struct {
		mutate  func(*networking.ServiceEntry)
		wantErr string // "" = valid
	}{
		"a generated service entry is valid": {func(*networking.ServiceEntry) {}, ""},
		"hosts are required":                 {func(se *networking.ServiceEntry) { se.Hosts = nil }, "at least one host"},
		"the full wildcard host is invalid":  {func(se *networking.ServiceEntry) { se.Hosts = []string{"*"} }, "invalid host *"},
		"a wildcard host needs resolution NONE": {func(se *networking.ServiceEntry) {
			se.Hosts = []string{"*.example.com"}
		}, "requires resolution NONE"},
		"a wildcard host with NONE is valid": {func(se *networking.ServiceEntry) {
			se.Hosts, se.Resolution = []string{"*.example.com"}, networking.ServiceEntry_NONE
		}, ""},
		"hosts are DNS names": {func(se *networking.ServiceEntry) { se.Hosts = []string{"web_api.local"} }, "invalid"},
		"an all-numeric top-level domain is invalid": {func(se *networking.ServiceEntry) {
			se.Hosts = []string{"web.123"}
		}, "all-numeric"},
		"port names are unique": {func(se *networking.ServiceEntry) {
			se.Ports = append(se.Ports, &networking.ServicePort{Number: 9090, Name: "grpc-8080", Protocol: "GRPC"})
		}, "port name \"grpc-8080\" already defined"},
		"port numbers are unique": {func(se *networking.ServiceEntry) {
			se.Ports = append(se.Ports, &networking.ServicePort{Number: 8080, Name: "http-8080", Protocol: "HTTP"})
		}, "port 8080 already defined"},
		"port numbers are 1-65535": {func(se *networking.ServiceEntry) { se.Ports[0].Number = 0 }, "range 1..65535"},
		"port names are DNS-1123 labels": {func(se *networking.ServiceEntry) {
			se.Ports[0].Name = "GRPC_8080"
		}, "invalid port name"},
		"protocols are known":            {func(se *networking.ServiceEntry) { se.Ports[0].Protocol = "DUBBO" }, "unsupported protocol"},
		"protocols are case-insensitive": {func(se *networking.ServiceEntry) { se.Ports[0].Protocol = "grpc" }, ""},
		"selector and endpoints are exclusive": {func(se *networking.ServiceEntry) {
			se.Endpoints = []*networking.WorkloadEntry{{Address: "10.0.0.1"}}
		}, "only one of WorkloadSelector or Endpoints"},
		"selector labels are valid": {func(se *networking.ServiceEntry) {
			se.WorkloadSelector.Labels = map[string]string{"bad key": "v"}
		}, "invalid label key"},
		"selector labels hold no wildcard": {func(se *networking.ServiceEntry) {
			se.WorkloadSelector.Labels = map[string]string{"app": "*"}
		}, "wildcard is not supported"},
		"static endpoints are IPs": {func(se *networking.ServiceEntry) {
			se.WorkloadSelector, se.Endpoints = nil, []*networking.WorkloadEntry{{Address: "db.example.com"}}
		}, "not a valid IP address"},
		"DNS endpoints may be hostnames": {func(se *networking.ServiceEntry) {
			se.Resolution = networking.ServiceEntry_DNS
			se.WorkloadSelector, se.Endpoints = nil, []*networking.WorkloadEntry{{Address: "db.example.com"}}
		}, ""},
		"DNS endpoints are valid hostnames": {func(se *networking.ServiceEntry) {
			se.Resolution = networking.ServiceEntry_DNS
			se.WorkloadSelector, se.Endpoints = nil, []*networking.WorkloadEntry{{Address: "db_1.example.com"}}
		}, "not a valid FQDN"},
		"endpoint ports name service ports": {func(se *networking.ServiceEntry) {
			se.WorkloadSelector = nil
			se.Endpoints = []*networking.WorkloadEntry{{Address: "10.0.0.1", Ports: map[string]uint32{"http-80": 80}}}
		}, "not defined by the service entry"},
		"NONE has no endpoints": {func(se *networking.ServiceEntry) {
			se.Resolution, se.WorkloadSelector = networking.ServiceEntry_NONE, nil
			se.Endpoints = []*networking.WorkloadEntry{{Address: "10.0.0.1"}}
		}, "no endpoints should be provided"},
		"DNS_ROUND_ROBIN has at most one endpoint": {func(se *networking.ServiceEntry) {
			se.Resolution, se.WorkloadSelector = networking.ServiceEntry_DNS_ROUND_ROBIN, nil
			se.Endpoints = []*networking.WorkloadEntry{{Address: "10.0.0.1"}, {Address: "10.0.0.2"}}
		}, "only be 0 or 1 endpoint"},
		"addresses are IPs or CIDRs": {func(se *networking.ServiceEntry) { se.Addresses = []string{"10.0.0.0/33"} }, "not an IP address or CIDR"},
		"CIDRs need NONE or STATIC": {func(se *networking.ServiceEntry) {
			se.Addresses, se.Resolution = []string{"10.0.0.0/24"}, networking.ServiceEntry_DNS
		}, "CIDR addresses are allowed only"},
		"several hosts need HTTP or TLS ports": {func(se *networking.ServiceEntry) {
			se.Hosts = []string{"a.example.com", "b.example.com"}
			se.Ports[0].Protocol = "TCP"
		}, "multiple hosts"},
		"exportTo names namespaces": {func(se *networking.ServiceEntry) { se.ExportTo = []string{"Bad NS"} }, "exportTo"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			se := validSE()
			tc.mutate(se)
			checkValidation(t, ValidateServiceEntry(se), tc.wantErr)
		})
	}
}

func TestValidateWorkloadEntry(t *testing.T) {
	valid := &networking.WorkloadEntry{
		Address: "10.0.0.1", Ports: map[string]uint32{"grpc-8080": 9090},
		Labels: map[string]string{"version": "v1"}, Weight: 1, Locality: "region/zone/subzone",
	}
	cases := map[string]struct {
		mutate  func(*networking.WorkloadEntry)
		wantErr string
	}{
		"a generated workload entry is valid":    {func(*networking.WorkloadEntry) {}, ""},
		"an address is required":                 {func(we *networking.WorkloadEntry) { we.Address = "" }, "address is required"},
		"a network may stand in for the address": {func(we *networking.WorkloadEntry) { we.Address, we.Network = "", "n1" }, ""},
		"an IPv6 address is valid":               {func(we *networking.WorkloadEntry) { we.Address = "fd00::1" }, ""},
		"a hostname address is valid":            {func(we *networking.WorkloadEntry) { we.Address = "db.example.com" }, ""},
		"an invalid hostname is not": {func(we *networking.WorkloadEntry) {
			we.Address = "db..example.com"
		}, "not a valid FQDN"},
		"unix addresses are absolute paths": {func(we *networking.WorkloadEntry) {
			we.Address, we.Ports = "unix://relative/sock", nil
		}, "not an absolute path"},
		"unix addresses have no ports": {func(we *networking.WorkloadEntry) {
			we.Address = "unix:///var/run/x.sock"
		}, "must not include ports"},
		"port names are DNS-1123 labels": {func(we *networking.WorkloadEntry) {
			we.Ports = map[string]uint32{"Bad_Name": 80}
		}, "invalid port name"},
		"port numbers are 1-65535": {func(we *networking.WorkloadEntry) {
			we.Ports = map[string]uint32{"http": 70000}
		}, "range 1..65535"},
		"labels are valid": {func(we *networking.WorkloadEntry) {
			we.Labels = map[string]string{"k": "bad value"}
		}, "invalid label value"},
		"locality has at most three segments": {func(we *networking.WorkloadEntry) {
			we.Locality = "a/b/c/d"
		}, "more than 3 segments"},
		"locality has no empty segment": {func(we *networking.WorkloadEntry) { we.Locality = "a//c" }, "empty segment"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			we := proto.Clone(valid).(*networking.WorkloadEntry)
			tc.mutate(we)
			checkValidation(t, ValidateWorkloadEntry(we), tc.wantErr)
		})
	}
}

// TestValidateConfig: an object is checked by its kind's validation, and
// one whose spec is not its kind's (or of another kind) is refused.
func TestValidateConfig(t *testing.T) {
	noHosts := validSE()
	noHosts.Hosts = nil
	cases := map[string]struct {
		cfg     *model.Config
		wantErr string
	}{
		"a valid ServiceEntry": {&model.Config{Meta: model.Meta{Kind: model.KindServiceEntry}, Spec: validSE()}, ""},
		"an invalid ServiceEntry": {&model.Config{Meta: model.Meta{Kind: model.KindServiceEntry}, Spec: noHosts},
			"at least one host"},
		"a valid WorkloadEntry": {&model.Config{Meta: model.Meta{Kind: model.KindWorkloadEntry},
			Spec: &networking.WorkloadEntry{Address: "10.0.0.1"}}, ""},
		"an invalid WorkloadEntry": {&model.Config{Meta: model.Meta{Kind: model.KindWorkloadEntry},
			Spec: &networking.WorkloadEntry{}}, "address is required"},
		"a spec of another kind": {&model.Config{Meta: model.Meta{Kind: model.KindWorkloadEntry}, Spec: validSE()},
			"is not a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { checkValidation(t, ValidateConfig(tc.cfg), tc.wantErr) })
	}
}

func checkValidation(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("accepted, want error containing %q", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("error %q, want it to contain %q", err, wantErr)
	}
}

func TestNormalizeLocality(t *testing.T) {
	cases := map[string]struct {
		in, want string
		wantErr  bool
	}{
		"empty stays empty":                         {in: "", want: ""},
		"only slashes is empty":                     {in: "//", want: ""},
		"trailing empty segments are trimmed":       {in: "dc1//", want: "dc1"},
		"a subzone without a zone is dropped":       {in: "dc1//rack", want: "dc1"},
		"a full locality is kept":                   {in: "r/z/s", want: "r/z/s"},
		"more than three segments is an error":      {in: "a/b/c/d", wantErr: true},
		"a space is an error":                       {in: "us east/z", wantErr: true},
		"a leading empty region empties the result": {in: "/z/s", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := normalizeLocality(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("normalizeLocality(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

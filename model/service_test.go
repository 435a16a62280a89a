package model

import (
	"reflect"
	"slices"
	"testing"

	networking "istio.io/api/networking/v1"
)

// generatorInputs and notGeneratorInputs classify every field of Service
// for SameGeneratorInputs: a field added to Service fails
// TestSameGeneratorInputsKnowsEveryField until it is listed in one, and
// SameGeneratorInputs compares it if it is an input.
var (
	generatorInputs    = []string{"Hostname", "Namespace", "Ports", "Policy", "Routing", "Defaults"}
	notGeneratorInputs = []string{"Resolution", "Labels", "Selector", "ExportTo", "Addresses", "MeshExternal"}
)

func testService(mut ...func(*Service)) *Service {
	s := &Service{Hostname: "a", Namespace: "ns", Ports: []Port{{Name: "grpc-8080", Number: 8080, Protocol: ProtocolGRPC}},
		Resolution: ResolutionStatic, Selector: map[string]string{LabelService: "a"}}
	for _, m := range mut {
		m(s)
	}
	return s
}

// TestSameGeneratorInputs: only what the CDS, LDS and RDS generators (and
// EDS's port mapping) read makes two services differ.
func TestSameGeneratorInputs(t *testing.T) {
	base := testService()
	cases := map[string]struct {
		other *Service
		want  bool
	}{
		"identical services are the same": {testService(), true},
		"another port number differs":     {testService(func(s *Service) { s.Ports[0].Number = 1 }), false},
		"another port protocol differs":   {testService(func(s *Service) { s.Ports[0].Protocol = ProtocolTCP }), false},
		"another port name differs":       {testService(func(s *Service) { s.Ports[0].Name = "x" }), false},
		"another port added differs":      {testService(func(s *Service) { s.Ports = append(s.Ports, Port{Name: "tcp-1", Number: 1}) }), false},
		"another namespace differs":       {testService(func(s *Service) { s.Namespace = "other" }), false},
		"another host differs":            {testService(func(s *Service) { s.Hostname = "b" }), false},
		"another selector is the same":    {testService(func(s *Service) { s.Selector = map[string]string{"x": "y"} }), true},
		"another exportTo is the same":    {testService(func(s *Service) { s.ExportTo = []string{"."} }), true},
		"another address is the same":     {testService(func(s *Service) { s.Addresses = []string{"10.0.0.1"} }), true},
		"mesh external is the same":       {testService(func(s *Service) { s.MeshExternal = true }), true},
		"DNS resolution is the same":      {testService(func(s *Service) { s.Resolution = ResolutionDNS }), true},
		"other labels are the same":       {testService(func(s *Service) { s.Labels = map[string]string{"x": "y"} }), true},
		"a DestinationRule differs":       {testService(func(s *Service) { s.Policy = &networking.DestinationRule{Host: "a"} }), false},
		"a VirtualService differs":        {testService(func(s *Service) { s.Routing = &networking.VirtualService{Hosts: []string{"a"}} }), false},
		"the providers' defaults differ":  {testService(func(s *Service) { s.Defaults.LoadBalance = "leastactive" }), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := base.SameGeneratorInputs(tc.other); got != tc.want {
				t.Errorf("SameGeneratorInputs = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSameGeneratorInputsKnowsEveryField: every field of Service is
// classified, and changing any one field changes SameGeneratorInputs'
// answer exactly when it is a generator input.
func TestSameGeneratorInputsKnowsEveryField(t *testing.T) {
	typ := reflect.TypeFor[Service]()
	for f := range typ.Fields() {
		input := slices.Contains(generatorInputs, f.Name)
		if !input && !slices.Contains(notGeneratorInputs, f.Name) {
			t.Errorf("Service.%s is new: list it in generatorInputs (and compare it in SameGeneratorInputs) if a generator reads it, else in notGeneratorInputs", f.Name)
			continue
		}
		other := testService()
		v := reflect.ValueOf(other).Elem().FieldByIndex(f.Index)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "-changed")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem())) // another object: policies compare by identity
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			m.SetMapIndex(reflect.ValueOf("changed"), reflect.ValueOf("changed"))
			v.Set(m)
		case reflect.Struct:
			// A comparable value: its first field changed (every field of
			// such a value is compared as one, by ==).
			f0 := v.Field(0)
			switch f0.Kind() {
			case reflect.Int64:
				f0.SetInt(f0.Int() + 1)
			case reflect.String:
				f0.SetString(f0.String() + "-changed")
			default:
				t.Errorf("Service.%s: a struct whose first field is a %s; teach this test to change it", f.Name, f0.Kind())
				continue
			}
		default:
			t.Errorf("Service.%s: a %s; teach this test to change it", f.Name, v.Kind())
			continue
		}
		if same := testService().SameGeneratorInputs(other); same == input {
			t.Errorf("Service.%s changed: SameGeneratorInputs = %v, want %v (input: %v)", f.Name, same, !input, input)
		}
	}
}

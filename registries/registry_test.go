package registries

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestInstanceSize: the sync step keeps one Instance per registered
// instance for as long as its service lives, so every byte of Instance is
// paid once per instance of every registry.
func TestInstanceSize(t *testing.T) {
	if got := unsafe.Sizeof(Instance{}); got > 88 {
		t.Errorf("unsafe.Sizeof(Instance{}) = %d, want at most 88: the syncer holds one per registered instance, "+
			"so a field few instances use belongs in InstanceExtra", got)
	}
}

// TestInstanceAccessors: Ports, Methods and Invalid read Extra, and are zero
// without it.
func TestInstanceAccessors(t *testing.T) {
	var plain Instance
	if plain.Ports() != nil || plain.Methods() != nil || plain.Invalid() != "" {
		t.Errorf("instance without Extra: Ports %v, Methods %v, Invalid %q; want zero", plain.Ports(), plain.Methods(), plain.Invalid())
	}
	ports := []Port{{Number: 20880, Protocol: "dubbo"}, {Number: 50051, Protocol: "tri"}}
	dubbo := Instance{ID: "a", Extra: &InstanceExtra{Ports: ports, Methods: []string{"greet"}}}
	if !slices.Equal(dubbo.Ports(), ports) || !slices.Equal(dubbo.Methods(), []string{"greet"}) || dubbo.Invalid() != "" {
		t.Errorf("Dubbo instance: Ports %v, Methods %v, Invalid %q", dubbo.Ports(), dubbo.Methods(), dubbo.Invalid())
	}
	bad := InvalidInstance("raw", "no port")
	if bad.ID != "raw" || bad.Invalid() != "no port" || bad.Ports() != nil || bad.Methods() != nil {
		t.Errorf("InvalidInstance = %+v (Extra %+v)", bad, bad.Extra)
	}
}

// TestServiceKeyCompare: Compare orders keys exactly as their Strings
// compare, qualified or not, a name holding "/" included.
func TestServiceKeyCompare(t *testing.T) {
	keys := []ServiceKey{
		{Name: "web"}, {Name: "Web"}, {Name: "web2"}, {Name: ""}, {Name: "a/b/c/d"}, {Name: "a/b/c/"},
		{Namespace: "a", Group: "b", Datacenter: "c", Name: "d"}, {Namespace: "a", Group: "b", Name: "d"},
		{Namespace: "public", Group: "DEFAULT_GROUP", Name: "web"}, {Datacenter: "dc2", Name: "web"},
		{Namespace: "public", Group: "DEFAULT_GROUP", Name: "we"}, {Group: "G"}, {Namespace: "a/b"},
	}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := a.Compare(b), strings.Compare(a.String(), b.String()); got != want {
				t.Errorf("%#v.Compare(%#v) = %d, want %d (their Strings %q, %q)", a, b, got, want, a.String(), b.String())
			}
		}
	}
	// Two keys with one String are still two services.
	if a, b := (ServiceKey{Name: "a/b/c/d"}), (ServiceKey{Namespace: "a", Group: "b", Datacenter: "c", Name: "d"}); a == b {
		t.Errorf("%#v == %#v", a, b)
	}
}

// TestSameServiceKnowsEveryField: a field added to Service that SameService
// does not compare would let a read that changes only it go unsent
// (Reporter rule 1): every field but Instances must tell two services apart.
func TestSameServiceKnowsEveryField(t *testing.T) {
	typ := reflect.TypeFor[Service]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Instances" {
			continue
		}
		var a, b Service
		v := reflect.ValueOf(&b).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		default:
			t.Fatalf("Service.%s is a %s: teach this test to set it", f.Name, v.Kind())
		}
		if SameService(a, b) {
			t.Errorf("SameService ignores Service.%s", f.Name)
		}
	}
}

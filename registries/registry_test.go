package registries

import (
	"slices"
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

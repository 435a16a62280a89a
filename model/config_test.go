package model

import "testing"

func TestHashHex(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Hash
		want string
	}{
		{"zero is none", Hash{}, ""},
		{"sum in hex", SumHash([]byte("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if tc.h.IsZero() != (tc.want == "") {
				t.Errorf("IsZero() = %v", tc.h.IsZero())
			}
			m := Meta{Hash: tc.h}
			if got := m.OutputAnnotations()[AnnotationHash]; got != tc.want {
				t.Errorf("annotation %q, want %q", got, tc.want)
			}
		})
	}
}

package registries

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldError(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name      string
		err       error
		wantField string
		wantText  string
	}{
		{"invalid", Invalid("maxWatches", "%d is outside 1-%d", 500, 190), "maxWatches", "maxWatches: 500 is outside 1-190"},
		{"wraps", Invalid("address", "%q: %w", "x", base), "address", `address: "x": boom`},
		{"nested field", Nested("dubbo", Invalid("mode", "bad")), "dubbo.mode", "dubbo.mode: bad"},
		{"nested twice", Nested("a", Nested("b", Invalid("c", "bad"))), "a.b.c", "a.b.c: bad"},
		{"nested plain", Nested("auth", errors.New("set one")), "auth", "auth: set one"},
		{"found through a wrap", fmt.Errorf("config: %w", Invalid("path", "required")), "path", "config: path: required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fe *FieldError
			if !errors.As(tc.err, &fe) {
				t.Fatalf("%v is no *FieldError", tc.err)
			}
			if fe.Field != tc.wantField {
				t.Errorf("field %q, want %q", fe.Field, tc.wantField)
			}
			if got := tc.err.Error(); got != tc.wantText {
				t.Errorf("text %q, want %q", got, tc.wantText)
			}
		})
	}
	if !errors.Is(Invalid("address", "%w", base), base) {
		t.Error("Invalid does not wrap %w")
	}
}

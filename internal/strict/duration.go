package strict

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("100ms").
// A key that is absent takes its default (Default); a key that is present
// keeps its value, zero included ("0s" turns a debounce off), and the
// configuration's validation refuses a zero where it means nothing.
type Duration struct {
	time.Duration
	set bool
}

// Default sets d to v unless the configuration gave a value.
func (d *Duration) Default(v time.Duration) {
	if !d.set {
		d.Duration, d.set = v, true
	}
}

// IsSet reports whether the configuration gave a value (or Default ran).
func (d Duration) IsSet() bool { return d.set }

// UnmarshalJSON accepts "100ms"-style strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"100ms\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	d.Duration, d.set = v, true
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

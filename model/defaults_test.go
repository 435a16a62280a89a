package model

import (
	"testing"
	"time"
)

// TestRouteDefaultsString: the annotation form reads back to the same
// value; a part that is not one is an error naming it.
func TestRouteDefaultsString(t *testing.T) {
	for _, d := range []RouteDefaults{
		{},
		{Timeout: 200 * time.Millisecond},
		{Retries: 0, RetriesSet: true},
		{Timeout: 3 * time.Second, Retries: 2, RetriesSet: true, LoadBalance: "leastactive"},
	} {
		got, err := ParseRouteDefaults(d.String())
		if err != nil || got != d {
			t.Errorf("%q read back as %+v, %v; want %+v", d.String(), got, err, d)
		}
	}
	for _, bad := range []string{"timeout=-1s", "timeout=abc", "retries=-1", "weight=1"} {
		if _, err := ParseRouteDefaults(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

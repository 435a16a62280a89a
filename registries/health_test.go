package registries

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHealthLogsOneLineDownOneUp: a burst of failures logs one warning, a
// reminder per Reminder interval, and one line when the registry recovers.
// The warning says what is served: nothing before the registry's first
// complete listing, whatever reads succeeded before (one reader of several:
// a Nacos connection, a Consul agent whose datacenter has no path),
// last-known-good state after.
func TestHealthLogsOneLineDownOneUp(t *testing.T) {
	type step struct {
		at     time.Duration // since the start
		fail   bool
		listed bool // Listed after the read
	}
	const nothingServed = "Cannot read the registry; none of its services is served until it delivers a complete " +
		"listing (with state.dir, its persisted listing is, once sync.timeout passed)"
	cases := map[string]struct {
		steps []step
		// want is the sequence of log messages at info or above.
		want   []string
		wantUp bool
	}{
		"never read": {
			steps: []step{{0, true, false}, {time.Second, true, false}},
			want:  []string{nothingServed},
		},
		"a read succeeded, no complete listing": {
			steps: []step{{0, false, false}, {time.Second, true, false}},
			want:  []string{nothingServed},
		},
		"outage with a reminder": {
			steps: func() []step {
				s := []step{{0, false, true}}
				for i := range 1000 { // 1,000 failures over 100 s
					s = append(s, step{time.Second + time.Duration(i)*100*time.Millisecond, true, false})
				}
				return append(s, step{200 * time.Second, false, false})
			}(),
			want: []string{
				"Registry read failed; serving its last-known-good state until a read succeeds",
				"Registry reads still fail",
				"Registry read succeeded again",
			},
			wantUp: true,
		},
		"steady": {
			steps:  []step{{0, false, true}, {time.Second, false, false}, {2 * time.Second, false, false}},
			wantUp: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
			reg := "health-" + strings.ReplaceAll(name, " ", "-")
			h := NewHealth(reg, log)
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var now time.Time
			h.now = func() time.Time { return now }
			fails := 0
			for _, s := range tc.steps {
				now = start.Add(s.at)
				if s.fail {
					fails++
					h.Fail("read", errors.New("connection refused"))
				} else {
					h.OK()
				}
				if s.listed {
					h.Listed()
				}
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if _, rest, ok := strings.Cut(line, "msg=\""); ok {
					msg, _, _ := strings.Cut(rest, "\"")
					got = append(got, msg)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("log messages:\n got %q\nwant %q\nlog:\n%s", got, tc.want, buf.String())
			}
			st := h.Status()
			if st.Up != tc.wantUp || st.Errors != uint64(fails) {
				t.Errorf("status = %+v, want up=%v errors=%d", st, tc.wantUp, fails)
			}
			if st.Up && st.LastError != "" {
				t.Errorf("lastError %q kept after recovery", st.LastError)
			}
			if up := testutil.ToFloat64(registryUp.WithLabelValues(reg)); (up == 1) != tc.wantUp {
				t.Errorf("meshbridge_registry_up = %v, want up=%v", up, tc.wantUp)
			}
			if n := testutil.ToFloat64(RegistryErrors.WithLabelValues(reg, "read")); n != float64(fails) {
				t.Errorf("meshbridge_registry_errors_total = %v, want %d", n, fails)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	base := fmt.Errorf("open services.yaml: %w", fs.ErrNotExist)
	cases := map[string]struct {
		err  error
		want bool
	}{
		"nil":              {nil, false},
		"plain":            {base, false},
		"marked":           {Permanent(base), true},
		"wrapped marked":   {fmt.Errorf("registry %q: %w", "static", Permanent(base)), true},
		"marked twice":     {Permanent(Permanent(base)), true},
		"joined with mark": {errors.Join(base, Permanent(errors.New("403"))), true},
	}
	for name, tc := range cases {
		if got := IsPermanent(tc.err); got != tc.want {
			t.Errorf("%s: IsPermanent = %v, want %v", name, got, tc.want)
		}
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if !errors.Is(Permanent(base), fs.ErrNotExist) {
		t.Error("Permanent hides the cause from errors.Is")
	}
}

// TestHealthOutageStartsAtTheEarliestSign: a hung server's unanswered probe
// (FailSince, sent before the pause was noticed) reported after a request
// that timed out took the registry down moves the outage's start back to
// when the probe was sent: downFor is the outage's length.
func TestHealthOutageStartsAtTheEarliestSign(t *testing.T) {
	var buf bytes.Buffer
	h := NewHealth("health-earliest-sign", slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	h.now = func() time.Time { return now }
	h.OK()
	now = start.Add(6 * time.Second)
	h.Fail("list", errors.New("deadline exceeded")) // a listing sent after the hang began
	now = start.Add(7 * time.Second)
	h.FailSince("hung", errors.New("no answer"), start.Add(time.Second)) // the probe sent at 1 s
	if st := h.Status(); !st.Since.Equal(start.Add(time.Second)) {
		t.Errorf("Status.Since = %s, want the probe's send time %s", st.Since, start.Add(time.Second))
	}
	now = start.Add(10 * time.Second)
	h.OK()
	if !strings.Contains(buf.String(), "downFor=9s") {
		t.Errorf("log lacks downFor=9s:\n%s", buf.String())
	}
}

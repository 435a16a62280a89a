package registries

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLivenessRules: the Down and Up calls of a server's answers over
// time, one case per rule of Liveness (fake time: testing/synctest).
func TestLivenessRules(t *testing.T) {
	type answer struct {
		after time.Duration // how long the probe waits before answering
		err   error
	}
	errRefused := errors.New("connection refused")
	cases := map[string]struct {
		answers []answer // one per probe; the last repeats
		until   time.Duration
		want    []string
	}{
		"a server that answers is never down": {
			answers: []answer{{after: 10 * time.Millisecond}},
			until:   time.Minute,
		},
		"a probe unanswered for Timeout is down as of when it was sent, and its late answer is up": {
			answers: []answer{{after: 10 * time.Millisecond}, {after: 20 * time.Second}, {after: 10 * time.Millisecond}},
			until:   30 * time.Second,
			want: []string{
				"down at 7.01s since 2.01s: no answer within 5s: " + ErrHung.Error(),
				"up at 22.01s",
			},
		},
		"a probe with no answer past its context is replaced, the server stays down": {
			answers: []answer{{after: time.Hour}, {after: 10 * time.Millisecond}},
			until:   time.Minute,
			want: []string{
				"down at 5s since 0s: no answer within 5s: " + ErrHung.Error(),
				"up at 35.51s",
			},
		},
		"nothing to probe yet is no verdict": {
			answers: []answer{{err: ErrNotProbed}, {err: ErrNotProbed}, {}},
			until:   10 * time.Second,
		},
		"a failed probe is down; the first success after it is up": {
			answers: []answer{{err: errRefused}, {err: errRefused}, {}},
			until:   10 * time.Second,
			want:    []string{"down at 0s since 0s: connection refused", "up at 1s"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				at := func(tm time.Time) string { return tm.Sub(start).String() }
				var got []string
				n := 0
				l := &Liveness{
					Probe: func(ctx context.Context) error {
						a := tc.answers[min(n, len(tc.answers)-1)]
						n++
						select {
						case <-time.After(a.after):
							return a.err
						case <-ctx.Done():
							return ctx.Err()
						}
					},
					Down: func(err error, since time.Time) {
						got = append(got, fmt.Sprintf("down at %s since %s: %v", at(time.Now()), at(since), err))
					},
					Up: func() { got = append(got, "up at "+at(time.Now())) },
				}
				ctx, cancel := context.WithTimeout(t.Context(), tc.until)
				defer cancel()
				l.Run(ctx)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
			})
		})
	}
}

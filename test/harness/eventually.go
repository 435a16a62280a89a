package harness

import (
	"errors"
	"testing"
	"time"
)

// pollInterval is how often Eventually re-checks its condition.
const pollInterval = 20 * time.Millisecond

// Eventually checks cond every 20 ms until it returns nil, and fails the test
// with cond's last error when timeout passes first. It is the one way tests
// here wait for something: never a sleep that hopes the system caught up.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// EventuallyTrue is Eventually for a condition with no error to report.
func EventuallyTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = errors.New("condition not met yet")

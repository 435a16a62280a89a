package pipelinetest

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// tryT is a testing.TB for one attempt of a sequence: a failure ends the
// attempt's goroutine and is recorded, not reported to the test, so that
// a failing sequence can be shrunk by trying smaller ones.
type tryT struct {
	testing.TB // the real test: Name, TempDir, Context; never failed through tryT

	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (t *tryT) Helper() {}

func (t *tryT) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = append(t.failures, fmt.Sprintf(format, args...))
}

func (t *tryT) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }

func (t *tryT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

func (t *tryT) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }

func (t *tryT) Fail() { t.Errorf("failed") }

func (t *tryT) FailNow() { t.Fatalf("failed") }

func (t *tryT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.failures) > 0
}

func (t *tryT) Log(args ...any)                 {}
func (t *tryT) Logf(format string, args ...any) {}

func (t *tryT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// Try plays q on a new harness and returns its failure, "" when every
// Check passed, each client waited for at a Check up to timeout. t only
// provides what a test provides (a temporary directory); it is not failed.
func Try(t testing.TB, q Sequence, timeout time.Duration) string {
	tt := &tryT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for _, f := range slices.Backward(tt.cleanups) {
				f()
			}
		}()
		h := Start(tt, q.Options)
		sc := NewScene(h)
		sc.lenient, sc.timeout = true, timeout
		sc.Play(q.Steps()...)
	}()
	<-done
	return strings.Join(tt.failures, "\n")
}

// Shrink returns the shortest sequence, by whole events, that it finds
// still failing, and that sequence's failure: it drops chunks of events,
// halving the chunk size down to one event, while the sequence still fails
// (delta debugging; each attempt waits for clients up to timeout). The
// first event of each registry's listing and the clients' connections are
// dropped like any other.
func Shrink(t testing.TB, q Sequence, failure string, timeout time.Duration) (Sequence, string) {
	for chunk := len(q.Events) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(q.Events); {
			cand := q
			cand.Events = slices.Concat(q.Events[:i], q.Events[i+chunk:])
			if f := Try(t, cand, timeout); f != "" {
				q, failure = cand, f
				continue // the same i now names the next chunk
			}
			i += chunk
		}
	}
	return q, failure
}

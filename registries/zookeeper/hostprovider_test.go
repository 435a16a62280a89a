package zookeeper

import (
	"slices"
	"testing"
	"time"
)

// TestBackoffHostProvider: a round of every server without a session (with
// one server, every try but the very first) pauses 100 ms, doubling to
// 1 s, and never makes the client pause its own second; a connection resets
// the pauses.
func TestBackoffHostProvider(t *testing.T) {
	var slept []time.Duration
	p := newBackoffHostProvider()
	p.sleep = func(d time.Duration) { slept = append(slept, d) }
	if err := p.Init([]string{"127.0.0.1:2181"}); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		if _, retryStart := p.Next(); retryStart {
			t.Fatal("Next reported a retry start: the client would pause a second")
		}
	}
	p.Connected()
	p.Next()
	p.Next()
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, time.Second, time.Second, 100 * time.Millisecond, 200 * time.Millisecond}
	if !slices.Equal(slept, want) {
		t.Errorf("pauses %v, want %v", slept, want)
	}
}

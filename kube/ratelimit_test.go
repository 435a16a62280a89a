package kube

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// fakeClock is the clock of a RateLimiter under test: sleep advances it.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// lastSleep is how long the last Accept waited.
func (c *fakeClock) lastSleep() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept[len(c.slept)-1]
}

// TestRateLimiterSet: Set changes QPS, Burst and what is admitted: how many
// requests pass at once from a full bucket (the burst) and how long Accept
// then waits for the next token (1/qps; nothing without a limit). The
// clock is fake: each step advances it, calls Set, takes every token
// TryAccept gives (up to 100), then Accepts once.
func TestRateLimiterSet(t *testing.T) {
	type step struct {
		advance   time.Duration // first
		set       bool          // then Set(qps, burst)
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
		admitted  int
		waits     time.Duration
	}
	inf := float32(math.Inf(1))
	cases := []struct {
		name  string
		qps   float32
		burst int
		steps []step
	}{
		{
			name: "raise the limit", qps: 10, burst: 5,
			steps: []step{
				{wantQPS: 10, wantBurst: 5, admitted: 5, waits: 100 * time.Millisecond},
				// Until Set the empty bucket refills at the old rate, up to
				// the old burst; from then on at the new rate, up to the
				// new burst.
				{advance: time.Second, set: true, qps: 100, burst: 20, wantQPS: 100, wantBurst: 20, admitted: 5, waits: 10 * time.Millisecond},
				{advance: time.Second, wantQPS: 100, wantBurst: 20, admitted: 20, waits: 10 * time.Millisecond},
			},
		},
		{
			name: "lower the limit", qps: 100, burst: 20,
			steps: []step{
				{wantQPS: 100, wantBurst: 20, admitted: 20, waits: 10 * time.Millisecond},
				// Tokens held beyond the new burst are dropped.
				{advance: time.Second, set: true, qps: 2, burst: 4, wantQPS: 2, wantBurst: 4, admitted: 4, waits: 500 * time.Millisecond},
				{advance: time.Second, wantQPS: 2, wantBurst: 4, admitted: 2, waits: 500 * time.Millisecond},
			},
		},
		{
			name: "lift the limit, then set one", qps: 10, burst: 1,
			steps: []step{
				{set: true, qps: 0, burst: 1, wantQPS: inf, wantBurst: 1, admitted: 100},
				{set: true, qps: -1, burst: 5, wantQPS: inf, wantBurst: 5, admitted: 100},
				{advance: time.Second, set: true, qps: 4, burst: 2, wantQPS: 4, wantBurst: 2, admitted: 2, waits: 250 * time.Millisecond},
			},
		},
		{
			name: "a burst below 1 is 1", qps: 1, burst: 0,
			steps: []step{
				{wantQPS: 1, wantBurst: 1, admitted: 1, waits: time.Second},
				{set: true, qps: 2, burst: -3, wantQPS: 2, wantBurst: 1, admitted: 0, waits: 500 * time.Millisecond},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1_000_000, 0)}
			r := newRateLimiter(c.qps, c.burst, clock.now, clock.sleep)
			for i, s := range c.steps {
				clock.advance(s.advance)
				if s.set {
					r.Set(s.qps, s.burst)
				}
				if got := r.QPS(); got != s.wantQPS {
					t.Errorf("step %d: QPS() = %v, want %v", i, got, s.wantQPS)
				}
				if got := r.Burst(); got != s.wantBurst {
					t.Errorf("step %d: Burst() = %v, want %v", i, got, s.wantBurst)
				}
				admitted := 0
				for admitted < 100 && r.TryAccept() {
					admitted++
				}
				if admitted != s.admitted {
					t.Errorf("step %d: %d requests admitted at once, want %d", i, admitted, s.admitted)
				}
				r.Accept()
				if got := clock.lastSleep(); got != s.waits {
					t.Errorf("step %d: Accept waited %v, want %v", i, got, s.waits)
				}
			}
		})
	}
}

// TestRateLimiterWait: Wait (what client-go's requests call) follows Set.
// With an empty bucket and a token every 1000 s it fails at once (the
// token would come after the context's deadline); without a limit every
// request passes; with a high limit the next token is a millisecond away.
func TestRateLimiterWait(t *testing.T) {
	r := NewRateLimiter(0.001, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("the first request (the burst): %v", err)
	}
	if err := r.Wait(ctx); err == nil {
		t.Fatal("Wait passed with an empty bucket and the next token 1000 s away")
	}
	r.Set(0, 1)
	for i := range 100 {
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("request %d without a limit: %v", i, err)
		}
	}
	r.Set(0.001, 1)
	passed := 0
	for passed <= 1 && r.Wait(ctx) == nil {
		passed++
	}
	if passed > 1 {
		t.Fatalf("%d requests passed under a limit of burst 1 and a token every 1000 s", passed)
	}
	r.Set(1000, 1)
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("a request at 1000 qps: %v", err)
	}
}

// TestRateLimiterConcurrentSet: Set while requests take tokens (run under
// -race).
func TestRateLimiterConcurrentSet(t *testing.T) {
	r := NewRateLimiter(1e6, 1000)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 500 {
				_ = r.TryAccept()
				_ = r.Wait(ctx)
				_ = r.QPS()
			}
		})
	}
	wg.Go(func() {
		for i := range 500 {
			r.Set(float32(1e6+i), 1000+i)
		}
	})
	wg.Wait()
	if got, want := r.QPS(), float32(1e6+499); got != want {
		t.Errorf("QPS() = %v, want %v", got, want)
	}
}

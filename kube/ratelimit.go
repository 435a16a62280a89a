package kube

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
)

// RateLimiter is a client-go request rate limiter (rest.Config.RateLimiter)
// whose limit can be changed while clients use it: kubernetes.qps and
// kubernetes.burst apply on a configuration reload without rebuilding the
// clients. It is client-go's token bucket (flowcontrol's
// NewTokenBucketRateLimiter: golang.org/x/time/rate, initially full)
// with Set added. Safe for concurrent use.
//
// A rest.Config with RateLimiter set ignores its QPS and Burst, and every
// clientset built from it shares the one bucket: give clients that must not
// wait behind the writer's requests (the leader election's Lease renewals)
// a RateLimiter of their own.
type RateLimiter struct {
	limiter *rate.Limiter
	// now and sleep are the clock of TryAccept, Accept and Set; Wait uses
	// the real clock (rate.Limiter.Wait), as client-go's does.
	now   func() time.Time
	sleep func(time.Duration)
}

var _ flowcontrol.RateLimiter = (*RateLimiter)(nil)

// NewRateLimiter returns a RateLimiter admitting qps requests per second on
// average and bursts of up to burst; see Set.
func NewRateLimiter(qps float32, burst int) *RateLimiter {
	return newRateLimiter(qps, burst, time.Now, time.Sleep)
}

func newRateLimiter(qps float32, burst int, now func() time.Time, sleep func(time.Duration)) *RateLimiter {
	return &RateLimiter{limiter: rate.NewLimiter(limitOf(qps), burstOf(burst)), now: now, sleep: sleep}
}

// Set changes the limit to qps requests per second with bursts of up to
// burst, from now on: the tokens the bucket holds are kept (up to the new
// burst), and requests already waiting keep the delay they were given.
// qps ≤ 0 means no limit, as a negative rest.Config.QPS does; a burst
// below 1 is 1.
func (r *RateLimiter) Set(qps float32, burst int) {
	now := r.now()
	r.limiter.SetLimitAt(now, limitOf(qps))
	r.limiter.SetBurstAt(now, burstOf(burst))
}

func limitOf(qps float32) rate.Limit {
	if qps <= 0 {
		return rate.Inf
	}
	return rate.Limit(qps)
}

func burstOf(burst int) int { return max(burst, 1) }

// TryAccept takes a token if one is available now.
func (r *RateLimiter) TryAccept() bool { return r.limiter.AllowN(r.now(), 1) }

// Accept waits for a token.
func (r *RateLimiter) Accept() {
	now := r.now()
	r.sleep(r.limiter.ReserveN(now, 1).DelayFrom(now))
}

// Wait waits for a token until ctx is done; it fails at once when the wait
// would outlast ctx's deadline.
func (r *RateLimiter) Wait(ctx context.Context) error { return r.limiter.Wait(ctx) }

// Stop does nothing: there is nothing to release.
func (r *RateLimiter) Stop() {}

// QPS is the current limit in requests per second; +Inf when there is none.
func (r *RateLimiter) QPS() float32 {
	l := r.limiter.Limit()
	if l == rate.Inf {
		return float32(math.Inf(1))
	}
	return float32(l)
}

// Burst is the current burst.
func (r *RateLimiter) Burst() int { return r.limiter.Burst() }

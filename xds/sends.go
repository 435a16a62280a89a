package xds

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// slowSendAfter is how long one Send may hold a slot of the sendLimiter. A
// Send that blocks longer (the client stopped reading and gRPC flow control
// ran out) gives its slot back, so at most this long can slow clients delay
// the sends of others even when every slot is taken by one.
const slowSendAfter = 50 * time.Millisecond

// defaultMaxSends bounds the ADS sends in progress at once: a Send spends its
// time marshalling the DiscoveryResponse envelope (the resources inside are
// already bytes, see resources.go) and copying it to the transport, which is
// CPU work; more of them at once than cores only adds contention when a push
// wakes thousands of streams.
func defaultMaxSends() int {
	return max(4, 2*runtime.GOMAXPROCS(0))
}

// sendLimiter bounds the number of concurrent ADS stream sends. It is the
// only back-pressure point between streams: go-control-plane serves each
// stream in its own goroutines, and a LinearCache hands a response to a
// stream's buffered channel (one slot per watch) without waiting for the
// stream, so a push never waits for a client; only the sends themselves
// compete, here, for a bounded time each (slowSendAfter).
type sendLimiter struct {
	slots     chan struct{}
	slowAfter time.Duration
}

func newSendLimiter(n int, slowAfter time.Duration) *sendLimiter {
	return &sendLimiter{slots: make(chan struct{}, n), slowAfter: slowAfter}
}

// do runs send holding a slot, released when send returns or after
// slowAfter, whichever comes first. It returns send's error, or done's
// reason when the stream ends while waiting for a slot.
func (l *sendLimiter) do(done <-chan struct{}, send func() error) error {
	select {
	case l.slots <- struct{}{}:
	case <-done:
		return errStreamDone
	}
	release := sync.OnceFunc(func() { <-l.slots })
	timer := time.AfterFunc(l.slowAfter, release)
	defer func() {
		timer.Stop()
		release()
	}()
	return send()
}

// intercept is a grpc.StreamServerInterceptor that routes every message the
// handler sends through the limiter.
func (l *sendLimiter) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &limitedStream{ServerStream: ss, limiter: l})
}

type limitedStream struct {
	grpc.ServerStream
	limiter *sendLimiter
}

func (s *limitedStream) SendMsg(m any) error {
	return s.limiter.do(s.Context().Done(), func() error { return s.ServerStream.SendMsg(m) })
}

// errStreamDone is returned by a send abandoned because its stream ended;
// go-control-plane then ends the stream's handler.
var errStreamDone = errors.New("stream ended while waiting to send")

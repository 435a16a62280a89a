package xds

import (
	"errors"
	"runtime"
	"sync/atomic"
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
// stream in its own goroutines, and the cache hands a response to a
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

// sender is one stream's use of the limiter. A stream sends one message at
// a time (grpc.ServerStream.SendMsg must not be called concurrently), so a
// sender holds at most one slot; a send allocates nothing: the sender
// keeps one timer for slowAfter and re-arms it per send.
type sender struct {
	limiter *sendLimiter
	done    <-chan struct{} // the stream's end

	seq uint64 // numbers the stream's sends; only the sending goroutine touches it
	// holder is the number of the send holding a slot, 0 when none: the
	// send's end and its slow timer race to swap it to 0, and the winner
	// gives the slot back.
	holder atomic.Uint64
	slow   *slowTimer // nil until the first send, and after a timer fired
}

// slowTimer releases a send's slot after slowAfter. A timer that fired is
// never armed again: its callback may still run, reading send.
type slowTimer struct {
	timer *time.Timer
	send  atomic.Uint64 // the send it is armed for
}

func (l *sendLimiter) sender(done <-chan struct{}) *sender {
	return &sender{limiter: l, done: done}
}

// acquire waits for a slot and returns the send's number, or
// errStreamDone when the stream ends first. The slot is given back by
// finish(n), or after slowAfter, whichever comes first.
func (s *sender) acquire() (uint64, error) {
	select {
	case s.limiter.slots <- struct{}{}:
	case <-s.done:
		return 0, errStreamDone
	}
	s.seq++
	n := s.seq
	s.holder.Store(n)
	if t := s.slow; t != nil {
		t.send.Store(n)
		t.timer.Reset(s.limiter.slowAfter)
		return n, nil
	}
	t := &slowTimer{}
	t.send.Store(n)
	t.timer = time.AfterFunc(s.limiter.slowAfter, func() { s.release(t.send.Load()) })
	s.slow = t
	return n, nil
}

// finish ends send n: its slot is given back unless its timer did.
func (s *sender) finish(n uint64) {
	if !s.slow.timer.Stop() {
		s.slow = nil
	}
	s.release(n)
}

// release gives back the slot of send n if it still holds one.
func (s *sender) release(n uint64) {
	if s.holder.CompareAndSwap(n, 0) {
		<-s.limiter.slots
	}
}

// do runs send holding a slot (acquire, finish). It returns send's error,
// or errStreamDone when the stream ends while waiting for a slot.
func (s *sender) do(send func() error) error {
	n, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.finish(n)
	return send()
}

// intercept is a grpc.StreamServerInterceptor that routes every message the
// handler sends through the limiter.
func (l *sendLimiter) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &limitedStream{ServerStream: ss, sender: l.sender(ss.Context().Done())})
}

type limitedStream struct {
	grpc.ServerStream
	sender *sender
}

func (s *limitedStream) SendMsg(m any) error {
	n, err := s.sender.acquire()
	if err != nil {
		return err
	}
	defer s.sender.finish(n)
	return s.ServerStream.SendMsg(m)
}

// errStreamDone is returned by a send abandoned because its stream ended;
// go-control-plane then ends the stream's handler.
var errStreamDone = errors.New("stream ended while waiting to send")

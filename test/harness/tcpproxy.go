package harness

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxyDialTimeout bounds the proxy's connection to its target.
const proxyDialTimeout = 5 * time.Second

// proxyBufSize is the most the proxy reads before it forwards.
const proxyBufSize = 32 << 10

// TCPProxy forwards every connection made to a 127.0.0.1 port to a target
// address, byte for byte, so that a test can break the connections between
// a client and a server at a moment it chooses: Cut closes every open pair
// at once, and CutAfter does so once a given number of the target's bytes
// were forwarded, in the middle of whatever the target was sending. The
// proxy keeps accepting after a cut, so a client that reconnects gets
// through again. When either side of a pair ends, the proxy closes both
// (no half-close: what gRPC's HTTP/2 needs). It counts the bytes it
// forwards each way. Safe for concurrent use; the test's cleanup closes it.
type TCPProxy struct {
	target string
	lis    net.Listener

	mu     sync.Mutex
	pairs  map[*proxyPair]struct{}
	closed bool
	trip   *ProxyTrip // armed by CutAfter, nil when none is

	wg       sync.WaitGroup
	accepted atomic.Int64
	cuts     atomic.Int64
	toClient atomic.Int64 // target → clients
	toTarget atomic.Int64 // clients → target
}

// proxyPair is one client's connection and the proxy's to the target.
type proxyPair struct {
	client, target net.Conn
	once           sync.Once
}

func (pp *proxyPair) close() {
	pp.once.Do(func() {
		_ = pp.client.Close()
		_ = pp.target.Close()
	})
}

// StartTCPProxy listens on a free 127.0.0.1 port and forwards each
// connection to target until the test ends (or Close).
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{target: target, lis: lis, pairs: map[*proxyPair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *TCPProxy) Addr() string { return p.lis.Addr().String() }

// Accepted is how many connections the proxy has accepted.
func (p *TCPProxy) Accepted() int64 { return p.accepted.Load() }

// Open is how many connection pairs are open now.
func (p *TCPProxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Cuts is how many cuts (Cut, or a CutAfter that fired) closed at least
// one pair.
func (p *TCPProxy) Cuts() int64 { return p.cuts.Load() }

// BytesToClient is how many bytes the proxy has forwarded from the target
// to its clients.
func (p *TCPProxy) BytesToClient() int64 { return p.toClient.Load() }

// BytesToTarget is how many bytes the proxy has forwarded from its
// clients to the target.
func (p *TCPProxy) BytesToTarget() int64 { return p.toTarget.Load() }

// Cut closes every open connection pair at once, both sides, and returns
// how many it closed. The proxy keeps accepting.
func (p *TCPProxy) Cut() int {
	p.mu.Lock()
	pairs := make([]*proxyPair, 0, len(p.pairs))
	for pp := range p.pairs {
		pairs = append(pairs, pp)
		delete(p.pairs, pp)
	}
	p.mu.Unlock()
	for _, pp := range pairs {
		pp.close()
	}
	if len(pairs) > 0 {
		p.cuts.Add(1)
	}
	return len(pairs)
}

// Close stops accepting, closes every open pair and waits until the
// proxy's goroutines have ended. A second Close does nothing.
func (p *TCPProxy) Close() {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return
	}
	_ = p.lis.Close()
	p.Cut()
	p.wg.Wait()
}

// ProxyTrip is a cut armed by CutAfter.
type ProxyTrip struct {
	remaining int64 // under the proxy's mu
	fired     atomic.Bool
	dropped   atomic.Int64
	pairs     atomic.Int64
}

// Fired reports whether the cut happened.
func (tr *ProxyTrip) Fired() bool { return tr.fired.Load() }

// Dropped is how many bytes the target had sent that the cut kept from the
// client: the rest of the read in which the count was reached (0 when the
// count ended with a read, or before the cut).
func (tr *ProxyTrip) Dropped() int64 { return tr.dropped.Load() }

// Pairs is how many connection pairs the cut closed.
func (tr *ProxyTrip) Pairs() int64 { return tr.pairs.Load() }

// CutAfter arms a cut: once n more bytes (at least 1) from the target have
// been forwarded to clients, counted over every pair, the proxy forwards
// no more of the read that reached n and closes every open pair (Cut), so
// that a client receives exactly the first n bytes of what the target sends
// from now on, however the target's writes were split. Arming replaces a
// cut armed before that has not fired.
func (p *TCPProxy) CutAfter(n int64) *ProxyTrip {
	tr := &ProxyTrip{remaining: max(n, 1)}
	p.mu.Lock()
	p.trip = tr
	p.mu.Unlock()
	return tr
}

// take accounts n bytes read from the target: it returns how many of them
// to forward, and the armed trip when they reach it (disarmed then).
func (p *TCPProxy) take(n int) (int, *ProxyTrip) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tr := p.trip
	if tr == nil || int64(n) < tr.remaining {
		if tr != nil {
			tr.remaining -= int64(n)
		}
		return n, nil
	}
	send := int(tr.remaining)
	tr.remaining = 0
	tr.dropped.Store(int64(n - send))
	p.trip = nil
	return send, tr
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient error (e.g. EMFILE): keep serving
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for client c and pipes both ways until either
// side ends or the pair is cut.
func (p *TCPProxy) serve(c net.Conn) {
	defer p.wg.Done()
	tc, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		_ = c.Close()
		return
	}
	pp := &proxyPair{client: c, target: tc}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pp.close()
		return
	}
	p.pairs[pp] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pipe(pp, c, tc, &p.toTarget, false)
	}()
	p.pipe(pp, tc, c, &p.toClient, true)
	<-done
	p.mu.Lock()
	delete(p.pairs, pp)
	p.mu.Unlock()
}

// pipe copies from src to dst, counting into n, until either fails; then
// it closes the pair. fromTarget marks the direction CutAfter counts.
func (p *TCPProxy) pipe(pp *proxyPair, src, dst net.Conn, n *atomic.Int64, fromTarget bool) {
	defer pp.close()
	buf := make([]byte, proxyBufSize)
	for {
		r, err := src.Read(buf)
		if r > 0 {
			send, tr := r, (*ProxyTrip)(nil)
			if fromTarget {
				send, tr = p.take(r)
			}
			w, werr := dst.Write(buf[:send])
			n.Add(int64(w))
			if tr != nil {
				tr.pairs.Store(int64(p.Cut()))
				tr.fired.Store(true)
				return
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, a reset or a cut: the pair ends either way
		}
	}
}

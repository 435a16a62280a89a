package zookeeper

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Retry pacing of a client that tried every server without a session:
// retryFirst after the first round, doubling up to retryMax.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = time.Second
)

// backoffHostProvider is go-zookeeper's DNSHostProvider (hosts resolved
// once, shuffled) whose pause after a round of every server without a
// session is a backoff from 100 ms to 1 s instead of a fixed second. The
// client asks for that pause after any round that did not connect,
// including one the server answered with "session expired": a server that
// resumes after hanging past the session timeout answers so, and the fixed
// second, taken once or twice, kept the registry down for up to 2 s after
// the server was back. Against a server that refuses connections the
// pauses grow to the same second as before.
type backoffHostProvider struct {
	*zk.DNSHostProvider
	mu    sync.Mutex
	delay time.Duration
	sleep func(time.Duration) // time.Sleep; tests replace it
}

var _ zk.HostProvider = (*backoffHostProvider)(nil)

func newBackoffHostProvider() *backoffHostProvider {
	return &backoffHostProvider{DNSHostProvider: zk.NewDNSHostProvider(), sleep: time.Sleep}
}

// Next implements zk.HostProvider: it never reports a retry start (which
// makes the client pause a second), and pauses itself instead.
func (p *backoffHostProvider) Next() (string, bool) {
	server, retryStart := p.DNSHostProvider.Next()
	if retryStart {
		p.mu.Lock()
		p.delay = min(max(2*p.delay, retryFirst), retryMax)
		d := p.delay
		p.mu.Unlock()
		p.sleep(d)
	}
	return server, false
}

// Connected implements zk.HostProvider and resets the backoff.
func (p *backoffHostProvider) Connected() {
	p.DNSHostProvider.Connected()
	p.mu.Lock()
	p.delay = 0
	p.mu.Unlock()
}

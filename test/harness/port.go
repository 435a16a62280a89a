package harness

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Ports for test servers are picked at random below the kernel's ephemeral
// port range (net.ipv4.ip_local_port_range, 32768-60999 by default), where
// no outgoing connection takes its source port: a port picked inside that
// range (a listener on port 0) can be taken by any connection another test
// opens before the server binds it ("bind: address already in use"). Each
// pick is checked free for TCP and UDP (Consul's Serf ports are both) on
// 127.0.0.1. Another test picking the same port in the moment before either
// binds it is the one race left: one in thousands of ports.

// pickSpan is how many ports below the ephemeral range are picked from.
const pickSpan = 12000

// FreePort returns a TCP and UDP port on 127.0.0.1 that was free a moment
// ago (see pickSpan).
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct ports on 127.0.0.1, free for TCP and UDP a
// moment ago (see pickSpan).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// freePorts returns n distinct ports, holding each open until all are
// picked so none repeats.
func freePorts(n int) ([]int, error) {
	pp := newPortPicker()
	defer pp.close()
	ports := make([]int, 0, n)
	for range n {
		p, err := pp.pick()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// freePortSet returns a port p such that p and p+offset, for every offset,
// were all free a moment ago: a server that derives ports from its own
// (Nacos: gRPC +1000 and +1001, JRaft -1000).
func freePortSet(offsets ...int) (int, error) {
	pp := newPortPicker()
	defer pp.close()
	return pp.pick(offsets...)
}

// portPicker picks ports in pickRange, holding what it picked open (TCP
// and UDP) until close, so that no port is picked twice.
type portPicker struct {
	lo, hi int
	held   []io.Closer
}

func newPortPicker() *portPicker {
	lo, hi := pickRange()
	return &portPicker{lo: lo, hi: hi}
}

// pick returns a port p such that p and p+offset, for every offset, are in
// the pick range and were free, and holds them.
func (pp *portPicker) pick(offsets ...int) (int, error) {
	lo, hi := pp.lo, pp.hi
	for _, off := range offsets {
		lo, hi = max(lo, pp.lo-off), min(hi, pp.hi-off)
	}
	if lo >= hi {
		return 0, fmt.Errorf("no port p in %d-%d with p%+v in it too", pp.lo, pp.hi-1, offsets)
	}
	for range 100 {
		p := lo + rand.IntN(hi-lo)
		if held, ok := hold(append([]int{p}, shifted(p, offsets)...)); ok {
			pp.held = append(pp.held, held...)
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port p in %d-%d with p%+v free too after 100 tries", lo, hi-1, offsets)
}

func (pp *portPicker) close() {
	for _, c := range pp.held {
		_ = c.Close()
	}
}

func shifted(p int, offsets []int) []int {
	out := make([]int, len(offsets))
	for i, off := range offsets {
		out[i] = p + off
	}
	return out
}

// hold listens on every port (TCP and UDP on 127.0.0.1); ok is false, and
// nothing is held, when one is taken.
func hold(ports []int) (held []io.Closer, ok bool) {
	for _, p := range ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err == nil {
			held = append(held, l)
			var u net.PacketConn
			if u, err = net.ListenPacket("udp", addr); err == nil {
				held = append(held, u)
			}
		}
		if err != nil {
			for _, c := range held {
				_ = c.Close()
			}
			return nil, false
		}
	}
	return held, true
}

// pickRange is [lo, hi): the pickSpan ports below the ephemeral range, from
// 1024 at least.
func pickRange() (lo, hi int) {
	hi = 32768
	if lo, err := ephemeralLow(); err == nil && lo > 1024+1000 {
		hi = lo
	}
	return max(1024, hi-pickSpan), hi
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, errors.New("ip_local_port_range: not two fields")
	}
	return strconv.Atoi(f[0])
}

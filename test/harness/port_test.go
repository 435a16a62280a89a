package harness

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsBelowTheEphemeralRange: the ports are distinct, below the
// kernel's ephemeral range, and free for TCP and UDP.
func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := pickRange()
	if low, err := ephemeralLow(); err == nil && hi > low {
		t.Fatalf("pick range %d-%d reaches into the ephemeral range from %d", lo, hi-1, low)
	}
	ports := FreePorts(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("ports %v: %d repeated or outside %d-%d", ports, p, lo, hi-1)
		}
		seen[p] = true
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %d not free for TCP: %v", p, err)
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("port %d not free for UDP: %v", p, err)
		}
		_ = l.Close()
		_ = u.Close()
	}
}

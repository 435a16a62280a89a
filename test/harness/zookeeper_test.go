package harness

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestZooKeeperEphemeralWatchRestart: the server listens on 127.0.0.1 only,
// on the port it reports; a node one client creates, ephemeral or
// sequential, under parents CreatePath made, reaches another client's
// children watch; closing the first client's session removes its ephemeral
// node; Restart comes back on the same port with the persistent nodes, and
// the clients reconnect by themselves; Stop ends the process.
func TestZooKeeperEphemeralWatchRestart(t *testing.T) {
	start := time.Now()
	z := StartZooKeeper(t)
	t.Logf("zookeeper ready %s after start", time.Since(start).Round(time.Millisecond))
	port := zooKeeperPort(t, z)
	assertListeners(t, z.Pid(), []int{port})
	if !slices.Equal(z.Servers(), []string{z.Address()}) {
		t.Fatalf("Servers %v, Address %s", z.Servers(), z.Address())
	}

	const dir = "/dubbo/com.example.Greeter/providers"
	a, b := z.Client(t), z.Client(t)
	if got := CreatePath(t, a, dir+"/kept", []byte("persistent"), zk.FlagPersistent); got != dir+"/kept" {
		t.Fatalf("CreatePath returned %q", got)
	}
	children, _, watch, err := b.ChildrenW(dir)
	if err != nil || !slices.Equal(children, []string{"kept"}) {
		t.Fatalf("children of %s: %v, %v", dir, children, err)
	}
	CreatePath(t, a, dir+"/ephemeral", []byte("a's"), zk.FlagEphemeral)
	seq := CreatePath(t, a, dir+"/seq-", nil, zk.FlagEphemeral|zk.FlagSequence)
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(dir) + `/seq-\d{10}$`).MatchString(seq) {
		t.Fatalf("sequential node created as %q", seq)
	}
	waitChildrenEvent(t, watch, dir)
	assertChildren(t, b, dir, "ephemeral", "kept", seq[len(dir)+1:])

	// Closing a's session removes its ephemeral nodes at once.
	_, _, watch, err = b.ChildrenW(dir)
	if err != nil {
		t.Fatalf("watch %s: %v", dir, err)
	}
	a.Close()
	waitChildrenEvent(t, watch, dir)
	assertChildren(t, b, dir, "kept")

	// A client asking for more than the maximum session gets the maximum.
	long, _, err := zk.Connect(z.Servers(), time.Minute, zk.WithLogger(&zkLogger{t: t}))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer long.Close()
	Eventually(t, zooKeeperWait, "60 s session clamped", func() error {
		if long.State() != zk.StateHasSession {
			return fmt.Errorf("client state %s", long.State())
		}
		cons, err := z.FourLetterWord("cons")
		if err != nil {
			return err
		}
		want := fmt.Sprintf("sid=0x%x,", long.SessionID())
		for _, line := range strings.Split(cons, "\n") {
			if strings.Contains(line, want) {
				if to := fmt.Sprintf("to=%d,", ZooKeeperMaxSessionTimeout.Milliseconds()); !strings.Contains(line, to) {
					return fmt.Errorf("session %s without %s: %s", want, to, line)
				}
				return nil
			}
		}
		return fmt.Errorf("no %s in cons: %s", want, cons)
	})
	long.Close()

	oldPid := z.Pid()
	start = time.Now()
	z.Restart(t)
	t.Logf("zookeeper restarted in %s", time.Since(start).Round(time.Millisecond))
	if z.Pid() == oldPid || z.Pid() == 0 {
		t.Fatalf("pid after restart %d, before %d", z.Pid(), oldPid)
	}
	if zooKeeperPort(t, z) != port {
		t.Fatalf("address after restart %s, port before %d", z.Address(), port)
	}
	assertListeners(t, z.Pid(), []int{port})
	Eventually(t, zooKeeperWait, "client b reconnected after restart", func() error {
		if s := b.State(); s != zk.StateHasSession {
			return fmt.Errorf("client state %s", s)
		}
		data, _, err := b.Get(dir + "/kept")
		if err != nil {
			return err
		}
		if string(data) != "persistent" {
			return fmt.Errorf("%s/kept holds %q", dir, data)
		}
		return nil
	})
	assertChildren(t, z.Client(t), dir, "kept")

	pid := z.Pid()
	z.Stop()
	if z.Pid() != 0 {
		t.Fatalf("Pid after Stop: %d", z.Pid())
	}
	if processExists(pid) {
		t.Fatalf("process %d still exists after Stop", pid)
	}
	z.Stop() // a no-op
}

func zooKeeperPort(t *testing.T, z *ZooKeeper) int {
	t.Helper()
	host, p, err := net.SplitHostPort(z.Address())
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host != "127.0.0.1" {
		t.Fatalf("Address %q", z.Address())
	}
	return port
}

// waitChildrenEvent waits for a children watch on dir to fire.
func waitChildrenEvent(t *testing.T, watch <-chan zk.Event, dir string) {
	t.Helper()
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNodeChildrenChanged || ev.Path != dir {
			t.Fatalf("watch on %s: %+v", dir, ev)
		}
	case <-time.After(zooKeeperWait):
		t.Fatalf("no children watch event on %s within %s", dir, zooKeeperWait)
	}
}

func assertChildren(t *testing.T, conn *zk.Conn, dir string, want ...string) {
	t.Helper()
	got, _, err := conn.Children(dir)
	if err != nil {
		t.Fatalf("children of %s: %v", dir, err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("children of %s: %v, want %v", dir, got, want)
	}
}

package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file runs Apache ZooKeeper, the registry Dubbo providers write their
// URLs to, as a standalone server: Debian's ZooKeeper 3.8 (packages
// zookeeper, libzookeeper-java and libslf4j-java, installed by
// tools/build.sh zookeeper) on a JVM,
//
//	java -cp <classpath> org.apache.zookeeper.server.ZooKeeperServerMain <dir>/zoo.cfg
//
// with zoo.cfg, the data dir (<dir>/data) and the log (<dir>/zookeeper.log)
// in a fresh directory under t.TempDir(). The classpath is Debian's
// zookeeper.jar, whose manifest Class-Path names the server's other jars
// (zookeeper-jute, netty, commons-*, slf4j-api, ...), and slf4j-simple.jar,
// through which the server logs to stderr.
//
// What the config sets, and why:
//   - tickTime=200 (ZooKeeperTick). ZooKeeper clamps every session timeout a
//     client asks for to [2, 20] × tickTime, here [0.4 s, 4 s]: a test may
//     ask for 0.4-4 s sessions, and any client asking for more (Curator's
//     default is 60 s) gets 4 s, so an ephemeral node of a killed client is
//     gone within about 4 s.
//   - clientPort a free port on clientPortAddress=127.0.0.1: the only
//     listener (admin.enableServer=false turns off the AdminServer's HTTP
//     port 8080; no JMX port is opened).
//   - maxClientCnxns=0: no per-address connection limit (every client of a
//     test connects from 127.0.0.1; the default is 60).
//   - 4lw.commands.whitelist=srvr,ruok,stat,cons,mntr: the four-letter words
//     the readiness check and a test's debugging use.
//   - forceSync=no: transactions are written to the log without fsync. A
//     killed server loses nothing (the kernel keeps the writes); only a crash
//     of the machine would.

const (
	// ZooKeeperTick is the servers' tickTime. ZooKeeper clamps a session
	// timeout to [ZooKeeperMinSessionTimeout, ZooKeeperMaxSessionTimeout].
	ZooKeeperTick = 200 * time.Millisecond
	// ZooKeeperMinSessionTimeout is the shortest session a server grants:
	// 2 × ZooKeeperTick.
	ZooKeeperMinSessionTimeout = 2 * ZooKeeperTick
	// ZooKeeperMaxSessionTimeout is the longest session a server grants:
	// 20 × ZooKeeperTick. ZooKeeper.Client asks for it.
	ZooKeeperMaxSessionTimeout = 20 * ZooKeeperTick
	// zooKeeperWait bounds a client's wait for its session.
	zooKeeperWait = 15 * time.Second
	// zooKeeperMain is the standalone server's main class.
	zooKeeperMain = "org.apache.zookeeper.server.ZooKeeperServerMain"
	// flwTimeout bounds a four-letter-word exchange.
	flwTimeout = 2 * time.Second
)

// zooKeeperJVMFlags keep a test server's JVM small and quick to start: a
// 256 MB heap, the serial collector (fewest threads), the class-data sharing
// archive when there is one, C1 only, no hsperfdata file in /tmp, IPv4
// sockets; and no AdminServer.
var zooKeeperJVMFlags = []string{
	"-Xmx256m", "-XX:+UseSerialGC", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
	"-Djava.net.preferIPv4Stack=true",
	"-Dzookeeper.admin.enableServer=false",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
	"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
}

// ZooKeeper is a running standalone ZooKeeper server started by this
// package.
type ZooKeeper struct {
	srv  server // its dir holds zoo.cfg, data/ and zookeeper.log
	port int
}

// StartZooKeeper starts a standalone ZooKeeper server with an empty data dir
// in a fresh directory under t.TempDir(), on 127.0.0.1 and a free port, and
// returns it once the process listening on that port is the server started
// here and its srvr four-letter word reports a Mode (it answers ruok before
// it serves requests). The JVM is ready in about half a second on an idle
// machine. The test's cleanup stops the server.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	cp := ZooKeeperClasspath(t)
	java, err := exec.LookPath("java")
	if err != nil {
		missing(t, "zookeeper", "no java on PATH for ZooKeeper (Debian's zookeeper package depends on default-jre)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	z := &ZooKeeper{
		srv: server{
			name:      "zookeeper",
			bin:       java,
			args:      append(slices.Clone(zooKeeperJVMFlags), "-cp", cp, zooKeeperMain, cfg),
			dir:       dir,
			log:       filepath.Join(dir, "zookeeper.log"),
			tailLines: 40,
		},
		port: FreePort(t),
	}
	if err := os.WriteFile(cfg, []byte(z.config(filepath.Join(dir, "data"))), 0o644); err != nil {
		t.Fatalf("write zoo.cfg: %v", err)
	}
	z.srv.stopAtEnd(t)
	z.srv.start(t, z.Address(), z.ready)
	return z
}

// config is the server's zoo.cfg (see the file comment).
func (z *ZooKeeper) config(dataDir string) string {
	return fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,cons,mntr
forceSync=no
`, ZooKeeperTick.Milliseconds(), dataDir, z.port)
}

// ready tells whether the server started here holds the listening socket on
// the client port (not another process that took the port first) and
// srvr reports its Mode ("standalone").
func (z *ZooKeeper) ready() error {
	pid := z.srv.pid()
	if pid == 0 {
		return errors.New("not running")
	}
	l, err := tcpListeners(pid)
	if err != nil {
		return fmt.Errorf("listeners of pid %d: %v", pid, err)
	}
	if !slices.Contains(l, z.Address()) {
		return fmt.Errorf("pid %d does not listen on %s yet (listens on %v)", pid, z.Address(), l)
	}
	out, err := z.FourLetterWord("srvr")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Mode:") {
			return nil
		}
	}
	return fmt.Errorf("srvr reports no Mode yet: %q", out)
}

// FourLetterWord sends a four-letter word (srvr, ruok, stat, cons or mntr:
// the ones the config allows) to the client port and returns the answer.
func (z *ZooKeeper) FourLetterWord(word string) (string, error) {
	c, err := net.DialTimeout("tcp", z.Address(), flwTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(flwTimeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, word); err != nil {
		return "", fmt.Errorf("send %s: %v", word, err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return string(b), fmt.Errorf("read %s answer: %v", word, err)
	}
	return string(b), nil
}

// Address is the client port's address, "127.0.0.1:port".
func (z *ZooKeeper) Address() string { return "127.0.0.1:" + strconv.Itoa(z.port) }

// Servers is the server list a ZooKeeper client connects with:
// []string{Address()}.
func (z *ZooKeeper) Servers() []string { return []string{z.Address()} }

// Dir is the server's directory: zoo.cfg, data/ and zookeeper.log.
func (z *ZooKeeper) Dir() string { return z.srv.dir }

// Pid is the server process's (the JVM's) PID, or 0 when it is not running.
func (z *ZooKeeper) Pid() int { return z.srv.pid() }

// Pause stops the server with SIGSTOP (by its PID): a hung server, whose
// connections stay open (the kernel still accepts new ones) and whose
// requests wait instead of being refused. Resume continues it (SIGCONT).
func (z *ZooKeeper) Pause(t testing.TB) {
	t.Helper()
	z.srv.signal(t, syscall.SIGSTOP)
}

// Resume continues a server stopped by Pause.
func (z *ZooKeeper) Resume(t testing.TB) {
	t.Helper()
	z.srv.signal(t, syscall.SIGCONT)
}

// Stop stops the server by its PID: SIGTERM, then SIGKILL after a timeout.
// Connected clients see their connection drop and retry; their sessions
// are not closed. It is a no-op when the server is not running.
func (z *ZooKeeper) Stop() { z.srv.stop() }

// Restart stops the server and starts it again on the same port and data
// dir, returning once it is ready. ZooKeeper keeps its data: persistent
// nodes survive, and so do the sessions open at the stop, with their
// ephemeral nodes and watches, for a session timeout counted from the
// restart; a client that reconnects within it keeps its session, the others'
// sessions expire and their ephemeral nodes go.
func (z *ZooKeeper) Restart(t testing.TB) {
	t.Helper()
	z.Stop()
	z.srv.start(t, z.Address(), z.ready)
}

// Client connects a github.com/go-zookeeper/zk client to the server with a
// ZooKeeperMaxSessionTimeout session and returns it once it has a session;
// it logs through t.Logf and is closed by the test's cleanup. After a
// Restart it reconnects by itself (with a new session when the old one
// expired).
func (z *ZooKeeper) Client(t testing.TB) *zk.Conn {
	t.Helper()
	logger := &zkLogger{t: t}
	conn, events, err := zk.Connect(z.Servers(), ZooKeeperMaxSessionTimeout, zk.WithLogger(logger))
	if err != nil {
		t.Fatalf("connect to zookeeper at %s: %v", z.Address(), err)
	}
	t.Cleanup(func() {
		conn.Close()
		// The client's goroutines close events as they end; none may log
		// once the test is over.
		deadline := time.After(stopTimeout)
		for open := true; open; {
			select {
			case _, open = <-events:
			case <-deadline:
				open = false
			}
		}
		logger.stop()
	})
	Eventually(t, zooKeeperWait, "zookeeper client session at "+z.Address(), func() error {
		if s := conn.State(); s != zk.StateHasSession {
			return fmt.Errorf("client state %s", s)
		}
		return nil
	})
	return conn
}

// zkLogger is a zk client's logger: t.Logf until stop.
type zkLogger struct {
	t       testing.TB
	mu      sync.Mutex
	stopped bool
}

func (l *zkLogger) Printf(format string, args ...any) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("zk client: "+format, args...)
	}
}

func (l *zkLogger) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// CreatePath creates node path with data and flags (zk.FlagPersistent,
// FlagEphemeral, FlagSequence, ...; world-writable ACL) through conn,
// creating its missing parents as empty persistent nodes first, and returns
// the created node's path (with its sequence suffix for a sequential node).
// The node itself must not exist yet.
func CreatePath(t testing.TB, conn *zk.Conn, path string, data []byte, flags int32) string {
	t.Helper()
	if !strings.HasPrefix(path, "/") || path == "/" || strings.HasSuffix(path, "/") {
		t.Fatalf("create zookeeper node %q: not an absolute node path", path)
	}
	acl := zk.WorldACL(zk.PermAll)
	for i := 1; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		parent := path[:i]
		if _, err := conn.Create(parent, nil, zk.FlagPersistent, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create zookeeper node %s (parent of %s): %v", parent, path, err)
		}
	}
	created, err := conn.Create(path, data, flags, acl)
	if err != nil {
		t.Fatalf("create zookeeper node %s: %v", path, err)
	}
	return created
}

// ZooKeeperClasspath returns the Java classpath of the ZooKeeper server
// tests run: $MESHBRIDGE_ZOOKEEPER_CLASSPATH (colon-separated, as
// tools/build.sh zookeeper prints it), else the one Debian's packages give,
// found as tools/build.sh finds it: zookeeper.jar from `dpkg -L
// libzookeeper-java` and slf4j-simple.jar from `dpkg -L libslf4j-java`.
// When there is none it skips the test, or fails it when
// MESHBRIDGE_REQUIRE_SERVERS=1.
func ZooKeeperClasspath(t testing.TB) string {
	t.Helper()
	if cp := os.Getenv("MESHBRIDGE_ZOOKEEPER_CLASSPATH"); cp != "" {
		for _, p := range strings.Split(cp, ":") {
			if _, err := os.Stat(p); err != nil {
				missing(t, "zookeeper", fmt.Sprintf("MESHBRIDGE_ZOOKEEPER_CLASSPATH=%s: %v", cp, err))
			}
		}
		return cp
	}
	cp, err := debianZooKeeperClasspath()
	if err != nil {
		missing(t, "zookeeper", fmt.Sprintf("no ZooKeeper: set MESHBRIDGE_ZOOKEEPER_CLASSPATH, or install Debian's with tools/build.sh zookeeper (%v)", err))
	}
	return cp
}

// debianZooKeeperClasspath is the classpath of Debian's ZooKeeper packages,
// looked up once per test binary.
var debianZooKeeperClasspath = sync.OnceValues(func() (string, error) {
	var cp []string
	for _, j := range []struct{ pkg, jar string }{
		{"libzookeeper-java", "zookeeper.jar"},
		{"libslf4j-java", "slf4j-simple.jar"},
	} {
		p, err := debianFile(j.pkg, "/"+j.jar)
		if err != nil {
			return "", err
		}
		cp = append(cp, p)
	}
	return strings.Join(cp, ":"), nil
})

// debianFile returns the first file Debian package pkg installed whose path
// ends in suffix (dpkg-query -L), once it exists.
func debianFile(pkg, suffix string) (string, error) {
	out, err := exec.Command("dpkg-query", "-L", pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("dpkg-query -L %s: %v", pkg, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if p := sc.Text(); strings.HasSuffix(p, suffix) {
			if _, err := os.Stat(p); err != nil {
				return "", err
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("package %s has no file *%s", pkg, suffix)
}

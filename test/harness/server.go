package harness

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// readyTimeout bounds a server's start, until it answers like a ready one.
	readyTimeout = 60 * time.Second
	// stopTimeout is how long a SIGTERMed server may take before SIGKILL.
	stopTimeout = 10 * time.Second
	// readyInterval is how often a starting server's readiness is checked.
	readyInterval = 100 * time.Millisecond
	// idleInterval is how often a SIGTERMed server's idle check runs.
	idleInterval = 50 * time.Millisecond
)

// server is a server binary a test runs (doc.go rules 2 and 4): its stdout
// and stderr are appended to a log file in the test's temp dir, it is in use
// only once it answers like a ready one, it is stopped by its PID, and a
// failed test shows the last lines of its logs. The fields are set before
// the first start and not changed after.
type server struct {
	name string // in messages: "consul", "polaris"
	bin  string
	args []string
	env  []string // the process's environment; nil is the test binary's
	dir  string   // working directory; "" is the test binary's
	log  string   // stdout and stderr
	// logs are the server's own log files, shown after log when a test
	// fails.
	logs []string
	// tailLines is how many last lines of each log a failure shows.
	tailLines int
	// idle, when set, is checked every 50 ms after SIGTERM: once it holds,
	// the server has nothing left to do and gets SIGKILL.
	idle func(pid int) bool
	// readyTimeout bounds the start; 0 is readyTimeout.
	readyTimeout time.Duration

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exited
}

// stopAtEnd has t's cleanup show the logs' last lines when t failed, then
// stop the server.
func (s *server) stopAtEnd(t testing.TB) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s logs, last lines:\n%s", s.name, s.tails())
		}
		s.stop()
	})
}

// start starts the server and returns once ready returns nil, checked every
// 100 ms for up to s.readyTimeout. It fails t, naming addr, when the server
// cannot start, exits, or is not ready in time.
func (s *server) start(t testing.TB, addr string, ready func() error) {
	t.Helper()
	if err := s.tryStart(addr, ready); err != nil {
		t.Fatal(err)
	}
}

// tryStart is start returning its failure; a server that started but is
// not ready is stopped.
func (s *server) tryStart(addr string, ready func() error) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %v", s.name, err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s %s: %v", s.name, s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitReady(done, ready); err != nil {
		tails := s.tails()
		s.stop()
		return fmt.Errorf("%s at %s not ready: %v\nlast log lines:\n%s", s.name, addr, err, tails)
	}
	return nil
}

func (s *server) waitReady(done <-chan struct{}, ready func() error) error {
	timeout := cmp.Or(s.readyTimeout, readyTimeout)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New(s.name + " exited")
		case <-time.After(readyInterval):
		}
		if last = ready(); last == nil {
			return nil
		}
	}
	return fmt.Errorf("timed out after %s: %v", timeout, last)
}

// kill ends the server by its PID with SIGKILL at once and waits for it to
// exit. It is a no-op when the server is not running.
func (s *server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// stop stops the server by its PID: SIGTERM, then SIGKILL once idle holds
// or after stopTimeout. It is a no-op when the server is not running.
func (s *server) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	kill := func() {
		_ = cmd.Process.Kill()
		<-done
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.After(stopTimeout)
	var tick <-chan time.Time
	if s.idle != nil {
		ticker := time.NewTicker(idleInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case <-done:
			return
		case <-deadline:
			kill()
			return
		case <-tick:
			if s.idle(cmd.Process.Pid) {
				kill()
				return
			}
		}
	}
}

// signal sends sig to the server by its PID; it fails t when the server is
// not running.
func (s *server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	pid := s.pid()
	if pid == 0 {
		t.Fatalf("%s is not running", s.name)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %s (pid %d): %v", s.name, pid, err)
	}
}

// pid is the server's PID, or 0 when it is not running.
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// tails returns the last tailLines lines of log and of logs, each under its
// path.
func (s *server) tails() string {
	var b strings.Builder
	for _, f := range append([]string{s.log}, s.logs...) {
		fmt.Fprintf(&b, "--- %s\n%s\n", f, tail(f, s.tailLines))
	}
	return b.String()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

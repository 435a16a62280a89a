package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// This file runs a test binary in a network namespace of its own, for the
// peers that will not stay on 127.0.0.1:
//   - the Nacos server's JRaft port binds every interface (there is no
//     setting for its address);
//   - Apache Dubbo (Java) refuses to register a loopback address
//     (DUBBO_IP_TO_REGISTRY=127.0.0.1 aborts; a 127.0.0.1 protocol host
//     binds 0.0.0.0 and registers the machine's NIC address), and tests
//     never send traffic to this machine's own NIC.
//
// A package whose tests run such a peer calls ReexecInNetNS first in its
// TestMain. The binary then runs again, with the same arguments, as a child
// in a new network namespace (Linux clone with CLONE_NEWNET, as unshare -n
// does; with CLONE_NEWUSER too when not root), where it brings up the
// loopback interface and a veth pair (mb0, mb1) whose end mb0 has
// NetNSAddress, 198.18.0.1/15 (RFC 2544's benchmarking range: no real
// network uses it). Every server of the package's tests, and every client,
// runs in that namespace: 127.0.0.1 is the namespace's own loopback, a port
// bound on 0.0.0.0 is reachable from the namespace only, and the veth
// address is the non-loopback address Dubbo Java registers. Tests of other
// packages, and other engineers' tests on the machine, cannot see any of it.
//
// Where the kernel refuses a namespace (no CAP_SYS_ADMIN and no
// unprivileged user namespaces), or iproute2's ip is missing, the tests run
// in the machine's namespace and the peers that need one are missing
// servers (doc.go rule 3): skipped, or failed under
// MESHBRIDGE_REQUIRE_SERVERS=1, as make test sets.

const (
	// netnsEnv is set in the child's environment: the namespace's address,
	// or "-" followed by why there is none.
	netnsEnv = "MESHBRIDGE_NETNS"
	// NetNSAddress is the address of the veth end mb0 in a test binary's
	// network namespace (ReexecInNetNS).
	NetNSAddress = "198.18.0.1"
	netnsPrefix  = "/15"
)

// ReexecInNetNS runs the test binary again in a network namespace of its own
// (see the file comment) and returns the child's exit code with reexeced
// true: the caller exits with it without running any test. In the child, or
// where no namespace can be made, it returns reexeced false and the caller
// runs its tests as usual; InNetNS then tells which. Call it first in
// TestMain, before anything starts a server or builds a binary.
func ReexecInNetNS() (code int, reexeced bool) {
	if v, ok := os.LookupEnv(netnsEnv); ok {
		if v == NetNSAddress {
			if err := setUpNetNS(); err != nil {
				_ = os.Setenv(netnsEnv, "-"+err.Error())
			}
		}
		return 0, false
	}
	if _, err := exec.LookPath("ip"); err != nil {
		_ = os.Setenv(netnsEnv, "-no ip command (iproute2) to set up the namespace")
		return 0, false
	}
	// Pdeathsig is delivered when the thread that started the child ends:
	// keep this goroutine on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	code, err := runInNewNetNS()
	if err != nil {
		_ = os.Setenv(netnsEnv, "-"+err.Error())
		return 0, false
	}
	return code, true
}

// runInNewNetNS starts the binary in a new network namespace and waits for
// it, passing on SIGINT, SIGTERM and SIGQUIT (go test's timeout).
func runInNewNetNS() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsEnv+"="+NetNSAddress)
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start the tests in a new network namespace: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				if exit.ExitCode() < 0 {
					return 1, nil // killed by a signal
				}
				return exit.ExitCode(), nil
			}
			if err != nil {
				return 1, nil
			}
			return 0, nil
		}
	}
}

// setUpNetNS brings up lo and the veth pair mb0 (NetNSAddress) – mb1 in the
// namespace the binary runs in.
func setUpNetNS() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "mb0", "type", "veth", "peer", "name", "mb1"},
		{"addr", "add", NetNSAddress + netnsPrefix, "dev", "mb0"},
		{"link", "set", "mb0", "up"},
		{"link", "set", "mb1", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// InNetNS tells whether the test binary runs in the network namespace
// ReexecInNetNS made, and why not when it does not.
func InNetNS() (ok bool, why string) {
	v := os.Getenv(netnsEnv)
	switch {
	case v == NetNSAddress:
		return true, ""
	case v == "":
		return false, "the package's TestMain does not call harness.ReexecInNetNS"
	default:
		return false, strings.TrimPrefix(v, "-")
	}
}

// RequireNetNS skips t, or fails it under MESHBRIDGE_REQUIRE_SERVERS=1,
// when the test binary does not run in its own network namespace; peer
// names what needs one ("nacos", "dubbo-java").
func RequireNetNS(t testing.TB, peer string) {
	t.Helper()
	if ok, why := InNetNS(); !ok {
		missing(t, peer, peer+" runs only in the test binary's own network namespace: "+why)
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/bench/pipeline"
)

// p2 is the churn fan-out: one instance of one service changes per round;
// watchers streams watch its ClusterLoadAssignment, opts.others streams
// one other service's each, all of them in a client process of their own
// (p2clients.go). It reports the event-to-receive latency over every
// watching stream and round, the event-to-last-receive per round, bytes per
// change and the streams woken.
func p2(opts options, watchers int, edsDebounce bool) ([]row, error) {
	debounce := "EDS debounce on (debounce.after=100ms)"
	if !edsDebounce {
		debounce = "EDS debounce off"
	}
	params := fmt.Sprintf("%d services × %d instances, %d watching + %d other streams (%s, in a client process), %d rounds, %s",
		opts.services, opts.instances, watchers, opts.others, modeText(opts.p2Mode), opts.rounds, debounce)
	params += policyParams() + " (after 2 warm-up rounds)"
	gen := pipeline.NewGenerator(opts.services, opts.instances)
	b, err := startServingBridge(gen, edsDebounce)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	clients, err := startP2Clients(b, opts, watchers)
	if err != nil {
		return nil, err
	}
	defer clients.stop()

	var latencies, lasts []time.Duration
	var bytes, woken, othersWoken, extra, other int64
	var bridgeCPU, clientCPU time.Duration
	var allocs, allocBytes uint64
	// The cold sync's garbage is collected once before the rounds, so its GC
	// cycle does not land in one; the rounds' own GC work is measured.
	settle()
	stopProfile, err := startProfile(opts.p2Profile, fmt.Sprintf("%d-eds-%s", watchers, onOff(edsDebounce)))
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	const warmup = 2 // rounds not counted: the first changes after the cold sync
	for round := range warmup + opts.rounds {
		reset, err := clients.call("reset", 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		cpu := cpuTime()
		objects, heapBytes := heapAllocs()
		event := gen.Change(0, round+1)
		if _, err := clients.call("await 1m", 70*time.Second); err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		// A quiet period catches late or duplicate sends before counting.
		time.Sleep(300 * time.Millisecond)
		if round < warmup {
			continue
		}
		cpu = cpuTime() - cpu
		objectsNow, bytesNow := heapAllocs()
		objects, heapBytes = objectsNow-objects, bytesNow-heapBytes
		got, err := clients.call("collect", 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		bridgeCPU += cpu
		allocs += objects
		allocBytes += heapBytes
		clientCPU += time.Duration(got.CPU - reset.CPU)
		w, o := got.Watchers, got.Others
		if w == nil || o == nil || len(w.First) != watchers {
			return nil, fmt.Errorf("round %d: the client process's counts are incomplete", round)
		}
		var last time.Duration
		for i := range w.First {
			latencies = append(latencies, time.Duration(w.First[i]-event.UnixNano()))
			last = max(last, time.Duration(w.Last[i]-event.UnixNano()))
			bytes += w.Bytes[i]
			extra += w.Count[i] - 1
			other += w.Other[i]
			woken++
		}
		for i, n := range o.Count {
			if n > 0 {
				othersWoken++
				bytes += o.Bytes[i]
			}
		}
		lasts = append(lasts, last)
		debugf("P2 round %d: last receive %s, CPU bridge %s, clients %s, bridge allocs %d (%d B)", round, last, cpu,
			time.Duration(got.CPU-reset.CPU), objects, heapBytes)
	}
	slices.Sort(latencies)
	slices.Sort(lasts)
	rounds := int64(opts.rounds)
	return []row{
		{"P2 churn fan-out: event→receive", params,
			fmt.Sprintf("p50 %s / p99 %s / max %s", ms(pct(latencies, 50)), ms(pct(latencies, 99)), ms(latencies[len(latencies)-1])),
			"ms (target p99 ≤ debounce + 100)"},
		{"P2 churn fan-out: event→last receive per round", params,
			fmt.Sprintf("p50 %s / max %s", ms(pct(lasts, 50)), ms(lasts[len(lasts)-1])), "ms"},
		{"P2 churn fan-out: bytes sent per change", params, fmt.Sprintf("%d", bytes/rounds),
			"B (DiscoveryResponse / DeltaDiscoveryResponse encoded size, summed over streams)"},
		{"P2 churn fan-out: streams woken per change", params,
			fmt.Sprintf("%d watching (%d extra responses), %d others, %d other CLAs sent",
				woken/rounds, extra, othersWoken, other), "streams (target: only that CLA)"},
		{"P2 churn fan-out: CPU per change", params,
			fmt.Sprintf("bridge %s (%.1f µs, %.1f allocations, %.0f B allocated per watching stream), clients %s",
				ms(bridgeCPU/time.Duration(rounds)), float64(bridgeCPU)/float64(rounds)/float64(watchers)/1e3,
				float64(allocs)/float64(rounds)/float64(watchers), float64(allocBytes)/float64(rounds)/float64(watchers),
				ms(clientCPU/time.Duration(rounds))),
			"ms CPU (getrusage), change → 300 ms after the last watcher's receive"},
	}, nil
}

func modeText(mode string) string {
	switch mode {
	case p2SotW:
		return "SotW"
	case p2Delta:
		return "Delta"
	}
	return "half SotW, half Delta"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// clientProcess is P2's client process (p2clients.go), a child of this one
// running this executable with -role p2-clients.
type clientProcess struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan p2Reply // closed when its stdout ends
}

// startP2Clients starts the client process on b's xDS address and waits
// until every stream holds its first ClusterLoadAssignment.
func startP2Clients(b *bridge, opts options, watchers int) (*clientProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	others := make([]string, opts.others)
	for i := range others {
		others[i] = b.clusterName(1 + i%(opts.services-1))
	}
	cmd := exec.Command(self, "-role", "p2-clients", "-target", b.address(), "-watch", b.clusterName(0),
		"-watchers", fmt.Sprint(watchers), "-other-names", strings.Join(others, ","), "-p2-mode", opts.p2Mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &clientProcess{cmd: cmd, stdin: stdin, replies: make(chan p2Reply)}
	go func() {
		defer close(c.replies)
		dec := json.NewDecoder(bufio.NewReader(stdout))
		for {
			var r p2Reply
			if err := dec.Decode(&r); err != nil {
				return
			}
			c.replies <- r
		}
	}()
	r, err := c.reply(3 * time.Minute)
	if err == nil && !r.Ready {
		err = errors.New("the client process did not report ready")
	}
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("P2 client process: %w", err)
	}
	// Let the initial ACKs settle before the first round.
	time.Sleep(500 * time.Millisecond)
	return c, nil
}

// call sends one command and returns its reply.
func (c *clientProcess) call(cmd string, timeout time.Duration) (p2Reply, error) {
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return p2Reply{}, fmt.Errorf("P2 client process: %s: %w", cmd, err)
	}
	r, err := c.reply(timeout)
	if err != nil {
		return r, fmt.Errorf("P2 client process: %s: %w", cmd, err)
	}
	return r, nil
}

func (c *clientProcess) reply(timeout time.Duration) (p2Reply, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r, ok := <-c.replies:
		switch {
		case !ok:
			return r, errors.New("it exited")
		case r.Error != "":
			return r, errors.New(r.Error)
		}
		return r, nil
	case <-timer.C:
		return p2Reply{}, fmt.Errorf("no reply within %s", timeout)
	}
}

// stop closes the client process's stdin, which ends it, and kills it
// (by its PID) if it has not exited within 10s.
func (c *clientProcess) stop() {
	_ = c.stdin.Close()
	exited := make(chan struct{})
	go func() {
		for range c.replies {
		}
		_ = c.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-exited
	}
}

// heapAllocs returns the heap objects and bytes this process allocated so
// far (runtime/metrics).
func heapAllocs() (objects, bytes uint64) {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	return samples[0].Value.Uint64(), samples[1].Value.Uint64()
}

package main

import (
	"bufio"
	"context"
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

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// p2Server is what P2's rounds run against: the bridge (p2) or the floor
// (p2Floor).
type p2Server struct {
	address string
	watch   string   // the changing ClusterLoadAssignment
	others  []string // one other stream's ClusterLoadAssignment each
	// change makes round's change and returns the event time.
	change func(round int) time.Time
}

// p2Result is one P2 run's measurements over its counted rounds.
type p2Result struct {
	rounds, watchers                        int
	latencies, lasts                        []time.Duration // sorted
	bytes, woken, othersWoken, extra, other int64
	// cpu is the server process's CPU time over the rounds' windows, idle
	// the idle rate times those windows' wall time.
	cpu, idle, clientCPU time.Duration
	allocs, allocBytes   uint64
}

// netCPU is the server process's CPU per change minus idle.
func (r p2Result) netCPU() time.Duration { return (r.cpu - r.idle) / time.Duration(r.rounds) }

// perStream is netCPU per watching stream, in µs.
func (r p2Result) perStream() float64 {
	return float64(r.cpu-r.idle) / float64(r.rounds) / float64(r.watchers) / 1e3
}

// p2Capture is what the floor takes from a bridge's P2 run: the names its
// streams watched and the bridge's responses of the changing
// ClusterLoadAssignment.
type p2Capture struct {
	watch  string
	others []string
	sotw   *discovery.DiscoveryResponse
	delta  *discovery.DeltaDiscoveryResponse
}

// p2 is the churn fan-out: one instance of one service changes per round;
// watchers streams watch its ClusterLoadAssignment, opts.others streams
// one other service's each, all of them in a client process of their own
// (p2clients.go), perConn per connection. It reports the event-to-receive
// latency over every watching stream and round, the event-to-last-receive
// per round, bytes per change and the streams woken, and returns the
// measurements and what the floor (floor.go) needs of the bridge's
// responses (nil if it could not be taken).
func p2(opts options, watchers, perConn int, edsDebounce bool) ([]row, p2Result, *p2Capture, error) {
	debounce := "EDS debounce on (debounce.after=100ms)"
	if !edsDebounce {
		debounce = "EDS debounce off"
	}
	params := fmt.Sprintf("%d services × %d instances, %d watching + %d other streams (%s, in a client process), %s, %d rounds, %s",
		opts.services, opts.instances, watchers, opts.others, modeText(opts.p2Mode), perConnText(perConn), opts.rounds, debounce)
	params += policyParams() + " (after 2 warm-up rounds)"
	gen := pipeline.NewGenerator(opts.services, opts.instances)
	b, err := startServingBridge(gen, edsDebounce)
	if err != nil {
		return nil, p2Result{}, nil, err
	}
	defer b.stop()
	others := make([]string, opts.others)
	for i := range others {
		others[i] = b.clusterName(1 + i%(opts.services-1))
	}
	srv := p2Server{address: b.address(), watch: b.clusterName(0), others: others,
		change: func(round int) time.Time { return gen.Change(0, round+1) }}
	res, err := p2Rounds(opts, watchers, perConn, srv, fmt.Sprintf("%d-%dpc-eds-%s", watchers, perConn, onOff(edsDebounce)))
	if err != nil {
		return nil, res, nil, err
	}
	c := &p2Capture{watch: srv.watch, others: others}
	if c.sotw, c.delta, err = captureResponses(b.address(), srv.watch); err != nil {
		fmt.Fprintf(os.Stderr, "bench: P2: the bridge's responses for the floor: %v\n", err)
		c = nil
	}
	rows := append(p2LatencyRows("P2 churn fan-out", params, res, "ms (target p99 ≤ debounce + 100)"), p2BytesRow("P2 churn fan-out", params, res),
		row{"P2 churn fan-out: streams woken per change", params,
			fmt.Sprintf("%d watching (%d extra responses), %d others, %d other CLAs sent",
				res.woken/int64(res.rounds), res.extra, res.othersWoken, res.other), "streams (target: only that CLA)"},
		p2CPURow("P2 churn fan-out", "bridge", params, res, "per watching stream"))
	return rows, res, c, nil
}

// p2Rounds runs P2's rounds against srv: it starts the client process,
// measures idle, then runs 2 warm-up rounds and opts.rounds counted ones.
func p2Rounds(opts options, watchers, perConn int, srv p2Server, profileSuffix string) (p2Result, error) {
	res := p2Result{rounds: opts.rounds, watchers: watchers}
	if err := raiseFileLimit(p2Conns(watchers+len(srv.others), perConn), "P2's server side"); err != nil {
		return res, err
	}
	clients, err := startP2Clients(srv, opts, watchers, perConn)
	if err != nil {
		return res, err
	}
	defer clients.stop()

	// The cold sync's garbage is collected once before the rounds, so its GC
	// cycle does not land in one; the rounds' own GC work is measured. The
	// idle rate (timers, the runtime) is measured with every stream open.
	idle := idleRate(time.Second)
	stopProfile, err := startProfile(opts.p2Profile, profileSuffix)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	const warmup = 2 // rounds not counted: the first changes after the cold sync
	for round := range warmup + opts.rounds {
		reset, err := clients.call("reset", 10*time.Second)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", round, err)
		}
		start, cpu := time.Now(), cpuTime()
		objects, heapBytes := heapAllocs()
		event := srv.change(round)
		if _, err := clients.call("await 1m", 70*time.Second); err != nil {
			return res, fmt.Errorf("round %d: %w", round, err)
		}
		// A quiet period catches late or duplicate sends before counting.
		time.Sleep(300 * time.Millisecond)
		if round < warmup {
			continue
		}
		cpu = cpuTime() - cpu
		wall := time.Since(start)
		objectsNow, bytesNow := heapAllocs()
		objects, heapBytes = objectsNow-objects, bytesNow-heapBytes
		got, err := clients.call("collect", 30*time.Second)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", round, err)
		}
		res.cpu += cpu
		res.idle += time.Duration(idle * float64(wall))
		res.allocs += objects
		res.allocBytes += heapBytes
		res.clientCPU += time.Duration(got.CPU - reset.CPU)
		w, o := got.Watchers, got.Others
		if w == nil || o == nil || len(w.First) != watchers {
			return res, fmt.Errorf("round %d: the client process's counts are incomplete", round)
		}
		var last time.Duration
		for i := range w.First {
			res.latencies = append(res.latencies, time.Duration(w.First[i]-event.UnixNano()))
			last = max(last, time.Duration(w.Last[i]-event.UnixNano()))
			res.bytes += w.Bytes[i]
			res.extra += w.Count[i] - 1
			res.other += w.Other[i]
			res.woken++
		}
		for i, n := range o.Count {
			if n > 0 {
				res.othersWoken++
				res.bytes += o.Bytes[i]
			}
		}
		res.lasts = append(res.lasts, last)
		debugf("P2 %s round %d: last receive %s, CPU server %s (idle %s), clients %s, server allocs %d (%d B)", profileSuffix, round, last, cpu,
			time.Duration(idle*float64(wall)), time.Duration(got.CPU-reset.CPU), objects, heapBytes)
	}
	slices.Sort(res.latencies)
	slices.Sort(res.lasts)
	return res, nil
}

// p2LatencyRows are a P2 run's event→receive (with unit) and event→last
// receive rows.
func p2LatencyRows(scenario, params string, r p2Result, unit string) []row {
	return []row{
		{scenario + ": event→receive", params,
			fmt.Sprintf("p50 %s / p99 %s / max %s", ms(pct(r.latencies, 50)), ms(pct(r.latencies, 99)), ms(r.latencies[len(r.latencies)-1])),
			unit},
		{scenario + ": event→last receive per round", params,
			fmt.Sprintf("p50 %s / max %s", ms(pct(r.lasts, 50)), ms(r.lasts[len(r.lasts)-1])), "ms"},
	}
}

// p2BytesRow is a P2 run's bytes per change.
func p2BytesRow(scenario, params string, r p2Result) row {
	return row{scenario + ": bytes sent per change", params, fmt.Sprintf("%d", r.bytes/int64(r.rounds)),
		"B (DiscoveryResponse / DeltaDiscoveryResponse encoded size, summed over streams)"}
}

// p2CPURow is a P2 run's CPU per change: the server process's (named
// server) net of idle, per watching stream (each is sent one response per
// change: per stream-send), with its allocations, and the clients'.
func p2CPURow(scenario, server, params string, r p2Result, per string) row {
	rounds := float64(r.rounds)
	return row{scenario + ": CPU per change", params,
		fmt.Sprintf("%s %s (%.2f µs, %.1f allocations, %.0f B allocated %s; idle %s subtracted), clients %s",
			server, ms(r.netCPU()), r.perStream(), float64(r.allocs)/rounds/float64(r.watchers),
			float64(r.allocBytes)/rounds/float64(r.watchers), per, ms(r.idle/time.Duration(r.rounds)),
			ms(r.clientCPU/time.Duration(r.rounds))),
		"ms CPU (getrusage, minus the idle rate), change → 300 ms after the last watcher's receive"}
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

// perConnText is a row's note of the streams per connection.
func perConnText(n int) string {
	if n == 1 {
		return "1 stream per connection"
	}
	return fmt.Sprintf("%d streams per connection", n)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// captureResponses opens a SotW and a Delta stream on the xDS server at
// addr, subscribes each to the ClusterLoadAssignment name and returns the
// first response of each.
func captureResponses(addr, name string) (*discovery.DiscoveryResponse, *discovery.DeltaDiscoveryResponse, error) {
	conn, err := ads.Dial(addr)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := ads.Options{Node: &core.Node{Id: "bench-p2-capture", Cluster: "bench"}}
	sotwCh, deltaCh := make(chan *discovery.DiscoveryResponse, 1), make(chan *discovery.DeltaDiscoveryResponse, 1)
	st, err := ads.OpenSotW(ctx, conn, opts)
	if err != nil {
		return nil, nil, err
	}
	st.Receive(func(r ads.Receipt) error {
		select {
		case sotwCh <- proto.CloneOf(r.Resp):
		default:
		}
		return nil
	})
	if err := st.Subscribe(resourcev3.EndpointType, []string{name}); err != nil {
		return nil, nil, err
	}
	d, err := ads.OpenDelta(ctx, conn, opts)
	if err != nil {
		return nil, nil, err
	}
	d.Receive(func(r ads.DeltaReceipt) error {
		select {
		case deltaCh <- proto.CloneOf(r.Resp):
		default:
		}
		return nil
	})
	if err := d.Subscribe(resourcev3.EndpointType, []string{name}, nil); err != nil {
		return nil, nil, err
	}
	timeout := time.After(30 * time.Second)
	var sotw *discovery.DiscoveryResponse
	var delta *discovery.DeltaDiscoveryResponse
	for sotw == nil || delta == nil {
		select {
		case sotw = <-sotwCh:
		case delta = <-deltaCh:
		case <-timeout:
			return nil, nil, errors.New("no ClusterLoadAssignment within 30s")
		}
	}
	if len(sotw.GetResources()) != 1 || len(delta.GetResources()) != 1 {
		return nil, nil, fmt.Errorf("%d and %d resources, want 1 each", len(sotw.GetResources()), len(delta.GetResources()))
	}
	st.Close()
	d.Close()
	return sotw, delta, nil
}

// clientProcess is P2's client process (p2clients.go), a child of this one
// running this executable with -role p2-clients.
type clientProcess struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan p2Reply // closed when its stdout ends
}

// startP2Clients starts the client process on srv's address and waits
// until every stream holds its first ClusterLoadAssignment.
func startP2Clients(srv p2Server, opts options, watchers, perConn int) (*clientProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-role", "p2-clients", "-target", srv.address, "-watch", srv.watch,
		"-watchers", fmt.Sprint(watchers), "-other-names", strings.Join(srv.others, ","), "-p2-mode", opts.p2Mode,
		"-p2-per-conn", fmt.Sprint(perConn))
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

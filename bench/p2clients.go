package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// The P2 client process (`bench -role p2-clients`): it opens the fan-out's
// ADS streams on the bridge (or the floor, floor.go) at -target,
// -p2-per-conn per connection, the first -watchers on the ClusterLoadAssignment -watch, one
// more per name of -other-names; streams alternate SotW and Delta (or are
// all of -p2-mode's one mode). Every response is ACKed (test/harness/ads)
// and counted per stream. The P2 driver starts it as a child, writes
// commands to its stdin, one per line, and reads one JSON reply (p2Reply)
// per command from its stdout:
//
//	(start)  → {"ready":true} once every stream holds its first assignment
//	reset    → {} after zeroing every stream's counters
//	await D  → {} once every watching stream received a response since the
//	           reset, or {"error":…} after D (a Go duration)
//	collect  → {"watchers":{…},"others":{…}}: per stream, the UnixNano of
//	           the first and last receive since the reset, responses, bytes
//	           and resources other than its own
//
// Every reply also holds the process's CPU time ("cpu").
//
// It ends when its stdin closes.

// p2Reply is the client process's answer to one command.
type p2Reply struct {
	Error    string    `json:"error,omitempty"`
	Ready    bool      `json:"ready,omitempty"`
	Watchers *p2Counts `json:"watchers,omitempty"`
	Others   *p2Counts `json:"others,omitempty"`
	// CPU is the client process's CPU time (user + system, ns) when it
	// answered.
	CPU int64 `json:"cpu"`
}

// p2Counts are the counters of a group of streams since the last reset,
// one entry per stream.
type p2Counts struct {
	First []int64 `json:"first"` // UnixNano of the first receive, 0 when none
	Last  []int64 `json:"last"`  // UnixNano of the last receive
	Count []int64 `json:"count"` // responses
	Bytes []int64 `json:"bytes"` // their encoded DiscoveryResponse / DeltaDiscoveryResponse size
	Other []int64 `json:"other"` // resources other than the stream's own
}

// P2 stream modes (-p2-mode).
const (
	p2Mixed = "sotw+delta" // alternately SotW and Delta
	p2SotW  = "sotw"
	p2Delta = "delta"
)

// p2Stream is one stream of the client process with its counters.
type p2Stream struct {
	own     string // the ClusterLoadAssignment it watches
	watcher bool
	count   atomic.Int64
	bytes   atomic.Int64
	first   atomic.Int64
	last    atomic.Int64
	other   atomic.Int64
	close   func()
	round   *atomic.Pointer[p2Round]
}

// p2Round waits for the streams that must receive: every stream while
// connecting, the watching ones in a round.
type p2Round struct {
	pending  atomic.Int64
	done     chan struct{}
	watchers bool // only watching streams count
}

func newP2Round(n int, watchers bool) *p2Round {
	r := &p2Round{done: make(chan struct{}), watchers: watchers}
	r.pending.Store(int64(n))
	if n == 0 {
		close(r.done)
	}
	return r
}

// record counts one response received at at, of size bytes, holding the
// resources names.
func (s *p2Stream) record(at time.Time, size int, names func(yield func(string) bool)) {
	if s.count.Add(1) == 1 {
		s.first.Store(at.UnixNano())
		if r := s.round.Load(); !r.watchers || s.watcher {
			if r.pending.Add(-1) == 0 {
				close(r.done)
			}
		}
	}
	s.bytes.Add(int64(size))
	s.last.Store(at.UnixNano())
	for name := range names {
		if name != s.own {
			s.other.Add(1)
		}
	}
}

func (s *p2Stream) reset() {
	s.count.Store(0)
	s.bytes.Store(0)
	s.last.Store(0)
	s.first.Store(0)
	s.other.Store(0)
}

// p2ClientFlags are the client process's flags.
type p2ClientFlags struct {
	target, watch, otherNames, mode string
	watchers, perConn               int
}

func (f *p2ClientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.target, "target", "", "p2-clients: the bridge's xDS address")
	fs.StringVar(&f.watch, "watch", "", "p2-clients: the ClusterLoadAssignment the watching streams subscribe to")
	fs.StringVar(&f.otherNames, "other-names", "", "p2-clients: comma-separated ClusterLoadAssignments, one other stream each")
	fs.StringVar(&f.mode, "p2-mode", p2Mixed, "P2: stream modes: sotw+delta (alternately), sotw or delta")
}

// runP2Clients is the client process; it returns the exit code.
func runP2Clients(f p2ClientFlags) int {
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(p2Reply{Error: err.Error()})
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var others []string
	if f.otherNames != "" {
		others = strings.Split(f.otherNames, ",")
	}
	if err := raiseFileLimit(p2Conns(f.watchers+len(others), f.perConn), "P2's client process"); err != nil {
		return fail(err)
	}
	var round atomic.Pointer[p2Round]
	round.Store(newP2Round(f.watchers+len(others), false))
	streams, conns, err := openP2Streams(ctx, f, others, &round)
	defer func() {
		for _, s := range streams {
			s.close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if err != nil {
		return fail(err)
	}
	select {
	case <-round.Load().done:
	case <-time.After(2 * time.Minute):
		return fail(fmt.Errorf("%d streams got no ClusterLoadAssignment within 2m", round.Load().pending.Load()))
	}
	_ = out.Encode(p2Reply{Ready: true})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(in.Text()), " ")
		var reply p2Reply
		switch cmd {
		case "reset":
			round.Store(newP2Round(f.watchers, true))
			for _, s := range streams {
				s.reset()
			}
		case "await":
			timeout, err := time.ParseDuration(arg)
			if err != nil {
				reply.Error = err.Error()
				break
			}
			r := round.Load()
			select {
			case <-r.done:
			case <-time.After(timeout):
				reply.Error = fmt.Sprintf("%d watching streams got nothing within %s", r.pending.Load(), timeout)
			}
		case "collect":
			reply.Watchers, reply.Others = countsOf(streams[:f.watchers]), countsOf(streams[f.watchers:])
		default:
			reply.Error = fmt.Sprintf("unknown command %q", cmd)
		}
		reply.CPU = int64(cpuTime())
		if err := out.Encode(reply); err != nil {
			return 1
		}
	}
	return 0
}

// openP2Streams opens the watching streams, then one per other name, each
// subscribed to its ClusterLoadAssignment.
func openP2Streams(ctx context.Context, f p2ClientFlags, others []string, round *atomic.Pointer[p2Round]) ([]*p2Stream, []*grpc.ClientConn, error) {
	var streams []*p2Stream
	total := f.watchers + len(others)
	conns, err := pipeline.DialPerConn(f.target, total, f.perConn)
	if err != nil {
		return nil, nil, err
	}
	for i := range total {
		s := &p2Stream{own: f.watch, watcher: i < f.watchers, round: round}
		if !s.watcher {
			s.own = others[i-f.watchers]
		}
		delta := f.mode == p2Delta || f.mode == p2Mixed && i%2 == 1
		opts := ads.Options{Node: &core.Node{Id: fmt.Sprintf("bench-p2-%d", i), Cluster: "bench"}, DiscardResources: true}
		conn := conns[i/f.perConn]
		if delta {
			d, err := ads.OpenDelta(ctx, conn, opts)
			if err != nil {
				return streams, conns, err
			}
			s.close = d.Close
			d.Receive(func(r ads.DeltaReceipt) error {
				s.record(r.At, r.Size, func(yield func(string) bool) {
					for _, res := range r.Resp.GetResources() {
						if !yield(res.GetName()) {
							return
						}
					}
				})
				return nil
			})
			streams = append(streams, s)
			if err := d.Subscribe(resourcev3.EndpointType, []string{s.own}, nil); err != nil {
				return streams, conns, err
			}
			continue
		}
		st, err := ads.OpenSotW(ctx, conn, opts)
		if err != nil {
			return streams, conns, err
		}
		s.close = st.Close
		st.Receive(func(r ads.Receipt) error {
			s.record(r.At, r.Size, func(yield func(string) bool) {
				for _, res := range r.Resp.GetResources() {
					if !yield(ads.ResourceName(res.GetValue())) {
						return
					}
				}
			})
			return nil
		})
		streams = append(streams, s)
		if err := st.Subscribe(resourcev3.EndpointType, []string{s.own}); err != nil {
			return streams, conns, err
		}
	}
	return streams, conns, nil
}

func countsOf(streams []*p2Stream) *p2Counts {
	n := len(streams)
	c := &p2Counts{First: make([]int64, n), Last: make([]int64, n), Count: make([]int64, n),
		Bytes: make([]int64, n), Other: make([]int64, n)}
	for i, s := range streams {
		c.First[i], c.Last[i], c.Count[i] = s.first.Load(), s.last.Load(), s.count.Load()
		c.Bytes[i], c.Other[i] = s.bytes.Load(), s.other.Load()
	}
	return c
}

// p2Conns is how many connections streams need at perConn per connection.
func p2Conns(streams, perConn int) int { return (streams + perConn - 1) / perConn }

// raiseFileLimit makes sure this process may open conns connections and
// its other files: it raises RLIMIT_NOFILE's soft limit up to the hard one
// (Go raises it at start-up already; a parent may have lowered the hard
// one), or says why it cannot. who names the process in the error.
func raiseFileLimit(conns int, who string) error {
	const spare = 256 // listeners, pipes, profiles, the runtime's
	need := uint64(conns + spare)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("%s: read RLIMIT_NOFILE: %w", who, err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("%s needs %d file descriptors (%d connections + %d spare) but RLIMIT_NOFILE's hard limit is %d: "+
			"raise it (ulimit -Hn %d as root, LimitNOFILE= under systemd, --ulimit nofile= for docker) or use fewer -watchers or more -p2-per-conn",
			who, need, conns, spare, lim.Max, need)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("%s needs %d file descriptors: raising RLIMIT_NOFILE to its hard limit %d: %w", who, need, lim.Max, err)
	}
	return nil
}

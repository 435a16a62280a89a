package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/translate"
)

// options are the suite's parameters; the defaults are the scale the targets
// in docs/benchmarks.md are set for (10,000 services × 10 instances; P2 with
// 1,000 and with 10,000 watching streams, each + 100 others; 100 streams for
// P3; 20 rounds).
type options struct {
	services, instances int
	watchers            []int
	perConn             []int
	others              int
	p2Mode              string
	p3Streams           int
	rounds              int
	memProfile          string
	p2Profile           string
	p3Profile           string
	// floorSenders and floorDecode shape P2's floor (floor.go).
	floorSenders int
	floorDecode  bool
	// scale is set for the scale point (scenario SCALE): P1 and P3 at
	// scaleServices services, with that point's targets.
	scale         bool
	scaleServices int
}

func main() {
	var opts options
	role := flag.String("role", "", "empty: run the suite; p2-clients: be P2's client process (the suite starts it)")
	var clientFlags p2ClientFlags
	clientFlags.register(flag.CommandLine)
	flag.IntVar(&opts.services, "services", 10000, "services in the synthetic registry")
	flag.IntVar(&opts.instances, "instances", 10, "instances per service")
	watchers := flag.String("watchers", "1000,10000", "P2: streams watching the changing ClusterLoadAssignment; a comma-separated list runs P2 once per count (p2-clients: one count)")
	perConn := flag.String("p2-per-conn", "100,1", "P2: ADS streams per gRPC connection of the client process; a comma-separated list runs P2 and the floor once per value (p2-clients: one value). At 1 each stream has a connection of its own, as proxyless gRPC clients do: 10,000 watchers + 100 others then need 10,100 connections and some 10,400 file descriptors in each process; both raise RLIMIT_NOFILE's soft limit to the hard one and fail with the shortfall when that is too low")
	flag.IntVar(&opts.floorSenders, "floor-senders", runtime.GOMAXPROCS(0), "P2 floor: N > 0: a pool of N goroutines sends each round's responses, each stream's handler goroutine only reads its ACKs (the least CPU); 0: each stream's handler sends its response, then reads the ACK")
	flag.BoolVar(&opts.floorDecode, "floor-decode", false, "P2 floor: unmarshal every ACK into a DiscoveryRequest (proto) instead of reading its nonce and error_detail from the raw bytes")
	flag.IntVar(&opts.others, "others", 100, "P2: streams watching other ClusterLoadAssignments")
	flag.IntVar(&opts.p3Streams, "p3-streams", 100, "P3: connected streams")
	flag.IntVar(&opts.rounds, "rounds", 20, "P2 and P3: change rounds")
	flag.IntVar(&opts.scaleServices, "scale-services", 100000, "SCALE: services (each with -instances instances) of the scale point")
	scenarios := flag.String("scenarios", "P1,P2,P3,SCALE", "comma-separated scenarios to run (P2 includes its floor, a bare grpc-go ADS server measured in the same run)")
	micro := flag.String("micro", "", "file with `go test -bench -benchmem` output to include (P6 and the micro benchmarks)")
	out := flag.String("out", "", "write the markdown report here (e.g. docs/benchmarks.md)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.StringVar(&opts.memProfile, "memprofile", "", "write a heap profile at each P1 memory reading here (suffixed with the mode)")
	flag.StringVar(&opts.p2Profile, "p2profile", "", "write a CPU profile of P2's measured rounds (the bridge's process) here, suffixed with the watchers, the streams per connection and the EDS debounce, the floor's with floor-<watchers>-<per connection>pc (without -cpuprofile)")
	flag.StringVar(&opts.p3Profile, "p3profile", "", "write a CPU profile of P3's measured rounds here (without -cpuprofile)")
	policy := flag.Bool("policy", false, "every host has a DestinationRule (outlier detection, http2MaxRequests): the scenarios with a policy on every host")
	flag.Parse()
	if *policy {
		everyHostPolicy = everyHost{hostRule}
	}
	opts.p2Mode = clientFlags.mode
	for _, w := range strings.Split(*watchers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -watchers: %q is not a positive count\n", w)
			os.Exit(2)
		}
		opts.watchers = append(opts.watchers, n)
	}
	for _, p := range strings.Split(*perConn, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -p2-per-conn: %q is not a positive count\n", p)
			os.Exit(2)
		}
		opts.perConn = append(opts.perConn, n)
	}
	if m := clientFlags.mode; m != p2Mixed && m != p2SotW && m != p2Delta {
		fmt.Fprintf(os.Stderr, "bench: unknown -p2-mode %q\n", m)
		os.Exit(2)
	}
	switch {
	case *role == "p2-clients":
		clientFlags.watchers, clientFlags.perConn = opts.watchers[0], opts.perConn[0]
		os.Exit(runP2Clients(clientFlags))
	case *role != "":
		fmt.Fprintf(os.Stderr, "bench: unknown -role %q\n", *role)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	loadBefore := pipeline.Uptime()
	began := time.Now()
	fmt.Println(tableHeader)
	if os.Getenv("BENCH_DEBUG") != "" {
		debugLog = true
	}
	var rows []row
	emit := func(rs []row, err error, what string) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", what, err)
			rs = []row{{what, "failed", err.Error(), ""}}
		}
		for _, r := range rs {
			fmt.Println(r.markdown())
		}
		rows = append(rows, rs...)
	}
	run := func(name string) bool { return strings.Contains(","+*scenarios+",", ","+name+",") }
	if run("P1") {
		for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
			rs, err := p1(opts, mode)
			emit(rs, err, "P1 "+string(mode))
		}
	}
	if run("P2") {
		// Per watcher count and streams per connection: the bridge with
		// EDS debounce on and off, then the floor with the same clients,
		// then the ratios of their CPU per watching stream.
		var capture *p2Capture
		for _, n := range opts.watchers {
			for _, perConn := range opts.perConn {
				var bridges []p2Result
				var debounces []bool
				for _, eds := range []bool{true, false} {
					rs, res, c, err := p2(opts, n, perConn, eds)
					emit(rs, err, "P2")
					if err == nil {
						bridges, debounces = append(bridges, res), append(debounces, eds)
						capture = cmp.Or(capture, c)
					}
				}
				if capture == nil {
					emit(nil, errors.New("no bridge run to take the responses from"), "P2 floor")
					continue
				}
				rs, floor, err := p2Floor(opts, n, perConn, capture)
				emit(rs, err, "P2 floor")
				if err == nil {
					emit(floorRatioRows(opts, n, perConn, bridges, debounces, floor), nil, "P2 floor")
				}
			}
		}
	}
	if run("P3") {
		rs, err := p3(opts)
		emit(rs, err, "P3")
	}
	if run("SCALE") {
		// The scale point: cold sync and memory in both endpoint modes,
		// then CPU per change with a few streams (each holds every
		// cluster, which at this size is the clients' cost, not the
		// bridge's).
		big := opts
		big.scale, big.services, big.p3Streams, big.rounds = true, opts.scaleServices, 10, 10
		for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
			rs, err := p1(big, mode)
			emit(rs, err, "SCALE "+string(mode))
		}
		rs, err := p3(big)
		emit(rs, err, "SCALE P3")
	}
	var microOut string
	if *micro != "" {
		b, err := os.ReadFile(*micro)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		microOut = string(b)
		emit(microRows(microOut), nil, "P6")
	}
	if *out != "" {
		var buf bytes.Buffer
		writeReport(&buf, rows, microOut, loadBefore, pipeline.Uptime(), time.Since(began))
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return
		}
	}
}

// startProfile starts a CPU profile of this process into path with suffix
// appended ("path.suffix"); the returned func stops it. An empty path
// profiles nothing.
func startProfile(path, suffix string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path + "." + suffix)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

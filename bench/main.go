package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/translate"
)

// options are the suite's parameters; the defaults are the scale the targets
// in docs/benchmarks.md are set for (10,000 services × 10 instances, 1,000 +
// 100 streams for P2, 100 for P3, 20 rounds).
type options struct {
	services, instances int
	watchers, others    int
	p3Streams           int
	rounds              int
	memProfile          string
	p3Profile           string
}

func main() {
	var opts options
	flag.IntVar(&opts.services, "services", 10000, "services in the synthetic registry")
	flag.IntVar(&opts.instances, "instances", 10, "instances per service")
	flag.IntVar(&opts.watchers, "watchers", 1000, "P2: streams watching the changing ClusterLoadAssignment")
	flag.IntVar(&opts.others, "others", 100, "P2: streams watching other ClusterLoadAssignments")
	flag.IntVar(&opts.p3Streams, "p3-streams", 100, "P3: connected streams")
	flag.IntVar(&opts.rounds, "rounds", 20, "P2 and P3: change rounds")
	scenarios := flag.String("scenarios", "P1,P2,P3", "comma-separated scenarios to run")
	micro := flag.String("micro", "", "file with `go test -bench -benchmem` output to include (P6 and the micro benchmarks)")
	out := flag.String("out", "", "write the markdown report here (e.g. docs/benchmarks.md)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.StringVar(&opts.memProfile, "memprofile", "", "write a heap profile at each P1 memory reading here (suffixed with the mode)")
	flag.StringVar(&opts.p3Profile, "p3profile", "", "write a CPU profile of P3's measured rounds here (without -cpuprofile)")
	flag.Parse()
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
		for _, eds := range []bool{true, false} {
			rs, err := p2(opts, eds)
			emit(rs, err, "P2")
		}
	}
	if run("P3") {
		rs, err := p3(opts)
		emit(rs, err, "P3")
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

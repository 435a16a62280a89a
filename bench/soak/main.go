package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/meshbridge/meshbridge/bench/pipeline"
)

func main() { os.Exit(soak()) }

// soak parses the flags, runs the soak and returns the exit code.
func soak() int {
	var cfg config
	flag.IntVar(&cfg.services, "services", 1000, "services in the generator registry")
	flag.IntVar(&cfg.instances, "instances", 10, "instances per service (a service keeps 1 to 2× as many)")
	flag.IntVar(&cfg.streams, "streams", 200, "xDS streams, alternately SotW and Delta")
	flag.Float64Var(&cfg.rate, "rate", 100, "registry changes per second")
	flag.Float64Var(&cfg.serviceShare, "service-share", 0.005, "share of the changes that add or remove a service")
	flag.DurationVar(&cfg.warmup, "warmup", time.Minute, "load before the goroutine and RSS baseline")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Minute, "load after the warm-up")
	flag.DurationVar(&cfg.interval, "interval", time.Minute, "time between report lines")
	flag.DurationVar(&cfg.converge, "converge", 2*time.Minute, "bound on the wait for every stream to converge")
	flag.DurationVar(&cfg.debounce, "debounce", 100*time.Millisecond, "debounce.after (EDS debounced too)")
	flag.Float64Var(&cfg.tolerance, "tolerance", 0.10, "goroutine (and RSS) growth from the end of the warm-up to the end of the load still called flat")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the random changes")
	flag.Parse()
	if cfg.rate <= 0 || cfg.interval <= 0 || cfg.streams < 1 || cfg.duration <= 0 || cfg.warmup < 0 {
		fmt.Fprintln(os.Stderr, "soak: -rate, -interval, -streams and -duration must be positive, -warmup not negative")
		return 2
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fmt.Printf("soak: go run ./bench/soak %s\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("%d services × %d instances (endpoints=workloadentry), %d streams (%d SotW, %d Delta), %g changes/s "+
		"(%.1f%% add or remove a service), debounce.after %s, warm-up %s, then %s\n",
		cfg.services, cfg.instances, cfg.streams, (cfg.streams+1)/2, cfg.streams/2, cfg.rate, 100*cfg.serviceShare,
		cfg.debounce, cfg.warmup, cfg.duration)
	fmt.Printf("machine: %d cores (GOMAXPROCS %d), %s, %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		pipeline.CPUModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("load before: %s\n", pipeline.Uptime())
	res, err := run(ctx, cfg, os.Stdout)
	fmt.Printf("load after: %s\n", pipeline.Uptime())
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 1
	}
	if !res.ok() {
		fmt.Println("soak: FAIL")
		return 1
	}
	fmt.Println("soak: ok")
	return 0
}

package istiod

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/bench/pipeline"
)

var (
	flagOut     = flag.String("istiod.out", "", "write the report (markdown) to this file")
	flagInline  = flag.Int("istiod.inline-services", 10000, "services in endpoints: inline mode (0 skips the mode)")
	flagWE      = flag.Int("istiod.we-services", 1000, "services in endpoints: workloadentry mode (0 skips the mode)")
	flagInst    = flag.Int("istiod.instances", 10, "instances per service")
	flagClients = flag.Int("istiod.clients", 1000, "N: clients watching the changing service")
	flagRounds  = flag.Int("istiod.rounds", 20, "counted single-instance changes per row")
	flagCap     = flag.Duration("istiod.cap", 5*time.Minute, "istiod's cold sync gives up after this (from istiod's start)")
	flagLogDir  = flag.String("istiod.logs", "", "directory for the processes' logs (default: a temporary one)")
	flagQuiet   = flag.String("istiod.debounce", "100ms,10ms",
		"quiet periods, comma-separated: the fan-out per change is measured at each, meshbridge's debounce.after and istiod's "+
			"PILOT_DEBOUNCE_AFTER both set to it (cold sync and memory at the first only)")
)

// parseDebounces parses -istiod.debounce: distinct durations, at least one,
// none negative.
func parseDebounces(s string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-istiod.debounce %q: %v", s, err)
		}
		if d < 0 || slices.Contains(out, d) {
			return nil, fmt.Errorf("-istiod.debounce %q: %s negative or twice", s, d)
		}
		out = append(out, d)
	}
	return out, nil
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(bridgeEnv); spec != "" {
		if err := RunBridge(spec); err != nil {
			fmt.Fprintln(os.Stderr, "meshbridge process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// BenchmarkIstiod runs the comparison once (whatever b.N) and writes the
// report to -istiod.out.
func BenchmarkIstiod(b *testing.B) {
	bin := os.Getenv("MESHBRIDGE_ISTIOD")
	if bin == "" {
		b.Skip("MESHBRIDGE_ISTIOD (the pilot-discovery binary) is not set; make bench-istiod sets it")
	}
	quiet, err := parseDebounces(*flagQuiet)
	if err != nil {
		b.Fatal(err)
	}
	dir := *flagLogDir
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	// An interrupt ends the run through ctx, so that the cleanups stop
	// istiod, meshbridge and the kube-apiserver by PID.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := Config{
		IstiodBin: bin, InlineServices: *flagInline, WEServices: *flagWE, Instances: *flagInst,
		Clients: *flagClients, Rounds: *flagRounds, Cap: *flagCap, Dir: dir, Debounces: quiet,
		Log: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
		},
	}
	machine := machineInfo{before: pipeline.Uptime(), cpu: pipeline.CPUModel()}
	b.ResetTimer()
	results, err := run(ctx, b, cfg)
	if err != nil {
		b.Fatal(err)
	}
	machine.after = pipeline.Uptime()
	report := render(cfg, results, machine)
	fmt.Println(report)
	if *flagOut != "" {
		if err := os.WriteFile(*flagOut, []byte(report), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

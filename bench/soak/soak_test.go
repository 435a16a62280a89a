package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// soakSeed varies the changes of the short soak (bench/soak/repeat.sh runs
// it with many seeds).
var soakSeed = flag.Uint64("soak.seed", 1, "seed of the short soak's changes")

// TestSoakConverges runs a 5-second soak at small scale and checks that
// every stream, SotW and Delta, ends holding the controller's final state,
// which holds the registry's. debounce.after is 10ms, below the 50ms
// between changes, so that pushes reach the streams while the load runs.
// Only convergence is asserted: the figures are logged, never compared
// with a bound.
func TestSoakConverges(t *testing.T) {
	var out strings.Builder
	cfg := config{
		services: 100, instances: 5, streams: 20, rate: 20, serviceShare: 0.05,
		warmup: time.Second, duration: 4 * time.Second, interval: time.Second,
		converge: time.Minute, debounce: 10 * time.Millisecond, tolerance: 0.10, seed: *soakSeed,
	}
	res, err := run(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.registryConverged {
		t.Error("the controller did not reach the registry's final state")
	}
	if res.converged != cfg.streams {
		t.Errorf("%d of %d streams converged", res.converged, cfg.streams)
	}
	var changes int64
	for _, n := range res.counts {
		changes += n
	}
	if changes == 0 {
		t.Error("no change was applied")
	}
}

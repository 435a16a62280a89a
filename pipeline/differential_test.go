package pipeline_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/pipeline/pipelinetest"
)

var (
	differentialSeeds  = flag.Int("differential.seeds", 200, "seeds the randomized differential runs (make fuzz: 100,000)")
	differentialFirst  = flag.Uint64("differential.first", 1, "the differential's first seed")
	differentialEvents = flag.Int("differential.events", 30, "events per seed of the differential")
	differentialShrink = flag.Bool("differential.shrink", true, "shrink a failing seed's events")
)

// TestDifferential is the randomized differential of the whole pipeline:
// for each seed, a generated sequence of registry reads, failures,
// relists, reloads, clock advances, confirmations and client
// (re)connections (pipelinetest.Generate) is played on a pipeline, each
// registry's observations through its watcher's registries.Reporter as a
// real watcher's are (pipelinetest.Registry), and at every Check each
// client and the Store must hold what a freshly built pipeline fed the
// registries' truth holds. A failing seed is shrunk to the
// fewest events that still fail, printed as steps to paste into a named
// scenario (scenario_test.go).
func TestDifferential(t *testing.T) {
	// Seeds run in parallel within batches, batches one after another, so
	// that 100,000 seeds do not park 100,000 subtests at once.
	const batch = 500
	for first := 0; first < *differentialSeeds; first += batch {
		t.Run(fmt.Sprintf("seeds-%d", *differentialFirst+uint64(first)), func(t *testing.T) {
			for i := first; i < min(first+batch, *differentialSeeds); i++ {
				seed := *differentialFirst + uint64(i)
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel()
					differential(t, seed)
				})
			}
		})
	}
}

// differential runs seed, shrinking it when it fails.
func differential(t *testing.T, seed uint64) {
	q := pipelinetest.Generate(seed, *differentialEvents)
	failure := pipelinetest.Try(t, q, 20*time.Second)
	if failure == "" {
		return
	}
	if !*differentialShrink {
		t.Fatalf("seed %d fails:\n%s\n%s", seed, failure, q)
	}
	// A failure found is not a matter of time: shrink with a short wait.
	shrunk, why := pipelinetest.Shrink(t, q, failure, 3*time.Second)
	t.Fatalf("seed %d fails (%d events, shrunk from %d):\n%s\n%s\nbefore shrinking:\n%s", seed, len(shrunk.Events), len(q.Events), why, shrunk, failure)
}

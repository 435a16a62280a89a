package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
)

// config is a soak run's parameters (flags of main).
type config struct {
	services, instances int
	streams             int
	rate                float64 // registry changes per second
	serviceShare        float64 // share of changes that add or remove a service
	warmup, duration    time.Duration
	interval            time.Duration // between report lines
	converge            time.Duration // bound on each wait for convergence
	debounce            time.Duration // debounce.after
	tolerance           float64       // goroutine growth allowed after the warm-up
	seed                uint64
}

// sample is one report line's figures.
type sample struct {
	at         time.Duration // since the load started
	changes    int64
	pushes     map[string]float64 // meshbridge_pushes_total by type
	responses  map[string]float64 // meshbridge_xds_pushes_total by type URL
	goroutines int
	heap, rss  uint64
	converged  int
	worst      int // most clusters one stream differs in
	ended      int // streams that ended
}

// result is what a run found.
type result struct {
	streams           int
	converged         int
	convergedIn       time.Duration // from the end of the load
	warm, end, quiet  sample
	goroutineGrowth   float64
	rssGrowth         float64
	goroutinesFlat    bool
	counts            [changeKinds]int64
	registryConverged bool // the controller holds the registry's final state
}

// ok reports whether the run passes: every stream converged and the
// goroutines stayed within the tolerance.
func (r *result) ok() bool {
	return r.registryConverged && r.converged == r.streams && r.goroutinesFlat
}

const tableHeader = "| elapsed | changes (rate) | pushes full / eds | responses CDS / EDS | goroutines | live heap MiB | RSS MiB | streams converged | most stale clusters |\n" +
	"|---|---|---|---|---|---|---|---|---|"

// run builds the pipeline on a generator registry, connects the streams,
// applies cfg.rate changes per second for cfg.warmup + cfg.duration and
// writes one table line per cfg.interval to out, then stops the changes,
// waits for every stream to converge and writes the summary.
func run(ctx context.Context, cfg config, out io.Writer) (*result, error) {
	gen := pipeline.NewGenerator(cfg.services, cfg.instances)
	m := newMesh(gen, cfg.services, cfg.instances, cfg.serviceShare, cfg.seed)
	p, err := pipeline.Start(gen, pipeline.Options{
		Registry: gen.Name(), Type: "consul", HostTemplate: consul.HostTemplate, Endpoints: translate.EndpointsWorkloadEntry,
		DebounceAfter: cfg.debounce, EDSDebounce: true,
	})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	if err := p.WaitServing(2 * time.Minute); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	for _, c := range xds.Collectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}

	streamCtx, cancelStreams := context.WithCancel(ctx)
	defer cancelStreams()
	f, err := connect(streamCtx, p.XDS.Addr().String(), cfg.streams)
	if err != nil {
		return nil, err
	}
	defer f.close()
	began := time.Now()
	if err := waitConverged(ctx, f, controllerState(p.Controller), cfg.converge); err != nil {
		return nil, fmt.Errorf("initial sync: %w", err)
	}
	fmt.Fprintf(out, "%d streams hold the initial %d clusters (%.1f s after connecting)\n\n",
		cfg.streams, len(controllerState(p.Controller)), time.Since(began).Seconds())

	res := &result{streams: cfg.streams}
	fmt.Fprintln(out, tableHeader)
	take := func(at time.Duration) sample {
		s := sample{at: at, changes: m.applied.Load(), goroutines: runtime.NumGoroutine()}
		s.pushes, s.responses = pushFigures(reg)
		s.converged, s.worst, s.ended = f.convergence(controllerState(p.Controller))
		s.heap = pipeline.LiveHeap()
		s.rss = pipeline.RSS()
		return s
	}
	prev := take(0)
	fmt.Fprintln(out, prev.row(prev, "before the load"))

	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	start := time.Now()
	load.Go(func() { pace(loadCtx, start, cfg.rate, m.change) })
	stopped := false
	stop := func() {
		if !stopped {
			stopLoad()
			load.Wait()
			stopped = true
		}
	}
	defer stop()

	total := cfg.warmup + cfg.duration
	for _, at := range reportTimes(cfg.warmup, total, cfg.interval) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(start.Add(at))):
		}
		var note string
		if at == total {
			stop()
			note = "end of the load"
		}
		s := take(at)
		if at == cfg.warmup {
			res.warm = s
			note = "end of the warm-up"
		}
		fmt.Fprintln(out, s.row(prev, note))
		prev = s
		res.end = s
	}
	stop()
	loadEnd := time.Now()
	res.counts = m.counts

	// The registry's final state must reach the controller, and the
	// controller's every stream.
	want, err := meshState(p.Translator, m.services)
	if err != nil {
		return nil, err
	}
	var final state
	registryErr := pollUntil(ctx, cfg.converge, func() error {
		final = controllerState(p.Controller)
		if n := want.diff(final); n != 0 {
			return fmt.Errorf("the controller differs from the registry in %d clusters", n)
		}
		return nil
	})
	res.registryConverged = registryErr == nil
	if registryErr != nil {
		fmt.Fprintf(out, "\nregistry → controller: %v\n", registryErr)
	}
	streamErr := waitConverged(ctx, f, final, cfg.converge)
	res.convergedIn = time.Since(loadEnd)
	res.converged, _, _ = f.convergence(final)
	res.quiet = take(time.Since(start))
	note := "after the load, every stream converged"
	if registryErr != nil || streamErr != nil {
		note = "after the load, at the end of the wait"
	}
	fmt.Fprintln(out, res.quiet.row(res.end, note))
	if streamErr != nil {
		fmt.Fprintf(out, "\nstreams: %v\n%s\n", streamErr, f.diagnose(final))
	}
	if n := f.undecodable(); n > 0 {
		fmt.Fprintf(out, "%d resources could not be decoded\n", n)
		res.converged = 0
	}
	if name, err, ok := f.firstEnded(); ok {
		fmt.Fprintf(out, "stream %s ended: %v\n", name, err)
	}

	res.goroutineGrowth = growth(float64(res.warm.goroutines), float64(res.end.goroutines))
	res.rssGrowth = growth(float64(res.warm.rss), float64(res.end.rss))
	res.goroutinesFlat = res.goroutineGrowth <= cfg.tolerance
	res.summary(out, cfg)
	return res, nil
}

// pace calls change rate times per second from start until ctx is done,
// catching up after a slow call rather than dropping changes.
func pace(ctx context.Context, start time.Time, rate float64, change func()) {
	period := time.Duration(float64(time.Second) / rate)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 0; ; n++ {
		if d := time.Until(start.Add(time.Duration(n) * period)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		change()
	}
}

// reportTimes returns every multiple of interval up to total, plus warmup
// and total, sorted.
func reportTimes(warmup, total, interval time.Duration) []time.Duration {
	var at []time.Duration
	for t := interval; t < total; t += interval {
		at = append(at, t)
	}
	at = append(at, warmup, total)
	slices.Sort(at)
	return slices.Compact(at)
}

// waitConverged waits until every stream holds want.
func waitConverged(ctx context.Context, f *fleet, want state, timeout time.Duration) error {
	return pollUntil(ctx, timeout, func() error {
		converged, worst, ended := f.convergence(want)
		if ended > 0 {
			name, err, _ := f.firstEnded()
			return fmt.Errorf("%d streams ended (%s: %v)", ended, name, err)
		}
		if converged < len(f.clients) {
			return fmt.Errorf("%d of %d streams converged, one differs in %d clusters", converged, len(f.clients), worst)
		}
		return nil
	})
}

// pollUntil checks cond every 100 ms until it returns nil, and returns its
// last error when timeout passes first.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pushFigures reads the xds push counters: pushes into the caches by type
// (full, eds) and responses sent on the streams by type URL.
func pushFigures(g prometheus.Gatherer) (pushes, responses map[string]float64) {
	pushes, responses = make(map[string]float64), make(map[string]float64)
	families, _ := g.Gather()
	for _, mf := range families {
		var into map[string]float64
		var label string
		switch mf.GetName() {
		case "meshbridge_pushes_total":
			into, label = pushes, "type"
		case "meshbridge_xds_pushes_total":
			into, label = responses, "type_url"
		default:
			continue
		}
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == label {
					into[l.GetValue()] += metric.GetCounter().GetValue()
				}
			}
		}
	}
	return pushes, responses
}

// row formats s as a table line; prev gives the change rate.
func (s sample) row(prev sample, note string) string {
	rate := 0.0
	if d := (s.at - prev.at).Seconds(); d > 0 {
		rate = float64(s.changes-prev.changes) / d
	}
	elapsed := s.at.Round(time.Second).String()
	if note != "" {
		elapsed += " (" + note + ")"
	}
	converged := fmt.Sprintf("%d", s.converged)
	if s.ended > 0 {
		converged += fmt.Sprintf(" (%d ended)", s.ended)
	}
	return fmt.Sprintf("| %s | %d (%.1f/s) | %.0f / %.0f | %.0f / %.0f | %d | %.1f | %.1f | %s | %d |",
		elapsed, s.changes, rate, s.pushes["full"], s.pushes["eds"],
		s.responses[resourcev3.ClusterType], s.responses[resourcev3.EndpointType],
		s.goroutines, pipeline.MiB(s.heap), pipeline.MiB(s.rss), converged, s.worst)
}

func growth(from, to float64) float64 {
	if from == 0 {
		return 0
	}
	return (to - from) / from
}

// summary writes the verdict.
func (r *result) summary(out io.Writer, cfg config) {
	var kinds []string
	for k, n := range r.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", kindNames[k], n))
	}
	fmt.Fprintf(out, "\nchanges: %s\n", strings.Join(kinds, ", "))
	fmt.Fprintf(out, "converged: %d of %d streams hold the controller's final state (%.1f s after the load stopped)\n",
		r.converged, r.streams, r.convergedIn.Seconds())
	verdict := func(flat bool) string {
		if flat {
			return "flat"
		}
		return "GREW"
	}
	fmt.Fprintf(out, "goroutines: %d at the end of the warm-up, %d at the end of the load (%+.1f%%, tolerance +%.0f%%): %s\n",
		r.warm.goroutines, r.end.goroutines, 100*r.goroutineGrowth, 100*cfg.tolerance, verdict(r.goroutinesFlat))
	fmt.Fprintf(out, "RSS: %.1f MiB at the end of the warm-up, %.1f MiB at the end of the load (%+.1f%%, tolerance +%.0f%%): %s\n",
		pipeline.MiB(r.warm.rss), pipeline.MiB(r.end.rss), 100*r.rssGrowth, 100*cfg.tolerance, verdict(r.rssGrowth <= cfg.tolerance))
	fmt.Fprintf(out, "live heap: %.1f MiB at the end of the warm-up, %.1f MiB at the end of the load\n",
		pipeline.MiB(r.warm.heap), pipeline.MiB(r.end.heap))
}

package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// p3 compares the process CPU time of one single-instance change pushed
// incrementally (the real pipeline's decision) with the same change forced
// to a full push (a ConfigUpdate{Full} for its service, as a changed
// ServiceEntry causes), rounds interleaved in one run.
func p3(opts options) ([]row, error) {
	params := fmt.Sprintf("%d services × %d instances, %d streams (CDS wildcard + 1 CLA each), %d rounds each, debounce.after=100ms",
		opts.services, opts.instances, opts.p3Streams, opts.rounds)
	params += policyParams()
	gen := pipeline.NewGenerator(opts.services, opts.instances)
	b, err := startServingBridge(gen, true)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streams, conns, err := connectP3(ctx, b, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range streams {
			s.close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}()

	idle := idleRate(time.Second)
	host := b.host(0)
	gen0 := 0
	round := func(full bool) (time.Duration, error) {
		settle()
		select { // drop the push count of earlier pushes
		case <-b.XDS.Sequence():
		default:
		}
		before := streams[0].count.Load()
		start, c0 := time.Now(), cpuTime()
		gen0++
		gen.Change(0, gen0)
		if full {
			b.XDS.ConfigUpdate(&model.PushRequest{
				Full:           true,
				ConfigsUpdated: map[model.ConfigKey]struct{}{model.ServiceKey(namespace, host): {}},
				Reason:         model.NewReason(model.ServiceUpdate),
			})
		}
		select {
		case <-b.XDS.Sequence():
		case <-time.After(10 * time.Second):
			return 0, fmt.Errorf("no push within 10s")
		}
		deadline := time.Now().Add(10 * time.Second)
		for streams[0].count.Load() == before {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("the watching stream got nothing within 10s")
			}
			time.Sleep(100 * time.Microsecond)
		}
		wall := time.Since(start)
		used := cpuTime() - c0
		debugf("P3 full=%v wall=%s cpu=%s idle=%s", full, wall, used, time.Duration(idle*float64(wall)))
		return used - time.Duration(idle*float64(wall)), nil
	}
	for range 2 { // warm up both paths
		if _, err := round(false); err != nil {
			return nil, err
		}
		if _, err := round(true); err != nil {
			return nil, err
		}
	}
	if opts.p3Profile != "" {
		f, err := os.Create(opts.p3Profile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	var inc, full []time.Duration
	for range opts.rounds {
		d, err := round(false)
		if err != nil {
			return nil, fmt.Errorf("incremental: %w", err)
		}
		inc = append(inc, d)
		if d, err = round(true); err != nil {
			return nil, fmt.Errorf("full: %w", err)
		}
		full = append(full, d)
	}
	slices.Sort(inc)
	slices.Sort(full)
	mi, mf := pct(inc, 50), pct(full, 50)
	if opts.scale {
		return []row{
			{"Scale CPU per change: incremental", params, fmt.Sprintf("%s (mean %s)", ms(mi), ms(mean(inc))), "ms CPU, median (target ≤ 2)"},
			{"Scale CPU per change: forced full", params, fmt.Sprintf("%s (mean %s)", ms(mf), ms(mean(full))), "ms CPU, median"},
		}, nil
	}
	return []row{
		{"P3 CPU per change: incremental", params, fmt.Sprintf("%s (mean %s)", ms(mi), ms(mean(inc))), "ms CPU, median"},
		{"P3 CPU per change: forced full", params, fmt.Sprintf("%s (mean %s)", ms(mf), ms(mean(full))), "ms CPU, median"},
		{"P3 incremental / full", params, fmt.Sprintf("1/%.0f (%.4f)", float64(mf)/float64(mi), float64(mi)/float64(mf)),
			"ratio of medians (target ≤ 1/100)"},
	}, nil
}

// connectP3 opens the streams: each asks CDS by wildcard and the
// ClusterLoadAssignment of one service (stream 0: the changing one).
func connectP3(ctx context.Context, b *bridge, opts options) ([]*adsStream, []*grpc.ClientConn, error) {
	conns, err := pipeline.Dial(b.address(), opts.p3Streams)
	if err != nil {
		return nil, nil, err
	}
	var streams []*adsStream
	for i := range opts.p3Streams {
		name := b.clusterName(i % opts.services)
		s, err := openStream(ctx, conns[i/pipeline.StreamsPerConn], fmt.Sprintf("bench-p3-%d", i), func(s *adsStream, r ads.Receipt) {
			if r.Resp.TypeUrl == resourcev3.EndpointType {
				s.count.Add(1)
			}
		})
		if err != nil {
			return nil, conns, err
		}
		streams = append(streams, s)
		if err := s.subscribe(resourcev3.ClusterType, nil); err != nil {
			return nil, conns, err
		}
		if err := s.subscribe(resourcev3.EndpointType, []string{name}); err != nil {
			return nil, conns, err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, s := range streams {
		for s.count.Load() == 0 {
			if time.Now().After(deadline) {
				return nil, conns, fmt.Errorf("a stream got no ClusterLoadAssignment within 2m")
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(time.Second) // initial CDS responses and ACKs settle
	return streams, conns, nil
}

// idleRate is the process's CPU time per wall time while nothing changes
// (gRPC keepalives, timers), subtracted from each round.
func idleRate(d time.Duration) float64 {
	settle()
	start, c0 := time.Now(), cpuTime()
	time.Sleep(d)
	return float64(cpuTime()-c0) / float64(time.Since(start))
}

// settle collects garbage, returns freed memory to the OS and lets the
// runtime's background sweeping and scavenging finish, so that a measured
// window is not charged for an earlier round's garbage.
func settle() {
	debug.FreeOSMemory()
	time.Sleep(50 * time.Millisecond)
}

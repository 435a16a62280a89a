package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// fanout is the client side of P2: watchers subscribe to the changing
// service's ClusterLoadAssignment, others to one other service's each.
type fanout struct {
	conns    []*grpc.ClientConn
	watchers []*adsStream
	others   []*adsStream
}

// p2 is the churn fan-out: one instance of one service changes per round;
// it reports the event-to-receive latency over every watching stream and
// round, the event-to-last-receive per round, bytes per change and the
// streams woken.
func p2(opts options, edsDebounce bool) ([]row, error) {
	debounce := "EDS debounce on (debounce.after=100ms)"
	if !edsDebounce {
		debounce = "EDS debounce off"
	}
	params := fmt.Sprintf("%d services × %d instances, %d watching + %d other streams, %d rounds, %s",
		opts.services, opts.instances, opts.watchers, opts.others, opts.rounds, debounce)
	params += " (after 2 warm-up rounds)"
	gen := pipeline.NewGenerator(opts.services, opts.instances)
	b, err := startServingBridge(gen, edsDebounce)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := connectFanout(ctx, b, opts)
	if err != nil {
		return nil, err
	}
	defer f.close()

	var latencies, lasts []time.Duration
	var bytes, woken, othersWoken, extra, other int64
	// The cold sync's garbage is collected once before the rounds, so its GC
	// cycle does not land in one; the rounds' own GC work is measured.
	settle()
	const warmup = 2 // rounds not counted: the first changes after the cold sync
	for round := range warmup + opts.rounds {
		f.reset()
		event := gen.Change(0, round+1)
		if err := f.awaitWatchers(10 * time.Second); err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		// A quiet period catches late or duplicate sends before counting.
		time.Sleep(300 * time.Millisecond)
		if round < warmup {
			continue
		}
		var last time.Duration
		for _, s := range f.watchers {
			lat := time.Duration(s.first.Load() - event.UnixNano())
			latencies = append(latencies, lat)
			last = max(last, time.Duration(s.last.Load()-event.UnixNano()))
			bytes += s.bytes.Load()
			extra += s.count.Load() - 1
			other += s.other.Load()
			woken++
		}
		for _, s := range f.others {
			if n := s.count.Load(); n > 0 {
				othersWoken++
				bytes += s.bytes.Load()
			}
		}
		lasts = append(lasts, last)
		debugf("P2 round %d: last receive %s", round, last)
	}
	slices.Sort(latencies)
	slices.Sort(lasts)
	rounds := int64(opts.rounds)
	return []row{
		{"P2 churn fan-out: event→receive", params,
			fmt.Sprintf("p50 %s / p99 %s / max %s", ms(pct(latencies, 50)), ms(pct(latencies, 99)), ms(latencies[len(latencies)-1])),
			"ms (target p99 ≤ debounce + 100)"},
		{"P2 churn fan-out: event→last receive per round", params,
			fmt.Sprintf("p50 %s / max %s", ms(pct(lasts, 50)), ms(lasts[len(lasts)-1])), "ms"},
		{"P2 churn fan-out: bytes sent per change", params, fmt.Sprintf("%d", bytes/rounds),
			"B (DiscoveryResponse encoded size, summed over streams)"},
		{"P2 churn fan-out: streams woken per change", params,
			fmt.Sprintf("%d watching (%d extra responses), %d others, %d other CLAs sent",
				woken/rounds, extra, othersWoken, other), "streams (target: only that CLA)"},
	}, nil
}

// connectFanout opens the watching and other streams and waits until each
// holds its first ClusterLoadAssignment.
func connectFanout(ctx context.Context, b *bridge, opts options) (*fanout, error) {
	f := &fanout{}
	own := b.clusterName(0)
	total := opts.watchers + opts.others
	for i := 0; i < total; i += pipeline.StreamsPerConn {
		conn, err := ads.Dial(b.address())
		if err != nil {
			f.close()
			return nil, err
		}
		f.conns = append(f.conns, conn)
	}
	for i := range total {
		name := own
		if i >= opts.watchers {
			name = b.clusterName(1 + (i-opts.watchers)%(opts.services-1))
		}
		s, err := openStream(ctx, f.conns[i/pipeline.StreamsPerConn], fmt.Sprintf("bench-p2-%d", i),
			func(s *adsStream, r ads.Receipt) { s.record(r, name) })
		if err != nil {
			f.close()
			return nil, err
		}
		if i < opts.watchers {
			f.watchers = append(f.watchers, s)
		} else {
			f.others = append(f.others, s)
		}
		if err := s.subscribe(resourcev3.EndpointType, []string{name}); err != nil {
			f.close()
			return nil, err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, s := range slices.Concat(f.watchers, f.others) {
		for s.count.Load() == 0 {
			if time.Now().After(deadline) {
				f.close()
				return nil, fmt.Errorf("a stream got no ClusterLoadAssignment within a minute")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Let the initial ACKs settle before the first round.
	time.Sleep(500 * time.Millisecond)
	return f, nil
}

// awaitWatchers waits until every watcher received a response.
func (f *fanout) awaitWatchers(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range f.watchers {
		for s.count.Load() == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("a watching stream got nothing within %s", timeout)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}
	return nil
}

func (f *fanout) reset() {
	for _, s := range f.watchers {
		s.reset()
	}
	for _, s := range f.others {
		s.reset()
	}
}

func (f *fanout) close() {
	for _, s := range slices.Concat(f.watchers, f.others) {
		s.close()
	}
	for _, c := range f.conns {
		_ = c.Close()
	}
}

package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
)

// p1 is the cold sync: services × instances listed once → time until
// HasSynced (Syncer ready and Store flushed, cmd/bridge's gate) and until
// one ADS client holds every ClusterLoadAssignment, both from the start of
// the bridge; and the bridge's live heap per instance.
func p1(opts options, mode translate.EndpointMode) ([]row, error) {
	params := fmt.Sprintf("%d services × %d instances, endpoints=%s", opts.services, opts.instances, mode) + policyParams()
	empty, err := emptyBridgeHeap(mode)
	if err != nil {
		return nil, err
	}
	gen := pipeline.NewGenerator(opts.services, opts.instances)
	b, err := startBridge(gen, bridgeConfig{endpoints: mode, debounceAfter: 100 * time.Millisecond, edsDebounce: true})
	if err != nil {
		return nil, err
	}
	defer b.stop()
	if err := b.waitServing(2 * time.Minute); err != nil {
		return nil, err
	}
	serving := time.Since(b.Started)
	synced := b.Synced.Sub(b.Started)
	// The heap is read before any client connects, so no client state and
	// no per-stream response is counted.
	heap := pipeline.LiveHeap()
	if opts.memProfile != "" {
		if err := writeHeapProfile(opts.memProfile + "." + string(mode)); err != nil {
			return nil, err
		}
	}
	perInstance := (float64(heap) - float64(empty)) / float64(opts.services*opts.instances)

	all, err := fetchAll(b, opts.services)
	if err != nil {
		return nil, err
	}
	name, syncTarget := "P1", "s (target ≤ 3)"
	if opts.scale {
		name, syncTarget = "Scale", "s (target ≤ 10)"
	}
	rows := []row{
		{name + " cold sync: HasSynced", params, seconds(synced), syncTarget},
		{name + " cold sync: client holds every CLA", params + fmt.Sprintf(" (first full push done, serving, at %s s)", seconds(serving)),
			seconds(all), syncTarget},
		{name + " bridge memory", params + fmt.Sprintf(", live heap %.1f MiB − empty %.1f MiB", mib(heap), mib(empty)),
			fmt.Sprintf("%.0f", perInstance), "B/instance (target ≤ 1024)"},
	}
	if opts.scale {
		rows = append(rows, row{name + " bridge live heap", params, fmt.Sprintf("%.0f", mib(heap)), "MiB (target ≤ 1536)"})
	}
	return rows, nil
}

// emptyBridgeHeap is the live heap with a serving bridge that has no
// services.
func emptyBridgeHeap(mode translate.EndpointMode) (uint64, error) {
	b, err := startBridge(pipeline.NewGenerator(0, 0), bridgeConfig{endpoints: mode, debounceAfter: 100 * time.Millisecond, edsDebounce: true})
	if err != nil {
		return 0, err
	}
	defer b.stop()
	if err := b.waitServing(time.Minute); err != nil {
		return 0, err
	}
	return pipeline.LiveHeap(), nil
}

// fetchAll connects one client as Envoy does (CDS by wildcard, then EDS for
// every cluster it got) and returns the time from the bridge's start until
// it holds a ClusterLoadAssignment for each of the want clusters.
func fetchAll(b *bridge, want int) (time.Duration, error) {
	conn, err := ads.Dial(b.address())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan time.Time, 1)
	held := make(map[string]bool, want) // the receive callback's only
	var holding atomic.Int64            // len(held), for the timeout's message
	var s *adsStream
	s, err = openStream(ctx, conn, "bench-p1", func(s *adsStream, r ads.Receipt) {
		switch r.Resp.TypeUrl {
		case resourcev3.ClusterType:
			names := make([]string, 0, len(r.Resp.Resources))
			for _, res := range r.Resp.Resources {
				names = append(names, ads.ResourceName(res.GetValue()))
			}
			// Sent before this response is ACKed, like Envoy's CDS→EDS.
			_ = s.subscribe(resourcev3.EndpointType, names)
		case resourcev3.EndpointType:
			for _, res := range r.Resp.Resources {
				held[ads.ResourceName(res.GetValue())] = true
			}
			holding.Store(int64(len(held)))
			if len(held) == want {
				select {
				case done <- r.At:
				default:
				}
			}
		}
	})
	if err != nil {
		return 0, err
	}
	defer s.close()
	if err := s.subscribe(resourcev3.ClusterType, nil); err != nil {
		return 0, err
	}
	select {
	case at := <-done:
		return at.Sub(b.Started), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("client holds %d of %d ClusterLoadAssignments after 2m", holding.Load(), want)
	}
}

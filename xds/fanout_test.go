package xds

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// Fan-out (rules 7, 11 and 12): who is woken by a push, slow clients, many
// streams.

// eventually is harness.EventuallyTrue with the package's wait: for states
// no stream reports (a send in progress on the server).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	harness.EventuallyTrue(t, wait, what, cond)
}

func edsPushes(t *testing.T) float64 {
	return tallied(t, metricStreamPushes, resourcev3.EndpointType)
}

func TestIncrementalPushWakesOnlySubscribers(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("b.local", 80))
	ts := startReadyServer(t, src)
	conn := rawClient(t, ts.Addr().String())
	const perCluster = 4 // SotW and Delta streams each, per cluster
	type sub struct {
		sotw  *sotwClient
		delta *deltaClient
	}
	subscribe := func(cluster string) []sub {
		var subs []sub
		for range perCluster {
			s := sub{sotw: openSotW(t, conn), delta: openDelta(t, conn)}
			s.sotw.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{cluster}})
			s.sotw.ack(s.sotw.next(t), cluster)
			s.sotw.barrier()
			s.delta.send(&discovery.DeltaDiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{cluster}})
			s.delta.ack(s.delta.next(t))
			s.delta.barrier()
			subs = append(subs, s)
		}
		return subs
	}
	onA, onB := subscribe(clusterA), subscribe(clusterB)
	watches := ts.caches.endpoints.cache
	if n := watches.NumWatches(clusterB); n != 2*perCluster {
		t.Fatalf("%d watches on b before the push, want %d", n, 2*perCluster)
	}

	before := edsPushes(t)
	ts.setEndpoints(t, "a.local", "10.0.0.1")
	// A watch the cache answers is removed at once, inside the push: b's
	// are all still open, so no stream of b was woken.
	if n := watches.NumWatches(clusterB); n != 2*perCluster {
		t.Errorf("%d watches on b after a's push, want %d untouched", n, 2*perCluster)
	}
	for _, s := range onA {
		assertEqual(t, sorted(clusterA), resourceNames(t, s.sotw.next(t)))
		assertEqual(t, sorted(clusterA), deltaNames(s.delta.next(t)))
	}
	if got := edsPushes(t) - before; got != 2*perCluster {
		t.Errorf("a's push sent %v EDS responses, want %d (its subscribers only)", got, 2*perCluster)
	}

	ts.setEndpoints(t, "b.local", "10.0.1.1")
	for _, s := range onB {
		assertEqual(t, sorted(clusterB), resourceNames(t, s.sotw.next(t)))
		assertEqual(t, sorted(clusterB), deltaNames(s.delta.next(t)))
	}
}

// bigEndpoints returns n endpoints of port 80, so that the assignment's
// response exceeds twice gRPC's 64 KiB stream window and write quota.
func bigEndpoints(n int) []*model.Endpoint {
	eps := make([]*model.Endpoint, 0, n)
	for i := range n {
		eps = append(eps, ep(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), 80, ""))
	}
	return eps
}

func TestSlowStreamsDoNotBlockOthers(t *testing.T) {
	src := &staticSource{}
	src.set(grpcService("a.local", 80), grpcService("big1.local", 80), grpcService("big2.local", 80))
	ts := startServer(t, src, "127.0.0.1:0")
	ts.EDSUpdate("test", "big1.local", "mesh", bigEndpoints(6000), time.Time{})
	ts.EDSUpdate("test", "big2.local", "mesh", bigEndpoints(6000), time.Time{})
	close(ts.ready)
	<-ts.Serving()
	ts.waitPushes(t, 1)
	addr := ts.Addr().String()
	big1, big2 := gen.ClusterName(80, "big1.local"), gen.ClusterName(80, "big2.local")

	// Clients that never read (raw streams: an ads client reads every
	// response): with fixed 64 KiB windows, the server's second send to
	// each blocks in gRPC flow control. There are more of them than the
	// ADS server has workers (ads rule 9).
	stuck := 2*runtime.GOMAXPROCS(0) + 2
	for range stuck {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := edsPushes(t)
		if err := stream.Send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{big1}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "first response to a stuck stream", func() bool { return edsPushes(t) > before })
		if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{big1, big2}, ResponseNonce: "1"}); err != nil {
			t.Fatal(err)
		}
	}

	// A client that reads but never ACKs gets nothing more and holds nothing.
	conn := rawClient(t, addr)
	lazy := openSotW(t, conn)
	lazy.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{clusterA}})
	lazy.next(t)

	good := openSotW(t, conn)
	good.send(&discovery.DiscoveryRequest{Node: grpcNode(), TypeUrl: resourcev3.EndpointType, ResourceNames: []string{clusterA}})
	good.ack(good.next(t), clusterA)
	ts.setEndpoints(t, "a.local", "10.9.9.9")
	assertEqual(t, []string{"10.9.9.9"}, claAddresses(t, good.next(t).GetResources()[0]))
}

// convergeClient runs one client: it subscribes to the assignments of
// names, ACKs everything, calls started after the first response, and
// returns nil once every assignment it subscribes to has the addresses of
// want.
type convergeClient func(ctx context.Context, names []string, want map[string][]string, started func()) error

func sotwConverge(conn *grpc.ClientConn) convergeClient {
	return func(ctx context.Context, names []string, want map[string][]string, started func()) error {
		s, err := ads.OpenSotW(ctx, conn, ads.Options{Node: grpcNode()})
		if err != nil {
			return err
		}
		s.Receive(func(ads.Receipt) error {
			if started != nil {
				started()
				started = nil
			}
			return nil
		})
		if err := s.Subscribe(resourcev3.EndpointType, names); err != nil {
			return err
		}
		if err := awaitView(ctx, s, names, want); err != nil {
			return fmt.Errorf("sotw %v: %w", names, err)
		}
		return nil
	}
}

func deltaConverge(conn *grpc.ClientConn) convergeClient {
	return func(ctx context.Context, names []string, want map[string][]string, started func()) error {
		d, err := ads.OpenDelta(ctx, conn, ads.Options{Node: grpcNode()})
		if err != nil {
			return err
		}
		d.Receive(func(ads.DeltaReceipt) error {
			if started != nil {
				started()
				started = nil
			}
			return nil
		})
		if err := d.Subscribe(resourcev3.EndpointType, names, nil); err != nil {
			return err
		}
		if err := awaitView(ctx, d, names, want); err != nil {
			return fmt.Errorf("delta %v: %w", names, err)
		}
		return nil
	}
}

// awaitView waits until the assignments c holds of names have the addresses
// of want.
func awaitView(ctx context.Context, c interface {
	Wait(context.Context, func() error) error
	Resources(string) map[string]*anypb.Any
}, names []string, want map[string][]string) error {
	return c.Wait(ctx, func() error {
		view := make(map[string][]string)
		for name, a := range c.Resources(resourcev3.EndpointType) {
			_, addrs, err := decodeCLA(a)
			if err != nil {
				return err
			}
			view[name] = addrs
		}
		if !converged(view, names, want) {
			return fmt.Errorf("view %v", view)
		}
		return nil
	})
}

func converged(view map[string][]string, names []string, want map[string][]string) bool {
	for _, n := range names {
		if !slices.Equal(view[n], want[n]) {
			return false
		}
	}
	return true
}

func TestManyStreamsConvergeUnderChurn(t *testing.T) {
	const services, rounds, streams = 10, 20, 200
	src := &staticSource{}
	var all []*model.Service
	host := func(i int) string { return fmt.Sprintf("s%d.local", i) }
	for i := range services {
		all = append(all, grpcService(host(i), 80))
	}
	src.set(all...)
	ts := startReadyServer(t, src)
	addrsAt := func(svc, round int) []string {
		return []string{fmt.Sprintf("10.%d.%d.1", svc, round), fmt.Sprintf("10.%d.%d.2", svc, round)}
	}
	want := make(map[string][]string)
	for i := range services {
		want[gen.ClusterName(80, host(i))] = addrsAt(i, rounds)
	}

	var conns []*grpc.ClientConn
	for range 4 {
		conns = append(conns, rawClient(t, ts.Addr().String()))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	errs := make(chan error, streams)
	var started sync.WaitGroup
	started.Add(streams)
	for i := range streams {
		run := sotwConverge(conns[i%len(conns)])
		if i%2 == 1 {
			run = deltaConverge(conns[i%len(conns)])
		}
		names := []string{gen.ClusterName(80, host(i%services)), gen.ClusterName(80, host((i/2+3)%services))}
		once := sync.OnceFunc(started.Done) // also when run fails before its first response
		go func() {
			defer once()
			errs <- run(ctx, slices.Compact(slices.Sorted(slices.Values(names))), want, once)
		}()
	}
	started.Wait() // every stream subscribed: the churn happens under them
	for round := 1; round <= rounds; round++ {
		for i := range services {
			var eps []*model.Endpoint
			for _, a := range addrsAt(i, round) {
				eps = append(eps, ep(a, 80, ""))
			}
			ts.EDSUpdate("test", host(i), "mesh", eps, time.Time{})
		}
		if round%5 == 0 {
			ts.waitPushes(t, 1)
		}
	}
	for range streams {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

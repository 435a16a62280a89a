package ads_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// wait bounds every wait of these tests.
const wait = 10 * time.Second

// testServer is go-control-plane's ADS server over a snapshot cache: a real
// xDS server that knows nothing of meshbridge. The cache is not in its ADS
// mode, which answers a SotW request only when it names every resource of
// its type.
type testServer struct {
	cache cachev3.SnapshotCache
	conn  *grpc.ClientConn
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	cache := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	srv := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, serverv3.NewServer(t.Context(), cache, nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := ads.Dial(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &testServer{cache: cache, conn: conn}
}

// set gives node the snapshot version: a cluster per host, each with an
// assignment of the host's addresses (port 80).
func (ts *testServer) set(t *testing.T, node, version string, hosts map[string][]string) {
	t.Helper()
	var clusters, clas []types.Resource
	for _, host := range slices.Sorted(func(yield func(string) bool) {
		for h := range hosts {
			if !yield(h) {
				return
			}
		}
	}) {
		clusters = append(clusters, &cluster.Cluster{Name: host, ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS}})
		cla := &endpoint.ClusterLoadAssignment{ClusterName: host}
		var lbs []*endpoint.LbEndpoint
		for _, addr := range hosts[host] {
			lbs = append(lbs, &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Address: addr, PortSpecifier: &core.SocketAddress_PortValue{PortValue: 80},
				}}},
			}}})
		}
		cla.Endpoints = []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}}
		clas = append(clas, cla)
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType: clusters, resourcev3.EndpointType: clas,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.cache.SetSnapshot(t.Context(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// client is what the tests read of a SotW or Delta stream.
type client interface {
	State(typeURL string) ads.TypeState
	Names(typeURL string) []string
	Resources(typeURL string) map[string]*anypb.Any
	Await(t testing.TB, timeout time.Duration, what string, cond func() error)
}

// holds waits until c holds exactly the clusters of want with their
// assignments' endpoints.
func holds(t *testing.T, c client, what string, want map[string][]string) {
	t.Helper()
	c.Await(t, wait, what, func() error {
		got := map[string][]string{}
		for _, name := range c.Names(resourcev3.ClusterType) {
			got[name] = nil
		}
		for name, a := range c.Resources(resourcev3.EndpointType) {
			_, eps, err := ads.Endpoints(a)
			if err != nil {
				return err
			}
			if _, ok := got[name]; !ok {
				return fmt.Errorf("holds the assignment of %s, not a cluster", name)
			}
			got[name] = eps
		}
		if len(got) != len(want) {
			return fmt.Errorf("holds %v, want %v", got, want)
		}
		for name, eps := range want {
			if g, ok := got[name]; !ok || !slices.Equal(g, eps) {
				return fmt.Errorf("holds %v, want %v", got, want)
			}
		}
		return nil
	})
}

func TestFollowCDS(t *testing.T) {
	for _, mode := range []string{"sotw", "delta"} {
		t.Run(mode, func(t *testing.T) {
			ts := startServer(t)
			node := &core.Node{Id: "follow-" + mode}
			ts.set(t, node.Id, "1", map[string][]string{"a": {"10.0.0.1"}, "b": {"10.0.0.2"}})
			opts := ads.Options{Node: node, FollowCDS: true}
			var c client
			if mode == "sotw" {
				s := ads.NewSotW(t, ts.conn, opts, nil)
				if err := s.Subscribe(resourcev3.ClusterType, nil); err != nil {
					t.Fatal(err)
				}
				c = s
			} else {
				d := ads.NewDelta(t, ts.conn, opts, nil)
				if err := d.Subscribe(resourcev3.ClusterType, nil, nil); err != nil {
					t.Fatal(err)
				}
				c = d
			}
			holds(t, c, "the first snapshot", map[string][]string{"a": {"10.0.0.1:80"}, "b": {"10.0.0.2:80"}})

			ts.set(t, node.Id, "2", map[string][]string{"b": {"10.0.0.3"}, "c": {"10.0.0.4"}})
			holds(t, c, "the second snapshot", map[string][]string{"b": {"10.0.0.3:80"}, "c": {"10.0.0.4:80"}})
			if st := c.State(resourcev3.EndpointType); !slices.Equal(st.Names, []string{"b", "c"}) || st.Wildcard {
				t.Errorf("EDS subscription %v (wildcard %v), want [b c]", st.Names, st.Wildcard)
			}
			if st := c.State(resourcev3.ClusterType); !st.Wildcard || st.ACKed != st.Version || st.NACKs != 0 {
				t.Errorf("CDS state %+v, want a wildcard with its latest version ACKed", st)
			}
		})
	}
}

// TestHandlerNACKs: a handler's error NACKs the response, quoting the
// version last ACKed; the next version is ACKed. go-control-plane answers a
// NACK whose version differs from its cache's with that version again, so
// version 1 may be received and NACKed more than once.
func TestHandlerNACKs(t *testing.T) {
	ts := startServer(t)
	ts.set(t, "nacker", "1", map[string][]string{"a": {"10.0.0.1"}})
	var rejected atomic.Int64
	s := ads.NewSotW(t, ts.conn, ads.Options{Node: &core.Node{Id: "nacker"}}, func(r ads.Receipt) error {
		if r.Resp.GetVersionInfo() == "1" {
			rejected.Add(1)
			return errors.New("rejected by test")
		}
		return nil
	})
	if err := s.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	s.Await(t, wait, "the NACK", func() error {
		if st := s.State(resourcev3.ClusterType); st.NACKs < 1 || st.NACKed != "1" || st.ACKed != "" {
			return fmt.Errorf("CDS state %+v", st)
		}
		return nil
	})
	if names := s.Names(resourcev3.ClusterType); len(names) != 0 {
		t.Errorf("holds the rejected clusters %v", names)
	}
	ts.set(t, "nacker", "2", map[string][]string{"a": {"10.0.0.1"}, "b": {"10.0.0.2"}})
	s.Await(t, wait, "the next version ACKed", func() error {
		if st := s.State(resourcev3.ClusterType); st.ACKed != "2" || st.NACKed != "1" || st.NACKs < 1 {
			return fmt.Errorf("CDS state %+v", st)
		}
		return nil
	})
	assertEqual(t, []string{"a", "b"}, s.Names(resourcev3.ClusterType))
	if st := s.State(resourcev3.ClusterType); rejected.Load() != int64(st.NACKs) {
		t.Errorf("the handler rejected %d responses, the stream NACKed %d", rejected.Load(), st.NACKs)
	}
}

// TestManual: a Manual stream answers nothing; Next returns responses in
// order, ErrTimeout when none comes, and the stream's error once it ended.
func TestManual(t *testing.T) {
	ts := startServer(t)
	ts.set(t, "manual", "1", map[string][]string{"a": {"10.0.0.1"}, "b": {"10.0.0.2"}})
	ctx, cancel := context.WithCancel(t.Context())
	s, err := ads.OpenSotW(ctx, ts.conn, ads.Options{Node: &core.Node{Id: "manual"}, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Receive(nil)
	if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	first, err := s.Next(wait)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.State(resourcev3.EndpointType); st.Responses != 1 || st.ACKed != "" || len(s.Names(resourcev3.EndpointType)) != 0 {
		t.Errorf("before the ACK: %+v holding %v, want one response, nothing accepted", st, s.Names(resourcev3.EndpointType))
	}
	// An ACK that drops b: a is all the stream holds.
	if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"a"},
		VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, []string{"a"}, s.Names(resourcev3.EndpointType))
	assertEqual(t, "1", s.State(resourcev3.EndpointType).ACKed)

	if _, err := s.Next(50 * time.Millisecond); !errors.Is(err, ads.ErrTimeout) {
		t.Errorf("Next with nothing sent: %v, want ErrTimeout", err)
	}
	ts.set(t, "manual", "2", map[string][]string{"a": {"10.0.0.3"}, "b": {"10.0.0.2"}})
	second, err := s.Next(wait)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.NACK(second, "rejected by test"); err != nil {
		t.Fatal(err)
	}
	st := s.State(resourcev3.EndpointType)
	// The NACK quotes version 1 while the server holds 2, so the server may
	// answer it with version 2 again (go-control-plane does): such resends
	// add responses, each version 2, and move the nonce.
	want := ads.TypeState{Responses: 2, Version: "2", Nonce: second.GetNonce(), ACKed: "1", NACKs: 1, NACKed: "2",
		Names: []string{"a"}}
	if st.Responses > 2 {
		want.Responses, want.Nonce = st.Responses, st.Nonce
	}
	assertEqual(t, want, st)

	cancel()
	for {
		resp, err := s.Next(wait)
		if err == nil && resp.GetVersionInfo() == "2" {
			continue // a resend of version 2, queued before the end
		}
		if status.Code(err) != codes.Canceled {
			t.Errorf("Next after the end: %v, %v; want Canceled", resp, err)
		}
		break
	}
	<-s.Done()
	if err := s.Wait(t.Context(), func() error { return errors.New("never") }); !errors.Is(err, ads.ErrEnded) {
		t.Errorf("Wait on an ended stream: %v, want ErrEnded", err)
	}
}

// TestWaitDeadline: Wait returns the context's error with the condition's
// last error.
func TestWaitDeadline(t *testing.T) {
	ts := startServer(t)
	s := ads.NewSotW(t, ts.conn, ads.Options{Node: &core.Node{Id: "idle"}}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := s.Wait(ctx, func() error { return errors.New("no clusters") })
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "context deadline exceeded: no clusters" {
		t.Errorf("Wait = %v, want the deadline and the condition's error", err)
	}
}

func assertEqual(t *testing.T, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

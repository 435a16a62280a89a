package xds

import (
	"context"
	"slices"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// wait bounds every expected receive; no assertion sleeps.
const wait = 10 * time.Second

// receiver reads one stream in its own goroutine so that a test can wait for
// the next message with a deadline.
type receiver[T any] struct {
	msgs chan T
	err  chan error
}

func startReceiving[T any](recv func() (T, error)) *receiver[T] {
	r := &receiver[T]{msgs: make(chan T, 16), err: make(chan error, 1)}
	go func() {
		for {
			m, err := recv()
			if err != nil {
				r.err <- err
				return
			}
			r.msgs <- m
		}
	}()
	return r
}

// next returns the next message, or fails the test after wait.
func (r *receiver[T]) next(t *testing.T) T {
	t.Helper()
	select {
	case m := <-r.msgs:
		return m
	case err := <-r.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(wait):
		t.Fatalf("nothing received within %v", wait)
	}
	var zero T
	return zero
}

// end waits for the stream to end and returns its error; a message
// received first, or a stream still open after wait, fails the test.
func (r *receiver[T]) end(t *testing.T) error {
	t.Helper()
	select {
	case m := <-r.msgs:
		t.Fatalf("received %v, want the stream to end", m)
	case err := <-r.err:
		return err
	case <-time.After(wait):
		t.Fatalf("stream still open after %v", wait)
	}
	return nil
}

// sotwClient is a raw SotW ADS stream.
type sotwClient struct {
	t      *testing.T
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	*receiver[*discovery.DiscoveryResponse]
	cancel context.CancelFunc
}

func openSotW(t *testing.T, conn *grpc.ClientConn) *sotwClient {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return &sotwClient{t: t, stream: stream, receiver: startReceiving(stream.Recv), cancel: cancel}
}

func (c *sotwClient) send(req *discovery.DiscoveryRequest) {
	c.t.Helper()
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send %s: %v", req.GetTypeUrl(), err)
	}
}

// ack ACKs resp, keeping the subscription to names.
func (c *sotwClient) ack(resp *discovery.DiscoveryResponse, names ...string) {
	c.t.Helper()
	c.send(&discovery.DiscoveryRequest{
		TypeUrl: resp.GetTypeUrl(), ResourceNames: names,
		VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
	})
}

// deltaClient is a raw Delta (incremental) ADS stream.
type deltaClient struct {
	t      *testing.T
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	*receiver[*discovery.DeltaDiscoveryResponse]
	cancel context.CancelFunc
}

func openDelta(t *testing.T, conn *grpc.ClientConn) *deltaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return &deltaClient{t: t, stream: stream, receiver: startReceiving(stream.Recv), cancel: cancel}
}

func (c *deltaClient) send(req *discovery.DeltaDiscoveryRequest) {
	c.t.Helper()
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send %s: %v", req.GetTypeUrl(), err)
	}
}

// ack ACKs resp.
func (c *deltaClient) ack(resp *discovery.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
}

// deltaNames returns the sorted names of the resources in resp.
func deltaNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var names []string
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	slices.Sort(names)
	return names
}

// deltaVersions returns the version of each resource in resp, by name.
func deltaVersions(resp *discovery.DeltaDiscoveryResponse) map[string]string {
	out := make(map[string]string)
	for _, r := range resp.GetResources() {
		out[r.GetName()] = r.GetVersion()
	}
	return out
}

// sorted returns names sorted, nil when empty, for comparisons.
func sorted(names ...string) []string {
	if len(names) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(names))
}

// claAddresses unmarshals a ClusterLoadAssignment and returns its endpoint
// addresses in order.
func claAddresses(t *testing.T, a *anypb.Any) []string {
	t.Helper()
	_, out, err := decodeCLA(a)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeCLA returns a ClusterLoadAssignment's name and endpoint addresses;
// for use off the test goroutine.
func decodeCLA(a *anypb.Any) (string, []string, error) {
	cla := &endpoint.ClusterLoadAssignment{}
	if err := a.UnmarshalTo(cla); err != nil {
		return "", nil, err
	}
	var out []string
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			out = append(out, lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	return cla.GetClusterName(), out, nil
}
